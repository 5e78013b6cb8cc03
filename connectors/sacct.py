"""Accounting evidence (controller-side sources): the job's sacct rows, the nodes' recent failures
and their DOWN/DRAIN events, written under ``sacct/`` as JSON.

Each source reads through a Slurm access backend (:mod:`slurm_attrib.slurm`, CLI or pyslurm) given
in its constructor; tests give a fake one. A backend failure (:class:`~slurm_attrib.slurm.errors.SlurmError`)
is the source's ``error`` coverage, never the diagnosis's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from slurm_attrib.slurm.errors import SlurmError
from slurm_attrib.slurm.records import AcctRecord, NodeEvent

from .base import BundleWriter, Limits, SourceCoverage, Window, Workload

__all__ = ["AccountingReader", "NodeEventsSource", "NodeHistorySource", "SacctJobSource", "down_nodes"]


class AccountingReader(Protocol):
    """The part of :class:`slurm_attrib.slurm.base.SlurmAccess` these sources read."""

    def node_history(self, nodes: Sequence[str], since: datetime, until: datetime,
                     states: Sequence[str] = ()) -> list[AcctRecord]: ...

    def node_events(self, nodes: Sequence[str], since: datetime, until: datetime) -> list[NodeEvent]: ...


def _json(data: Any) -> bytes:
    return (json.dumps(data, sort_keys=True, indent=1) + "\n").encode()


def _write(name: str, bundle: BundleWriter, rel: str, rows: Sequence[Any], limits: Limits, query: str,
           began: float, always: bool = False) -> SourceCoverage:
    """``rows`` as ``rel`` (skipped when empty unless ``always``); nothing when over the byte cap."""
    data = _json([r.to_dict() for r in rows])
    seconds = time.monotonic() - began
    if len(data) > limits.max_bytes:
        return SourceCoverage(name, "error", f"{len(rows)} rows, {len(data)} bytes: over the cap of "
                              f"{limits.max_bytes}; not written", seconds=seconds, query=query, size=len(data),
                              truncated=True)
    if not rows and not always:
        return SourceCoverage(name, "empty", "", seconds=seconds, query=query)
    written = bundle.write(rel, data)
    return SourceCoverage(name, "ok" if rows else "empty", "", (rel,), written, seconds, query, len(data))


class SacctJobSource:
    """``sacct/job.json``: the job's allocation and step rows. The finalizer passes the rows it read to
    settle the job's state, so the bundle shows exactly the rows that state came from (one sacct call)."""

    name = "sacct_job"

    def __init__(self, rows: Sequence[AcctRecord]) -> None:
        self.rows = list(rows)

    def collect(self, workload: Workload, window: Window, bundle: BundleWriter, limits: Limits) -> SourceCoverage:
        return _write(self.name, bundle, "sacct/job.json", self.rows, limits, f"sacct -j {workload.job_id}",
                      time.monotonic(), always=True)


class NodeHistorySource:
    """``sacct/node_history.json``: the job's nodes' failed jobs over the last ``days`` before the
    window's end (the repeat-offender rule reads it)."""

    name = "sacct_node_history"

    def __init__(self, slurm: AccountingReader, days: float) -> None:
        self.slurm = slurm
        self.days = days

    def collect(self, workload: Workload, window: Window, bundle: BundleWriter, limits: Limits) -> SourceCoverage:
        began = time.monotonic()
        since = window.until - timedelta(days=self.days)
        query = f"sacct --nodelist={','.join(workload.nodes)} {since.isoformat()}..{window.until.isoformat()}"
        try:
            rows = self.slurm.node_history(list(workload.nodes), since, window.until)
        except SlurmError as exc:
            return SourceCoverage(self.name, "error", str(exc), seconds=time.monotonic() - began, query=query)
        return _write(self.name, bundle, "sacct/node_history.json", rows, limits, query, began)


class NodeEventsSource:
    """``sacct/node_events.json``: DOWN/DRAIN/FAIL events of the job's nodes over [since, until]. The
    nodes that went down (not a mere drain) are its ``down_nodes`` fact."""

    name = "sacct_node_events"

    def __init__(self, slurm: AccountingReader) -> None:
        self.slurm = slurm

    def collect(self, workload: Workload, window: Window, bundle: BundleWriter, limits: Limits) -> SourceCoverage:
        began = time.monotonic()
        query = f"sacctmgr show event nodes={','.join(workload.nodes)} {window.since.isoformat()}.." \
                f"{window.until.isoformat()}"
        try:
            events = self.slurm.node_events(list(workload.nodes), window.since, window.until)
        except SlurmError as exc:
            return SourceCoverage(self.name, "error", str(exc), seconds=time.monotonic() - began, query=query)
        coverage = _write(self.name, bundle, "sacct/node_events.json", events, limits, query, began)
        return replace(coverage, facts={"down_nodes": down_nodes(events, workload.nodes)})


def down_nodes(events: Sequence[NodeEvent], nodes: tuple[str, ...]) -> list[str]:
    """Nodes of the job with a DOWN/FAIL event (not a mere drain) in the queried window."""
    out = []
    for ev in events:
        state = ev.state.upper()
        if ev.node in nodes and ("DOWN" in state or "FAIL" in state) and ev.node not in out:
            out.append(ev.node)
    return sorted(out)
