"""The accounting sources: what they write under sacct/, the window they ask for, and a backend failure
as their own error line."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

from slurm_attrib.connectors.base import Limits, MemoryBundle, Window, Workload
from slurm_attrib.connectors.sacct import NodeEventsSource, NodeHistorySource, SacctJobSource
from slurm_attrib.slurm.errors import SlurmError
from slurm_attrib.slurm.records import AcctRecord, NodeEvent
from tests.finalizer.fakes import FakeSlurm

T0 = datetime(2026, 12, 2, 12, tzinfo=timezone.utc)
JOB = Workload(cluster="c", job_id="7", nodes=("node-01", "node-02"))
WINDOW = Window(T0 - timedelta(minutes=10), T0, before=timedelta(minutes=5))
LIMITS = Limits(5.0, 1 << 20)


class _History(FakeSlurm):
    def node_history(self, nodes: Sequence[str], since: datetime, until: datetime,
                     states: Sequence[str] = ()) -> list[AcctRecord]:
        self.calls.append(f"history {','.join(nodes)} {since:%m-%d %H:%M} {until:%m-%d %H:%M}")
        return [AcctRecord(job_id="3", job_id_raw="3", state="NODE_FAIL", nodes=("node-02",))]


class _Down(FakeSlurm):
    def node_events(self, nodes: Sequence[str], since: datetime, until: datetime) -> list[NodeEvent]:
        raise SlurmError("sacctmgr: slurmdbd not responding")


def test_job_rows_are_always_written() -> None:
    bundle = MemoryBundle()
    coverage = SacctJobSource([]).collect(JOB, WINDOW, bundle, LIMITS)
    assert bundle.files == {"sacct/job.json": b"[]\n"} and coverage.state == "empty"
    assert coverage.query == "sacct -j 7"


def test_history_looks_back_from_the_windows_end() -> None:
    slurm, bundle = _History(), MemoryBundle()
    coverage = NodeHistorySource(slurm, 2).collect(JOB, WINDOW, bundle, LIMITS)
    assert slurm.calls == ["history node-01,node-02 11-30 12:00 12-02 12:00"]
    assert coverage.state == "ok" and coverage.files == ("sacct/node_history.json",)
    assert json.loads(bundle.files["sacct/node_history.json"])[0]["state"] == "NODE_FAIL"


def test_no_events_writes_no_file_and_down_nodes_are_a_fact() -> None:
    bundle = MemoryBundle()
    assert NodeEventsSource(FakeSlurm()).collect(JOB, WINDOW, bundle, LIMITS).state == "empty"
    assert bundle.files == {}
    events = [NodeEvent(node="node-02", start=T0, end=None, state="DOWN", reason="not responding"),
              NodeEvent(node="node-01", start=T0, end=None, state="DRAIN", reason="admin"),
              NodeEvent(node="node-09", start=T0, end=None, state="DOWN", reason="other job")]
    coverage = NodeEventsSource(FakeSlurm(events=events)).collect(JOB, WINDOW, bundle, LIMITS)
    assert coverage.state == "ok" and coverage.facts == {"down_nodes": ["node-02"]}
    assert len(json.loads(bundle.files["sacct/node_events.json"])) == 2  # node-09 is not the job's


def test_a_backend_failure_is_the_sources_error_line() -> None:
    coverage = NodeEventsSource(_Down()).collect(JOB, WINDOW, MemoryBundle(), LIMITS)
    assert (coverage.state, coverage.reason) == ("error", "sacctmgr: slurmdbd not responding")


def test_rows_over_the_cap_are_not_written() -> None:
    bundle = MemoryBundle()
    coverage = NodeHistorySource(_History(), 2).collect(JOB, WINDOW, bundle, Limits(5.0, 10))
    assert coverage.state == "error" and coverage.truncated and "over the cap" in coverage.reason
    assert bundle.files == {}
