"""Typed records of what Slurm reports: accounting rows, controller job records, node records."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Optional

from ..model import iso

NO_ARRAY_TASK = "4294967294"  # jobcomp ARRAYTASKID of a job that is not an array task (NO_VAL - 1)


@dataclass(frozen=True)
class AcctRecord:
    """One row of ``sacct --parsable2``: the job allocation or one of its steps."""

    job_id: str  # as printed: 7_1, 7_1.batch, 2.0, 12
    job_id_raw: str  # the raw id: 8, 8.batch
    state: str  # base state (FAILED, CANCELLED, ...); ``state_text`` keeps 'CANCELLED by 0'
    state_text: str = ""
    exit_code: str = ""
    derived_exit_code: str = ""
    node_list: str = ""
    nodes: tuple[str, ...] = ()
    user: str = ""
    uid: Optional[int] = None
    partition: str = ""
    cluster: str = ""
    job_name: str = ""
    start: Optional[datetime] = None
    end: Optional[datetime] = None
    admin_comment: str = ""
    comment: str = ""
    work_dir: str = ""

    @property
    def is_step(self) -> bool:
        return "." in self.job_id_raw

    @property
    def step_id(self) -> str:
        """'batch', '0', 'extern' for a step; '' for the allocation."""
        return self.job_id_raw.split(".", 1)[1] if self.is_step else ""

    @property
    def array_ids(self) -> tuple[str, str]:
        """(array job id, task id) from '7_1' / '7_1.batch'; ('', '') when not an array task."""
        head = self.job_id.split(".", 1)[0]
        if "_" in head and "[" not in head:
            array, task = head.split("_", 1)
            return array, task
        return "", ""

    def ended_in(self, since: datetime, until: datetime) -> bool:
        """The record belongs to [since, until) by its end; a record whose end is unknown belongs to any."""
        return self.end is None or since <= self.end < until

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id, "job_id_raw": self.job_id_raw, "state": self.state,
            "state_text": self.state_text, "exit_code": self.exit_code,
            "derived_exit_code": self.derived_exit_code, "node_list": self.node_list,
            "nodes": list(self.nodes), "user": self.user, "uid": self.uid, "partition": self.partition,
            "cluster": self.cluster, "job_name": self.job_name, "start": iso(self.start), "end": iso(self.end),
            "admin_comment": self.admin_comment, "comment": self.comment, "work_dir": self.work_dir,
        }


@dataclass(frozen=True)
class ControllerJob:
    """``scontrol show job -o``: the controller's in-memory record (kept for MinJobAge after the end)."""

    job_id: str
    state: str  # base state; JobState=TIMEOUT Reason=TimeLimit
    reason: str = ""
    exit_code: str = ""
    derived_exit_code: str = ""
    user: str = ""
    uid: Optional[int] = None
    partition: str = ""
    node_list: str = ""
    nodes: tuple[str, ...] = ()
    restart_count: int = 0  # scontrol Restarts=, job.yaml restart_count
    start: Optional[datetime] = None
    end: Optional[datetime] = None
    std_out: str = ""
    std_err: str = ""
    work_dir: str = ""
    job_name: str = ""
    array_job_id: str = ""
    array_task_id: str = ""
    admin_comment: str = ""
    fields: dict[str, str] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id, "state": self.state, "reason": self.reason, "exit_code": self.exit_code,
            "derived_exit_code": self.derived_exit_code, "user": self.user, "uid": self.uid,
            "partition": self.partition, "node_list": self.node_list, "nodes": list(self.nodes),
            "restarts": self.restart_count, "start": iso(self.start), "end": iso(self.end),
            "std_out": self.std_out, "std_err": self.std_err, "work_dir": self.work_dir,
            "job_name": self.job_name, "array_job_id": self.array_job_id,
            "array_task_id": self.array_task_id, "admin_comment": self.admin_comment,
        }


@dataclass(frozen=True)
class NodeInfo:
    """``scontrol show node -o``: state flags and reason of one node."""

    name: str
    state: str  # e.g. IDLE+DRAIN, DOWN*, MIXED
    reason: str = ""
    partitions: tuple[str, ...] = ()

    @property
    def drained(self) -> bool:
        return "DRAIN" in self.state.upper()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "state": self.state, "reason": self.reason, "partitions": list(self.partitions)}


@dataclass(frozen=True)
class NodeEvent:
    """``sacctmgr list event``: a node went down/drained (and maybe came back) at these times."""

    node: str
    start: Optional[datetime]
    end: Optional[datetime]
    state: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "start": iso(self.start), "end": iso(self.end), "state": self.state,
                "reason": self.reason}
