"""What the finalizer knows about a finished job, merged from the hooks' environment, the controller
(``scontrol show job`` while the job is in memory) and accounting (``sacct``, complete 1-2 s after the
end). Job state: jobcomp ``JOBSTATE``, else scontrol, else sacct — but only a *settled* state counts (see
:func:`settled`): while the node Epilogs run, ``scontrol`` prints ``JobState=COMPLETING`` and hides the
final state, and sacct may still say ``RUNNING``; taking either as the job's state would diagnose a
successful job (and write a verdict onto its record) or lose a failed job's real state."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Optional

from ..slurm.records import NO_ARRAY_TASK, AcctRecord, ControllerJob
from ..slurm.states import REQUEUED_STATES, TERMINAL_STATES, normalise
from .queue import PendingJob


def settled(state: str) -> bool:
    """Whether ``state`` says how the job ended (or that it was requeued). ``COMPLETING`` (a flag that
    scontrol shows instead of the base state until every node's Epilog is done), ``RUNNING``,
    ``CONFIGURING``, ``SUSPENDED``, ... do not: the finalizer must wait for another source."""
    return state in TERMINAL_STATES or state in REQUEUED_STATES


def settled_in_accounting(state: str) -> bool:
    """Whether sacct's ``state`` says how the run ended. Its ``PENDING`` does not: the hooks fire at the
    end of a run, and a job put back in the queue is held (and shown ``PENDING``) by the controller, so
    sacct's ``PENDING`` is the row as submitted, before slurmdbd has the start and end (measured in CI:
    a job that exited 0 was read as requeued and never finished). Its explicit ``REQUEUED`` forms count."""
    return settled(state) and state != "PENDING"


@dataclass(frozen=True)
class JobInfo:
    job_id: str
    cluster: str
    restart_count: int
    state: str = ""
    state_source: str = ""
    exit_code: str = ""
    derived_exit_code: str = ""
    user: str = ""
    uid: Optional[int] = None
    partition: str = ""
    nodes: tuple[str, ...] = ()
    start: Optional[datetime] = None
    end: Optional[datetime] = None
    job_name: str = ""
    work_dir: str = ""
    std_out: str = ""
    std_err: str = ""
    array_job_id: str = ""
    array_task_id: str = ""
    notes: tuple[str, ...] = field(default=())

    @property
    def succeeded(self) -> bool:
        return (self.state == "COMPLETED" and self.exit_code in ("0:0", "0", "")
                and self.derived_exit_code in ("0:0", "0", ""))

    @property
    def requeued(self) -> bool:
        return self.state in REQUEUED_STATES


def wait_status(raw: str) -> str:
    """A raw wait status (SLURM_JOB_DERIVED_EC=1792) as ``exit:signal`` (7:0)."""
    if not raw or not raw.strip().isdigit():
        return ""
    value = int(raw)
    return f"{(value >> 8) & 0xFF}:{value & 0x7F}"


def _epoch(text: str) -> Optional[datetime]:
    return datetime.fromtimestamp(int(text), tz=timezone.utc) if text and text.isdigit() and int(text) else None


def _int(text: str) -> Optional[int]:
    return int(text) if text and text.isdigit() else None


def from_hooks(job: PendingJob) -> JobInfo:
    """Facts the hooks' environments carry (EpilogSlurmctld first, jobcomp fills the gaps)."""
    ctld, comp = job.env("epilog_slurmctld"), job.env("jobcomp")
    array_id = ctld.get("SLURM_ARRAY_JOB_ID") or (comp.get("ARRAYJOBID", "") if comp.get("ARRAYJOBID") != "0" else "")
    task = ctld.get("SLURM_ARRAY_TASK_ID") or (comp.get("ARRAYTASKID", "")
                                               if comp.get("ARRAYTASKID") != NO_ARRAY_TASK else "")
    comp_state = normalise(comp.get("JOBSTATE", ""))
    comp_state = comp_state if settled(comp_state) else ""
    return JobInfo(
        job_id=job.job_id, cluster=job.cluster, restart_count=job.restart_count or 0,
        state=comp_state, state_source="jobcomp" if comp_state else "",
        exit_code=ctld.get("SLURM_JOB_EXIT_CODE2") or comp.get("EXITCODE", ""),
        derived_exit_code=wait_status(ctld.get("SLURM_JOB_DERIVED_EC", "")) or comp.get("DERIVED_EC", ""),
        user=ctld.get("SLURM_JOB_USER") or comp.get("USERNAME", ""),
        uid=_int(ctld.get("SLURM_JOB_UID", "")) if ctld else _int(comp.get("UID", "")),
        partition=ctld.get("SLURM_JOB_PARTITION") or comp.get("PARTITION", ""),
        nodes=tuple(job.nodes()),
        start=_epoch(ctld.get("SLURM_JOB_START_TIME", "") or comp.get("START", "")),
        end=_epoch(ctld.get("SLURM_JOB_END_TIME", "") or comp.get("END", "")),
        job_name=ctld.get("SLURM_JOB_NAME") or comp.get("JOBNAME", ""),
        work_dir=ctld.get("SLURM_JOB_WORK_DIR") or comp.get("WORK_DIR", ""),
        std_out=ctld.get("SLURM_JOB_STDOUT") or comp.get("STDOUT", ""),
        std_err=ctld.get("SLURM_JOB_STDERR") or comp.get("STDERR", ""),
        array_job_id=array_id, array_task_id=task,
    )


