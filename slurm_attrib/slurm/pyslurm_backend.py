"""Optional backend on pyslurm's object API (pyslurm 23.2 and later: ``pyslurm.db.Jobs.load/modify``,
``pyslurm.db.JobFilter``, ``pyslurm.db.Job``, ``pyslurm.Job.load``, ``pyslurm.Node.load/modify``; coded
against pyslurm 24.5's ``pyslurm/db/job.pyx`` and ``pyslurm/core/node.pyx``).

pyslurm compiles against one Slurm major release (its ``X.Y`` tracks Slurm's), so it is used only
when it imports and its version matches the installed Slurm. Anything it does not cover (node events,
partitions, node history, the backfill's failed jobs, array-task ids such as ``7_1``) goes to the CLI
backend it wraps.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any, Optional

from . import hostlist
from .cli_backend import CliSlurm
from .errors import SlurmCommandError
from .records import AcctRecord, ControllerJob, NodeEvent, NodeInfo
from .states import HISTORY_STATES, normalise


def version_matches(pyslurm_version: str, slurm_version: str) -> bool:
    """'24.5.1' ↔ 'slurm 24.05.8': same major and minor release."""
    a = re.findall(r"\d+", pyslurm_version)[:2]
    b = re.findall(r"\d+", slurm_version)[:2]
    return len(a) == 2 and len(b) == 2 and [int(x) for x in a] == [int(x) for x in b]


def _time(value: Any) -> Optional[datetime]:
    if isinstance(value, (int, float)) and value > 0:
        return datetime.fromtimestamp(value, tz=timezone.utc)
    return None


def _exit(code: Any, signal: Any) -> str:
    return f"{int(code or 0)}:{int(signal or 0)}"


class PyslurmSlurm:
    """SlurmAccess through pyslurm for jobs and nodes; the CLI backend for the rest."""

    name = "pyslurm"

    def __init__(self, module: Any, cli: CliSlurm) -> None:
        self.pyslurm = module
        self.cli = cli

    def job_records(self, job_id: str) -> list[AcctRecord]:
        if not job_id.isdigit():
            return self.cli.job_records(job_id)
        db = self.pyslurm.db
        jobs = db.Jobs.load(db.JobFilter(ids=[int(job_id)]))
        out: list[AcctRecord] = []
        for job in jobs:
            out.append(self._acct(job))
            for step_id, step in sorted((getattr(job, "steps", None) or {}).items(), key=lambda kv: str(kv[0])):
                out.append(AcctRecord(job_id=f"{job.id}.{step_id}", job_id_raw=f"{job.id}.{step_id}",
                                      state=normalise(str(step.state)), state_text=str(step.state),
                                      exit_code=_exit(step.exit_code, getattr(step, "exit_code_signal", 0)),
                                      node_list=str(step.nodelist or ""),
                                      nodes=tuple(hostlist.expand(str(step.nodelist or "")))))
        return out

    def _acct(self, job: Any) -> AcctRecord:
        array_id, task = getattr(job, "array_id", None), getattr(job, "array_task_id", None)
        shown = f"{array_id}_{task}" if array_id and task is not None else str(job.id)
        node_list = str(job.nodelist or "")
        return AcctRecord(
            job_id=shown, job_id_raw=str(job.id), state=normalise(str(job.state)), state_text=str(job.state),
            exit_code=_exit(job.exit_code, job.exit_code_signal),
            derived_exit_code=_exit(job.derived_exit_code, job.derived_exit_code_signal),
            node_list=node_list, nodes=tuple(hostlist.expand(node_list)), user=str(job.user_name or ""),
            uid=job.user_id, partition=str(job.partition or ""), cluster=str(job.cluster or ""),
            job_name=str(job.name or ""), start=_time(job.start_time), end=_time(job.end_time),
            admin_comment=str(job.admin_comment or ""), work_dir=str(job.working_directory or ""))

    def show_job(self, job_id: str) -> Optional[ControllerJob]:
        try:
            job = self.pyslurm.Job.load(int(job_id))
        except (ValueError, self.pyslurm.RPCError):
            return None
        node_list = str(job.allocated_nodes or "")
        return ControllerJob(
            job_id=str(job.id), state=normalise(str(job.state)), reason=str(job.state_reason or ""),
            exit_code=_exit(job.exit_code, job.exit_code_signal),
            derived_exit_code=_exit(job.derived_exit_code, job.derived_exit_code_signal),
            user=str(job.user_name or ""), uid=job.user_id, partition=str(job.partition or ""),
            node_list=node_list, nodes=tuple(hostlist.expand(node_list)), restart_count=int(job.requeue_count or 0),
            start=_time(job.start_time), end=_time(job.end_time), std_out=str(job.standard_output or ""),
            std_err=str(job.standard_error or ""), work_dir=str(job.working_directory or ""),
            job_name=str(job.name or ""), array_job_id=str(job.array_id or ""),
            array_task_id=str(job.array_task_id if job.array_task_id is not None else ""),
            admin_comment=str(job.admin_comment or ""))

    def set_admin_comment(self, job_ref: str, text: str) -> bool:
        if not job_ref.isdigit():
            return self.cli.set_admin_comment(job_ref, text)
        db = self.pyslurm.db
        try:
            modified = db.Jobs.modify(db.JobFilter(ids=[int(job_ref)]), db.Job(admin_comment=text))
        except self.pyslurm.RPCError as exc:
            if "nothing was modified" in str(exc).lower():
                return False
            raise SlurmCommandError(f"pyslurm: modify job {job_ref}: {exc}") from None
        return bool(modified)

    def show_node(self, node: str) -> Optional[NodeInfo]:
        try:
            info = self.pyslurm.Node.load(node)
        except self.pyslurm.RPCError:
            return None
        return NodeInfo(name=str(info.name), state=str(info.state), reason=str(info.reason or ""),
                        partitions=tuple(info.partitions or ()))

    def drain_node(self, node: str, reason: str) -> None:
        try:
            self.pyslurm.Node.load(node).modify(self.pyslurm.Node(state="DRAIN", reason=reason))
        except self.pyslurm.RPCError as exc:
            raise SlurmCommandError(f"pyslurm: drain {node}: {exc}") from None

    def resume_node(self, node: str) -> None:
        try:
            self.pyslurm.Node.load(node).modify(self.pyslurm.Node(state="RESUME"))
        except self.pyslurm.RPCError as exc:
            raise SlurmCommandError(f"pyslurm: resume {node}: {exc}") from None

    def node_history(self, nodes: Sequence[str], since: datetime, until: datetime,
                     states: Sequence[str] = HISTORY_STATES) -> list[AcctRecord]:
        return self.cli.node_history(nodes, since, until, states)

    def failed_jobs(self, since: datetime, until: datetime) -> list[AcctRecord]:
        return self.cli.failed_jobs(since, until)

    def node_events(self, nodes: Sequence[str], since: datetime, until: datetime) -> list[NodeEvent]:
        return self.cli.node_events(nodes, since, until)

    def partition_nodes(self, partition: str) -> list[str]:
        return self.cli.partition_nodes(partition)
