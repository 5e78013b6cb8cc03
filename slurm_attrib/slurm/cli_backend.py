"""The default backend: ``sacct --parsable2``, ``scontrol -o`` and ``sacctmgr -i``, on every Slurm
version. Fixed field lists, no shell, a timeout on every call (``sacct --json`` is avoided: it
misreports exit codes on 22.05 and 23.02)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, tzinfo
from typing import Optional

from . import hostlist
from .errors import SlurmCommandError
from .parse import parse_events, parse_partition_nodes, parse_sacct, parse_scontrol_job, parse_scontrol_node
from .records import AcctRecord, ControllerJob, NodeEvent, NodeInfo
from .runner import CommandResult, CommandRunner, run_command
from .states import FAILED_STATES, HISTORY_STATES

SACCT_FIELDS = ["jobid", "jobidraw", "state", "exitcode", "derivedexitcode", "nodelist", "user", "uid",
                "partition", "cluster", "jobname", "start", "end", "workdir", "admincomment"]
FAILED_JOB_FIELDS = ["jobid", "jobidraw", "cluster", "user", "partition", "nodelist", "start", "end", "state",
                     "exitcode", "derivedexitcode"]  # the backfill query (failed_jobs), also without a header
EVENT_FORMAT = "NodeName,TimeStart,TimeEnd,State,Reason"
log = logging.getLogger(__name__)
NOT_IN_DB = ("nothing modified", "didn't affect anything", "did not affect anything")


def _slurm_time(when: datetime, tz: Optional[tzinfo] = None) -> str:
    """Slurm reads times without a zone in its local zone (``tz``, default this host's): convert to it."""
    return when.astimezone(tz).strftime("%Y-%m-%dT%H:%M:%S")


class CliSlurm:
    """SlurmAccess through the command-line tools; ``runner`` is injectable (tests replay captures)."""

    name = "cli"

    def __init__(self, runner: CommandRunner = run_command, timeout_s: float = 20.0,
                 cluster: str = "", tz: Optional[tzinfo] = None) -> None:
        self.runner = runner
        self.timeout_s = timeout_s
        self.cluster = cluster
        self.tz = tz

    def _run(self, argv: list[str], check: bool = True) -> CommandResult:
        result = self.runner(argv, self.timeout_s)
        if check and result.returncode != 0:
            message = (result.stderr or result.stdout).strip().splitlines()
            raise SlurmCommandError(f"{argv[0]} exited {result.returncode}: {message[-1] if message else ''}",
                                    result.argv, result.returncode, result.stderr)
        return result

    def _cluster_args(self) -> list[str]:
        return [f"--clusters={self.cluster}"] if self.cluster else []

    def job_records(self, job_id: str) -> list[AcctRecord]:
        argv = ["sacct", "--parsable2", "--noheader", "--allusers", f"--format={','.join(SACCT_FIELDS)}",
                f"--jobs={job_id}", *self._cluster_args()]
        return parse_sacct(self._run(argv).stdout, SACCT_FIELDS, self.tz)

    def node_history(self, nodes: Sequence[str], since: datetime, until: datetime,
                     states: Sequence[str] = HISTORY_STATES) -> list[AcctRecord]:
        if not nodes:
            return []
        argv = ["sacct", "--parsable2", "--noheader", "--allusers", "--allocations",
                f"--format={','.join(SACCT_FIELDS)}", f"--nodelist={hostlist.compress(list(nodes))}",
                f"--state={','.join(states)}", f"--starttime={_slurm_time(since, self.tz)}",
                f"--endtime={_slurm_time(until, self.tz)}", *self._cluster_args()]
        return parse_sacct(self._run(argv).stdout, SACCT_FIELDS, self.tz)

    def failed_jobs(self, since: datetime, until: datetime) -> list[AcctRecord]:
        argv = ["sacct", "--parsable2", "--noheader", "--allusers", "--allocations",
                f"--format={','.join(FAILED_JOB_FIELDS)}", f"--state={','.join(FAILED_STATES)}",
                f"--starttime={_slurm_time(since, self.tz)}", f"--endtime={_slurm_time(until, self.tz)}",
                *self._cluster_args()]
        records = parse_sacct(self._run(argv).stdout, FAILED_JOB_FIELDS, self.tz)
        return [r for r in records if not r.is_step and r.ended_in(since, until)]

    def show_job(self, job_id: str) -> Optional[ControllerJob]:
        result = self._run(["scontrol", "--oneliner", "show", "job", job_id], check=False)
        if result.returncode != 0:
            if "invalid job id" in (result.stderr + result.stdout).lower():
                return None
            raise SlurmCommandError(f"scontrol show job {job_id}: {result.stderr.strip()}", result.argv,
                                    result.returncode, result.stderr)
        jobs = parse_scontrol_job(result.stdout, self.tz)
        return jobs[0] if jobs else None

    def node_events(self, nodes: Sequence[str], since: datetime, until: datetime) -> list[NodeEvent]:
        if not nodes:
            return []
        argv = ["sacctmgr", "--noheader", "--parsable2", "list", "event",
                f"nodes={hostlist.compress(list(nodes))}", f"start={_slurm_time(since, self.tz)}",
                f"end={_slurm_time(until, self.tz)}", f"format={EVENT_FORMAT}"]
        return parse_events(self._run(argv).stdout, self.tz)

    def set_admin_comment(self, job_ref: str, text: str) -> bool:
        argv = ["sacctmgr", "-i", "modify", "job", "where", f"jobid={job_ref}", "set", f"AdminComment={text}"]
        result = self._run(argv, check=False)
        said = (result.stdout + result.stderr).lower()
        log.info("sacctmgr modify job where jobid=%s: exit %s: %s", job_ref, result.returncode,
                 " ".join(said.split())[:300])
        if any(marker in said for marker in NOT_IN_DB):
            return False
        if result.returncode != 0:
            raise SlurmCommandError(f"sacctmgr modify job {job_ref}: {result.stderr.strip() or said.strip()}",
                                    result.argv, result.returncode, result.stderr)
        return True

    def show_node(self, node: str) -> Optional[NodeInfo]:
        result = self._run(["scontrol", "--oneliner", "show", "node", node], check=False)
        found = parse_scontrol_node(result.stdout) if result.returncode == 0 else []
        return found[0] if found else None

    def partition_nodes(self, partition: str) -> list[str]:
        return parse_partition_nodes(self._run(["scontrol", "--oneliner", "show", "partition", partition]).stdout)

    def drain_node(self, node: str, reason: str) -> None:
        self._run(["scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}"])

    def resume_node(self, node: str) -> None:
        self._run(["scontrol", "update", f"nodename={node}", "state=resume"])
