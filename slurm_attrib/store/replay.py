"""Replay: re-run stored bundles with the current rules and show which verdicts would change."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Optional

from ..engine import Engine, EngineSettings
from ..settings import DEFAULT_HISTORY_DAYS
from ..timestamps import parse_iso
from . import packing
from .db import Store
from .history import settings_with_history
from .progress import ProgressCallback
from .reports import Window
from .rows import JobKey, verdict_id

VERDICT_FIELDS = ("status", "category", "responsible", "culprit_nodes")


@dataclass(frozen=True)
class ReplayResult:
    """One stored verdict replayed: ``outcome`` is same | details | changed | no-bundle; ``applied`` when
    the new verdict was stored."""

    cluster: str
    job_id: str
    array_task_id: str
    restart_count: int
    outcome: str
    old: dict[str, Any]
    new: dict[str, Any]
    capped: bool = False
    applied: bool = False

    def to_row(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "job_id": self.job_id, "array_task": self.array_task_id,
                "restart_count": self.restart_count, "outcome": self.outcome, "applied": self.applied,
                "capped": self.capped, **{f"old_{k}": self.old.get(k) for k in VERDICT_FIELDS},
                **{f"new_{k}": self.new.get(k) for k in VERDICT_FIELDS}}


def select_for_replay(store: Store, job: Optional[str], cluster: Optional[str], window: Window) -> list[dict[str, Any]]:
    """The stored verdicts a replay covers: one job, or every job in the window; oldest first."""
    if job is not None:
        return sorted(store.find(job, cluster), key=lambda r: (r["job_time"], r["id"]))
    where, params = window.clauses("job_time")
    if cluster:
        where.append("cluster = ?")
        params.append(cluster)
    sql = "SELECT * FROM diagnoses " + (f"WHERE {' AND '.join(where)} " if where else "") + "ORDER BY job_time, id"
    return list(store.rows(sql, params))


def replay(store: Store, engine: Engine, rows: list[dict[str, Any]], verdict_time: datetime, *,
           apply: bool = False, history_days: float = DEFAULT_HISTORY_DAYS,
           progress: Optional[ProgressCallback] = None) -> list[ReplayResult]:
    """Diagnose each stored bundle again; with ``apply`` store every verdict that differs (the old one
    goes to history), except from capped bundles, which ran on less evidence than the original."""
    results = []
    for done, row in enumerate(rows, start=1):
        results.append(_replay_one(store, engine, row, verdict_time, apply, history_days))
        if progress:
            progress(done, len(rows))
    return results


def _replay_one(store: Store, engine: Engine, row: dict[str, Any], verdict_time: datetime, apply: bool,
                history_days: float) -> ReplayResult:
    old = _verdict_fields(json.loads(row["json"]))
    base = {"cluster": row["cluster"], "job_id": row["job_id"], "array_task_id": row["array_task"],
            "restart_count": row["restart_count"], "old": old}
    stored = store.bundle(row["id"])
    if stored is None:
        return ReplayResult(outcome="no-bundle", new={}, **base)
    with tempfile.TemporaryDirectory(prefix="slurm-attrib-replay-") as tmp:
        packing.unpack_bundle(stored["data"], tmp)
        diag = engine.diagnose(tmp, _history_settings(store, engine, row, history_days)).to_dict()
    new = _verdict_fields(diag)
    outcome = "same" if verdict_id(diag) == row["verdict_id"] else ("details" if new == old else "changed")
    capped = bool(stored["capped"])
    applied = apply and outcome != "same" and not capped
    if applied:
        store.record(diag, verdict_time)
    return ReplayResult(outcome=outcome, new=new, capped=capped, applied=applied, **base)


def _history_settings(store: Store, engine: Engine, row: dict[str, Any], days: float) -> EngineSettings:
    anchor = parse_iso(row["job_time"])
    nodes = json.loads(row["json"]).get("job", {}).get("nodes") or []
    key = JobKey.of_row(row)
    return settings_with_history(engine.settings, store, nodes, anchor, days, key) if anchor else engine.settings


def _verdict_fields(diag: dict[str, Any]) -> dict[str, Any]:
    return {"status": diag.get("status"), "category": diag.get("category"), "responsible": diag.get("responsible"),
            "culprit_nodes": ",".join(diag.get("culprit_nodes") or [])}
