"""Fakes for the finalizer's outside systems, injected through the constructor."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Optional

from slurm_attrib.attribution import History, Stored
from slurm_attrib.engine import EngineSettings
from slurm_attrib.model import JobFacts
from slurm_attrib.slurm.records import AcctRecord, ControllerJob, NodeEvent, NodeInfo


@dataclass
class FakeSlurm:
    name: str = "fake"
    jobs: dict[str, ControllerJob] = field(default_factory=dict)
    acct: dict[str, list[AcctRecord]] = field(default_factory=dict)
    events: list[NodeEvent] = field(default_factory=list)
    in_db_after: int = 0  # set_admin_comment answers "not in DB" this many times
    comments: dict[str, str] = field(default_factory=dict)
    drained: dict[str, str] = field(default_factory=dict)
    partition: list[str] = field(default_factory=lambda: ["node-01", "node-02", "node-03", "node-04"])
    calls: list[str] = field(default_factory=list)

    def job_records(self, job_id: str) -> list[AcctRecord]:
        self.calls.append(f"sacct {job_id}")
        rows = [r for recs in self.acct.values() for r in recs  # sacct -j <array id> lists every task
                if job_id in (r.job_id_raw.split(".")[0], r.job_id.split(".")[0], r.job_id.split("_")[0])]
        return [r if r.is_step else _with_comment(r, self.comments.get(r.job_id, r.admin_comment)) for r in rows]

    def node_history(self, nodes: Sequence[str], since: datetime, until: datetime,
                     states: Sequence[str] = ()) -> list[AcctRecord]:
        return []

    def show_job(self, job_id: str) -> Optional[ControllerJob]:
        self.calls.append(f"scontrol {job_id}")
        return self.jobs.get(job_id)

    def node_events(self, nodes: Sequence[str], since: datetime, until: datetime) -> list[NodeEvent]:
        return [e for e in self.events if e.node in nodes]

    def set_admin_comment(self, job_ref: str, text: str) -> bool:
        self.calls.append(f"sacctmgr {job_ref}")
        if self.in_db_after > 0:
            self.in_db_after -= 1
            return False
        self.comments[job_ref] = text
        return True

    def show_node(self, node: str) -> Optional[NodeInfo]:
        reason = self.drained.get(node)
        return NodeInfo(node, "IDLE+DRAIN" if reason else "IDLE", reason or "", ("debug",))

    def partition_nodes(self, partition: str) -> list[str]:
        return list(self.partition)

    def drain_node(self, node: str, reason: str) -> None:
        self.drained[node] = reason

    def resume_node(self, node: str) -> None:
        self.drained.pop(node, None)


def _with_comment(rec: AcctRecord, text: str) -> AcctRecord:
    from dataclasses import replace

    return replace(rec, admin_comment=text)


@dataclass
class FakeStore:
    recorded: list[dict[str, Any]] = field(default_factory=list)
    bundles: list[Path] = field(default_factory=list)
    history_counts: tuple[tuple[str, int], ...] = ()

    def record(self, diagnosis: dict[str, Any], bundle: Path, verdict_time: datetime) -> Stored:
        self.recorded.append(json.loads(json.dumps(diagnosis)))
        self.bundles.append(bundle)
        return Stored(f"v{len(self.recorded)}", "store")

    def history(self, settings: EngineSettings, job: JobFacts, anchor: datetime, days: float) -> History:
        from dataclasses import replace

        return History(replace(settings, node_history=self.history_counts))

    def flush_spool(self) -> int:
        return 0
