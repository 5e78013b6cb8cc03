"""The evidence-source interface: every shipped connector is an EvidenceSource, the fake behaves, and a
source that raises or hangs becomes a coverage line, never an exception out of the driver."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from slurm_attrib.connectors.applog import JobOutputSource
from slurm_attrib.connectors.base import (
    STATES,
    DisabledSource,
    EvidenceSource,
    FakeSource,
    Limits,
    MemoryBundle,
    SourceCoverage,
    Window,
    Workload,
    collect_all,
    collect_bounded,
)
from slurm_attrib.connectors.gpu import DcgmExporterSource, DcgmiSource, NvidiaSmiSource, UrllibFetcher
from slurm_attrib.connectors.kernel_log import KernelLogSource
from slurm_attrib.connectors.node_facts import NodeFactsSource
from slurm_attrib.connectors.runner import FakeRunner
from slurm_attrib.connectors.sacct import NodeEventsSource, NodeHistorySource, SacctJobSource
from tests.finalizer.fakes import FakeSlurm

JOB = Workload(cluster="c", job_id="7", nodes=("node-01", "node-02"), node="node-01", uid=1000)
T0 = datetime(2026, 12, 2, 12, tzinfo=timezone.utc)
WINDOW = Window(T0 - timedelta(minutes=10), T0, before=timedelta(minutes=5), after=timedelta(minutes=1))


def shipped() -> list[Any]:
    runner = FakeRunner({})
    return [KernelLogSource(runner), NvidiaSmiSource(runner), DcgmiSource(runner),
            DcgmExporterSource(UrllibFetcher(), ""), NodeFactsSource(), JobOutputSource("slurm-7.out", "/dev/null"),
            SacctJobSource([]), NodeHistorySource(FakeSlurm(), 30), NodeEventsSource(FakeSlurm()),
            DisabledSource("dcgmi"), FakeSource("fake")]


@pytest.mark.parametrize("source", shipped(), ids=lambda s: type(s).__name__)
def test_every_shipped_source_is_an_evidence_source(source: object) -> None:
    assert isinstance(source, EvidenceSource)
    coverage = collect_bounded(source, JOB, WINDOW, MemoryBundle(), Limits(1.0, 1 << 20))
    assert coverage.source == source.name and coverage.state in STATES


def test_source_names_are_unique() -> None:
    names = [s.name for s in shipped() if not isinstance(s, (DisabledSource, FakeSource))]
    assert len(names) == len(set(names))


def test_window_reads_the_span_widened_by_its_margins() -> None:
    assert WINDOW.since == T0 - timedelta(minutes=15) and WINDOW.until == T0 + timedelta(minutes=1)


def test_coverage_states_are_the_five_and_the_collection_entry_keeps_its_keys() -> None:
    assert STATES == ("ok", "empty", "error", "timeout", "skipped")
    with pytest.raises(ValueError, match="not one of"):
        SourceCoverage("x", "failed")
    entry = SourceCoverage("x", "ok", "fine", ("a/b",), 12, 0.12345, "cmd", 40, True).entry()
    assert entry == {"source": "x", "state": "ok", "reason": "fine", "bytes": 12, "seconds": 0.123}


def test_the_fake_writes_its_files_and_records_its_calls() -> None:
    fake = FakeSource("fake", files={"syslog/b.log": b"bb", "syslog/a.log": b"a"})
    bundle = MemoryBundle()
    coverage = collect_bounded(fake, JOB, WINDOW, bundle, Limits(1.0, 100))
    assert coverage == SourceCoverage("fake", "ok", "", ("syslog/a.log", "syslog/b.log"), 3)
    assert bundle.files == {"syslog/a.log": b"a", "syslog/b.log": b"bb"}
    assert fake.calls == [(JOB, WINDOW, Limits(1.0, 100))]
    with pytest.raises(FileExistsError):
        bundle.write("syslog/a.log", b"again")


def test_an_erroring_source_is_a_coverage_line_and_the_next_one_still_runs() -> None:
    plan = [(FakeSource("broken", raises=RuntimeError("disk on fire")), 10), (FakeSource("next"), 10)]
    coverage = list(collect_all(plan, JOB, WINDOW, MemoryBundle(), lambda: 1.0))
    assert [(c.source, c.state) for c in coverage] == [("broken", "error"), ("next", "ok")]
    assert coverage[0].reason == "RuntimeError: disk on fire"


def test_a_hung_source_is_a_timeout_line_and_cannot_write_afterwards() -> None:
    hung = FakeSource("hung", files={"metrics/n.prom": b"late"}, hang_s=1.0)
    bundle = MemoryBundle()
    began = time.monotonic()
    coverage = list(collect_all([(hung, 10), (FakeSource("next"), 10)], JOB, WINDOW, bundle, lambda: 0.1))
    assert time.monotonic() - began < 0.9
    assert [(c.source, c.state) for c in coverage] == [("hung", "timeout"), ("next", "ok")]
    assert "abandoned" in coverage[0].reason
    time.sleep(0.6)  # the abandoned source wakes up and tries to write
    assert bundle.files == {}


def test_a_stop_of_the_collector_goes_through() -> None:
    """SystemExit is how the collector's SIGTERM handler unwinds: the driver must not swallow it."""
    seen = []
    plan = [(FakeSource("first"), 1), (FakeSource("stopped", raises=SystemExit("signal 15")), 1),
            (FakeSource("never"), 1)]
    with pytest.raises(SystemExit):
        for coverage in collect_all(plan, JOB, WINDOW, MemoryBundle(), lambda: 1.0):
            seen.append(coverage.source)
    assert seen == ["first"]


def test_the_shared_budget_is_asked_as_each_source_starts() -> None:
    left = iter([3.0, 2.0, 0.0])
    fakes = [FakeSource("a"), FakeSource("b"), FakeSource("c")]
    list(collect_all([(f, 5) for f in fakes], JOB, WINDOW, MemoryBundle(), lambda: next(left)))
    assert [f.calls[0][2] for f in fakes] == [Limits(3.0, 5), Limits(2.0, 5), Limits(0.0, 5)]


def test_a_disabled_source_still_names_itself() -> None:
    coverage = DisabledSource("dcgmi").collect(JOB, WINDOW, MemoryBundle(), Limits(1.0, 1))
    assert coverage == SourceCoverage("dcgmi", "skipped", "disabled in the configuration")
