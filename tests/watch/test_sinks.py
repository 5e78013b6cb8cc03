"""Where watch verdicts go: the SQLite store, the scheduler's own place (AdminComment through the Slurm
access layer), and a real ``slurm-attrib serve`` process over HTTP."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import sys
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Optional

from slurm_attrib.attribution import SqliteVerdictStore
from slurm_attrib.config import HttpConfig, StoreConfig
from slurm_attrib.connectors.base import FakeSource, Window, Workload
from slurm_attrib.engine import Engine
from slurm_attrib.ruleset import load_ruleset
from slurm_attrib.slurm.records import AcctRecord
from slurm_attrib.watch import Found
from slurm_attrib.watch.orchestrate import Orchestrator, SeenState
from slurm_attrib.watch.sinks import AnnotateSink, ServiceSink, StoreSink
from slurm_attrib.watch.slurm import SlurmDiscovery

_SERVICE = Path(__file__).parents[1] / "service" / "conftest.py"  # the service as users run it
_spec = importlib.util.spec_from_file_location("service_conftest", _SERVICE)
assert _spec is not None and _spec.loader is not None
service = importlib.util.module_from_spec(_spec)
sys.modules["service_conftest"] = service  # dataclasses look their module up there
_spec.loader.exec_module(service)

END = datetime(2026, 11, 20, 9, 46, tzinfo=timezone.utc)
NOW = datetime(2026, 11, 20, 10, 0, tzinfo=timezone.utc)
XID79 = (b"Nov 20 09:45:05 gpu-a02 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=4411, name=python3, "
         b"GPU has fallen off the bus.\n")


class FakeSlurm:
    """The Slurm access layer's answers for one failed job, and the AdminComments written."""

    def __init__(self) -> None:
        self.job = AcctRecord(job_id="88123", job_id_raw="88123", state="FAILED", exit_code="1:0",
                              nodes=("gpu-a01", "gpu-a02"), cluster="orion", user="alice",
                              start=END - timedelta(minutes=40), end=END, admin_comment="keep me")
        self.comments: list[tuple[str, str]] = []

    def failed_jobs(self, since: datetime, until: datetime) -> list[AcctRecord]:
        step = AcctRecord(job_id="88123.0", job_id_raw="88123.0", state="FAILED", end=END)
        return [self.job, step]

    def job_records(self, job_id: str) -> list[AcctRecord]:
        return [self.job] if job_id == "88123" else []

    def set_admin_comment(self, job_ref: str, text: str) -> bool:
        self.comments.append((job_ref, text))
        return True

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"watch asked Slurm for {name}")


def _orchestrator(slurm: FakeSlurm, sinks: Sequence[Any], tmp_path: Path) -> Orchestrator:
    kernel = FakeSource("loki", files={"syslog/gpu-a02.log": XID79})
    return Orchestrator(SlurmDiscovery(slurm), [kernel], Engine(load_ruleset(include_site=False)), sinks,
                        SeenState(str(tmp_path / "seen.json")), now=lambda: NOW)


def test_sacct_discovery_store_and_admin_comment(tmp_path: Path) -> None:
    slurm = FakeSlurm()
    store_path = tmp_path / "store.sqlite"
    store = SqliteVerdictStore(StoreConfig(path=str(store_path)), None)
    orchestrator = _orchestrator(slurm, [StoreSink(store), AnnotateSink()], tmp_path)
    outcomes = orchestrator.round(NOW - timedelta(hours=2), NOW)
    assert [o.key for o in outcomes] == ["slurm:orion:88123:2026-11-20T09:06:00+00:00"]  # the step is no workload
    (outcome,) = outcomes
    assert outcome.diagnosis is not None and outcome.diagnosis["culprit_nodes"] == ["gpu-a02"]
    assert outcome.sinks[0].startswith("store: recorded as ")
    assert outcome.sinks[1].startswith("annotate: AdminComment of 88123: keep me")
    ((ref, text),) = slurm.comments
    assert ref == "88123" and "st=attributed" in text and "node=gpu-a02" in text and text.startswith("keep me")
    with sqlite3.connect(store_path) as db:
        assert db.execute("select count(*) from diagnoses").fetchone() == (1,)
    assert orchestrator.round(NOW - timedelta(hours=2), NOW) == []  # seen: not again


def test_a_failing_sink_does_not_keep_the_verdict_from_the_next(tmp_path: Path) -> None:
    class Broken:
        name = "store"

        def deliver(self, *args: Any) -> str:
            raise OSError("disk full")

    slurm = FakeSlurm()
    orchestrator = _orchestrator(slurm, [Broken(), AnnotateSink()], tmp_path)
    (outcome,) = orchestrator.round(NOW - timedelta(hours=2), NOW)
    assert outcome.sinks[0] == "store: failed: OSError: disk full"
    assert len(slurm.comments) == 1
    (again,) = orchestrator.round(NOW - timedelta(hours=2), NOW)  # not delivered everywhere: tried again
    assert again.key == outcome.key and len(slurm.comments) == 2


def test_the_service_sink_posts_the_bundle_to_a_real_service(tmp_path: Path) -> None:
    running = service.start_server(tmp_path / "service")
    try:
        token = tmp_path / "token"
        token.write_text(service.TOKEN + "\n")
        token.chmod(0o600)
        sink = ServiceSink(HttpConfig(url=running.url, token_file=str(token)))
        (outcome,) = _orchestrator(FakeSlurm(), [sink], tmp_path).round(NOW - timedelta(hours=2), NOW)
        assert outcome.sinks == ["service: recorded (attributed)"]
        reply = running.call("GET", "/v1/diagnoses/orion/88123")
        assert reply.status == 200 and json.loads(reply.body)["diagnosis"]["culprit_nodes"] == ["gpu-a02"]
    finally:
        running.stop()


def test_the_service_sink_without_the_token_is_refused_and_says_so(tmp_path: Path) -> None:
    running = service.start_server(tmp_path / "service")
    try:
        sink = ServiceSink(HttpConfig(url=running.url, retries=0))
        found = Found("k", Workload(cluster="c", job_id="1"), Window(END, END))
        (tmp_path / "b").mkdir()
        (tmp_path / "b" / "job.yaml").write_text("job_id: '1'\n")
        try:
            sink.deliver(found, {}, tmp_path / "b", NOW, SlurmDiscovery(FakeSlurm()))
            raised: Optional[Exception] = None
        except Exception as exc:
            raised = exc
        assert raised is not None and "HTTP 401" in str(raised)
    finally:
        running.stop()


def test_a_seen_state_that_cannot_be_written_warns_and_the_round_goes_on(tmp_path: Path) -> None:
    slurm = FakeSlurm()
    orchestrator = _orchestrator(slurm, [AnnotateSink()], tmp_path)
    orchestrator.seen = SeenState(str(tmp_path / "no-such-folder" / "seen.json"))
    (outcome,) = orchestrator.round(NOW - timedelta(hours=2), NOW)
    assert outcome.diagnosis is not None and orchestrator.seen.unsaved
    assert orchestrator.round(NOW - timedelta(hours=2), NOW) == []  # remembered in memory
