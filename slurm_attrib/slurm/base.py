"""The Slurm access protocol: everything the finalizer and remediation ask of Slurm."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Optional, Protocol

from .records import AcctRecord, ControllerJob, NodeEvent, NodeInfo
from .states import HISTORY_STATES


class SlurmAccess(Protocol):
    """A backend: the CLI tools (default, every version) or pyslurm (optional)."""

    name: str

    def job_records(self, job_id: str) -> list[AcctRecord]:
        """sacct rows of the job's newest record: the allocation first, then its steps."""

    def node_history(self, nodes: Sequence[str], since: datetime, until: datetime,
                     states: Sequence[str] = HISTORY_STATES) -> list[AcctRecord]:
        """Allocations on any of ``nodes`` that ended in one of ``states`` between the two times."""

    def failed_jobs(self, since: datetime, until: datetime) -> list[AcctRecord]:
        """Allocations (no steps) in one of :data:`FAILED_STATES` during the window whose end lies in
        [since, until) or is unknown: what the store's backfill sweep diagnoses."""

    def show_job(self, job_id: str) -> Optional[ControllerJob]:
        """The controller's record while it is in memory (MinJobAge), else None."""

    def node_events(self, nodes: Sequence[str], since: datetime, until: datetime) -> list[NodeEvent]:
        """Down/drain events of ``nodes`` overlapping the interval (accounting)."""

    def set_admin_comment(self, job_ref: str, text: str) -> bool:
        """Write AdminComment of a finished job; False when the job is not (yet) in the database."""

    def show_node(self, node: str) -> Optional[NodeInfo]: ...

    def partition_nodes(self, partition: str) -> list[str]: ...

    def drain_node(self, node: str, reason: str) -> None: ...

    def resume_node(self, node: str) -> None: ...