def with_controller(info: JobInfo, ctl: ControllerJob) -> JobInfo:
    """Fill from ``scontrol show job``; its state counts when jobcomp gave none and it is settled."""
    state, source = (info.state, info.state_source) if info.state or not settled(ctl.state) \
        else (ctl.state, "scontrol")
    return replace(
        info, state=state, state_source=source, exit_code=info.exit_code or ctl.exit_code,
        derived_exit_code=info.derived_exit_code or ctl.derived_exit_code, user=info.user or ctl.user,
        uid=info.uid if info.uid is not None else ctl.uid, partition=info.partition or ctl.partition,
        nodes=info.nodes or ctl.nodes, start=info.start or ctl.start, end=info.end or ctl.end,
        job_name=info.job_name or ctl.job_name, work_dir=info.work_dir or ctl.work_dir,
        std_out=ctl.std_out if ctl.std_out and "%" not in ctl.std_out else info.std_out or ctl.std_out,
        std_err=ctl.std_err if ctl.std_err and "%" not in ctl.std_err else info.std_err or ctl.std_err,
        array_job_id=_array_ids(info, ctl.array_job_id, ctl.array_task_id)[0],
        array_task_id=_array_ids(info, ctl.array_job_id, ctl.array_task_id)[1],
    )


def _array_ids(info: JobInfo, array_id: str, task: str) -> tuple[str, str]:
    """The array ids ``info`` keeps: its own, else the new source's when they are one array and one task
    (a pending array's ``ArrayTaskId=1-10%2`` or anything else is not a task of this job)."""
    if info.array_job_id or info.array_task_id:
        return info.array_job_id, info.array_task_id
    if array_id.isdigit() and task.isdigit() and array_id.isascii() and task.isascii():
        return array_id, task
    return "", ""


def allocation(records: list[AcctRecord], job_id: str) -> Optional[AcctRecord]:
    """The allocation row (not a step) of the raw job id among sacct's rows."""
    for rec in records:
        if not rec.is_step and rec.job_id_raw == job_id:
            return rec
    return None


def with_accounting(info: JobInfo, alloc: AcctRecord) -> JobInfo:
    """Fill from sacct's allocation row; its state counts when neither jobcomp nor scontrol gave one.
    sacct's exit codes are the reference when present."""
    state, source = (info.state, info.state_source) if info.state or not settled_in_accounting(alloc.state) \
        else (alloc.state, "sacct")
    array_id, task = alloc.array_ids
    nodes = info.nodes if len(info.nodes) >= len(alloc.nodes) else alloc.nodes
    return replace(
        info, state=state, state_source=source, exit_code=alloc.exit_code or info.exit_code,
        derived_exit_code=alloc.derived_exit_code or info.derived_exit_code, user=info.user or alloc.user,
        uid=info.uid if info.uid is not None else alloc.uid, partition=info.partition or alloc.partition,
        nodes=nodes, start=info.start or alloc.start, end=info.end or alloc.end,
        job_name=info.job_name or alloc.job_name, work_dir=info.work_dir or alloc.work_dir,
        array_job_id=_array_ids(info, array_id, task)[0], array_task_id=_array_ids(info, array_id, task)[1],
    )


def node_epilog_collects(job: PendingJob, capture_always: bool) -> bool:
    """Whether the node epilogs will send bundles: they skip jobs whose exit code and derived exit code
    are both zero in their environment (TIMEOUT, CANCELLED and NODE_FAIL look like that too), unless
    ``collector.capture_always`` is set."""
    if capture_always:
        return True
    ctld = job.env("epilog_slurmctld")
    if ctld:
        return ctld.get("SLURM_JOB_EXIT_CODE2", "0:0") != "0:0" or ctld.get("SLURM_JOB_DERIVED_EC", "0") != "0"
    comp = job.env("jobcomp")
    return comp.get("EXITCODE", "0:0") != "0:0" or comp.get("DERIVED_EC", "0:0") != "0:0"
