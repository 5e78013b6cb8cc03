"""The default backend: ``sacct --parsable2``, ``scontrol -o`` and ``sacctmgr -i``, on every Slurm
version. Fixed field lists, no shell, a timeout on every call (``sacct --json`` is avoided: it
misreports exit codes on 22.05 and 23.02; ``scontrol --json`` does not exist in 22.05).

User text never steers what is read: every id in an argv passes :func:`.ids.checked` first; sacct
queries that carry user-controlled columns (job name, workdir, AdminComment) put them last and are
split on a random per-call ``--delimiter`` that no job's text can contain, so a ``|`` or a newline in a
name can neither shift a column nor make a row an error; ``scontrol show job`` is read by
:mod:`.jobrecord`, which refuses a record it cannot read with certainty."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence
from datetime import datetime, tzinfo
from typing import Optional

from . import hostlist
from .errors import SlurmCommandError, SlurmParseError
from .ids import checked
from .parse import (
    parse_events,
    parse_partition_nodes,
    parse_sacct,
    parse_sacct_delimited,
    parse_scontrol_job,
    parse_scontrol_node,
)
from .records import AcctRecord, ControllerJob, NodeEvent, NodeInfo
from .runner import CommandResult, CommandRunner, run_command
from .states import FAILED_STATES, HISTORY_STATES

# User-controlled columns last (jobname, workdir; admincomment can carry a job_submit plugin's copy of
# user text): even split on a plain '|' their text could not move the fixed columns.
SACCT_FIELDS = ["jobid", "jobidraw", "state", "exitcode", "derivedexitcode", "nodelist", "user", "uid",
                "partition", "cluster", "start", "end", "jobname", "workdir", "admincomment"]
# the backfill query (failed_jobs), also without a header; no user-controlled column, so plain '|'
FAILED_JOB_FIELDS = ["jobid", "jobidraw", "cluster", "user", "partition", "nodelist", "start", "end", "state",
                     "exitcode", "derivedexitcode"]
EVENT_FORMAT = "NodeName,TimeStart,TimeEnd,State,Reason"
log = logging.getLogger(__name__)
NOT_IN_DB = ("nothing modified", "didn't affect anything", "did not affect anything")


def _slurm_time(when: datetime, tz: Optional[tzinfo] = None) -> str:
    """Slurm reads times without a zone in its local zone (``tz``, default this host's): convert to it."""
    return when.astimezone(tz).strftime("%Y-%m-%dT%H:%M:%S")


def _node_list(nodes: Sequence[str]) -> str:
    return hostlist.compress([checked("node", n) for n in nodes])


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
        return [f"--clusters={checked('cluster', self.cluster)}"] if self.cluster else []

    def _sacct_rows(self, query: list[str]) -> list[AcctRecord]:
        """``sacct`` with :data:`SACCT_FIELDS` split on a fresh random delimiter; rows it cannot read are
        logged and left out (an error here would only repeat on every retry)."""
        delimiter = f"|{secrets.token_hex(8)}|"
        argv = ["sacct", "--parsable2", "--noheader", f"--delimiter={delimiter}", "--allusers", *query,
                f"--format={','.join(SACCT_FIELDS)}", *self._cluster_args()]
        records, notes = parse_sacct_delimited(self._run(argv).stdout, SACCT_FIELDS, delimiter, self.tz)
        for note in notes:
            log.warning("sacct %s: %s", " ".join(query)[:200], note)
        return records

    def job_records(self, job_id: str) -> list[AcctRecord]:
        return self._sacct_rows([f"--jobs={checked('job', job_id)}"])

    def node_history(self, nodes: Sequence[str], since: datetime, until: datetime,
                     states: Sequence[str] = HISTORY_STATES) -> list[AcctRecord]:
        if not nodes:
            return []
        return self._sacct_rows(["--allocations", f"--nodelist={_node_list(nodes)}", f"--state={','.join(states)}",
                                 f"--starttime={_slurm_time(since, self.tz)}",
                                 f"--endtime={_slurm_time(until, self.tz)}"])

    def failed_jobs(self, since: datetime, until: datetime) -> list[AcctRecord]:
        argv = ["sacct", "--parsable2", "--noheader", "--allusers", "--allocations",
                f"--format={','.join(FAILED_JOB_FIELDS)}", f"--state={','.join(FAILED_STATES)}",
                f"--starttime={_slurm_time(since, self.tz)}", f"--endtime={_slurm_time(until, self.tz)}",
                *self._cluster_args()]
        records = parse_sacct(self._run(argv).stdout, FAILED_JOB_FIELDS, self.tz)
        return [r for r in records if not r.is_step and r.ended_in(since, until)]

    def show_job(self, job_id: str) -> Optional[ControllerJob]:
        """The controller's record of ``job_id`` (a raw id, or ``<array>_<task>``); None when the job is
        not in memory, or when its record cannot be read with certainty (a user's field forges Slurm's:
        logged; jobcomp, the hooks' environment and sacct still say what the finalizer needs)."""
        result = self._run(["scontrol", "--oneliner", "show", "job", checked("job", job_id)], check=False)
        if result.returncode != 0:
            if "invalid job id" in (result.stderr + result.stdout).lower():
                return None
            raise SlurmCommandError(f"scontrol show job {job_id}: {result.stderr.strip()}", result.argv,
                                    result.returncode, result.stderr)
        try:
            jobs = parse_scontrol_job(result.stdout, self.tz)
        except SlurmParseError as exc:
            log.warning("scontrol show job %s: %s", job_id, exc)
            return None
        mine = [j for j in jobs if job_id in (j.job_id, f"{j.array_job_id}_{j.array_task_id}")]
        if len(mine) > 1:
            log.warning("scontrol show job %s: %d records claim that id; record not used", job_id, len(mine))
        return mine[0] if len(mine) == 1 else None

    def node_events(self, nodes: Sequence[str], since: datetime, until: datetime) -> list[NodeEvent]:
        if not nodes:
            return []
        argv = ["sacctmgr", "--noheader", "--parsable2", "list", "event",
                f"nodes={_node_list(nodes)}", f"start={_slurm_time(since, self.tz)}",
                f"end={_slurm_time(until, self.tz)}", f"format={EVENT_FORMAT}"]
        return parse_events(self._run(argv).stdout, self.tz)

    def set_admin_comment(self, job_ref: str, text: str) -> bool:
        argv = ["sacctmgr", "-i", "modify", "job", "where", f"jobid={checked('job', job_ref)}", "set",
                f"AdminComment={text}"]
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
        result = self._run(["scontrol", "--oneliner", "show", "node", checked("node", node)], check=False)
        found = parse_scontrol_node(result.stdout) if result.returncode == 0 else []
        return found[0] if found else None

    def partition_nodes(self, partition: str) -> list[str]:
        argv = ["scontrol", "--oneliner", "show", "partition", checked("partition", partition)]
        return parse_partition_nodes(self._run(argv).stdout)

    def drain_node(self, node: str, reason: str) -> None:
        self._run(["scontrol", "update", f"nodename={checked('node', node)}", "state=drain", f"reason={reason}"])

    def resume_node(self, node: str) -> None:
        self._run(["scontrol", "update", f"nodename={checked('node', node)}", "state=resume"])
