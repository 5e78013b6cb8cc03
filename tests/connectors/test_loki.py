"""The Loki connector against a loopback server that answers ``query_range`` as Loki does: recorded
answers in the documented format, and a handler that pages a data set forward the way Loki's
``limit`` and ``direction=forward`` do (no Loki server can be installed here)."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from slurm_attrib.config import LokiConfig
from slurm_attrib.connectors.base import Limits, MemoryBundle, SourceCoverage, Window, Workload
from slurm_attrib.connectors.loki import LokiSource, add_matcher, label_value
from slurm_attrib.engine import Engine
from slurm_attrib.ruleset import load_ruleset

from .replay import RECORDED, Answer, Request, replay_server

START = datetime(2026, 11, 20, 9, 0, tzinfo=timezone.utc)
END = datetime(2026, 11, 20, 9, 46, tzinfo=timezone.utc)
WINDOW = Window(START, END, timedelta(minutes=5), timedelta(minutes=1))
JOB = Workload(cluster="orion", job_id="88123", nodes=("gpu-a01", "gpu-a02"))
ONE_NODE = Workload(cluster="c", job_id="1", nodes=("gpu-a01",))
LIMITS = Limits(seconds=10.0, max_bytes=1 << 20)


def _ns(moment: datetime) -> int:
    return int(moment.timestamp()) * 1_000_000_000


def _recorded(name: str) -> Any:
    return json.loads((RECORDED / "loki" / name).read_text())


class FakeLoki:
    """``query_range`` over a data set {labels: [(ns, line)]}: the stream selector's equality matchers
    pick the streams, entries in [start, end) are sorted by stamp and cut at ``limit``, as Loki does."""

    def __init__(self, streams: dict[tuple[tuple[str, str], ...], list[tuple[int, str]]]) -> None:
        self.streams = streams

    def __call__(self, request: Request) -> Answer:
        query = request.param("query")
        wanted = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', query.split("}")[0]))
        start, end, limit = int(request.param("start")), int(request.param("end")), int(request.param("limit"))
        assert request.param("direction") == "forward"
        hits = sorted((ts, labels, line) for labels, values in self.streams.items() for ts, line in values
                      if start <= ts < end and all(dict(labels).get(k) == v for k, v in wanted.items()))[:limit]
        result: dict[tuple[tuple[str, str], ...], list[list[str]]] = {}
        for ts, labels, line in hits:
            result.setdefault(labels, []).append([str(ts), line])
        return Answer(200, {"status": "success", "data": {"resultType": "streams", "result": [
            {"stream": dict(labels), "values": values} for labels, values in result.items()]}})


def _source(url: str, **settings: Any) -> LokiSource:
    return LokiSource(LokiConfig(url=url, **{"backoff_s": 0.01, "timeout_s": 2.0, **settings}))


def _from_fake_loki(data: dict[tuple[tuple[str, str], ...], list[tuple[int, str]]], workload: Workload,
                    limits: Limits = LIMITS, **settings: Any) -> tuple[SourceCoverage, dict[str, bytes], list[Request]]:
    """Collect ``workload`` from a :class:`FakeLoki` holding ``data``: the coverage, the files written and
    the requests the server saw."""
    with replay_server() as server:
        server.route("GET", "/loki/api/v1/query_range", FakeLoki(data))
        bundle = MemoryBundle()
        cov = _source(server.url, **settings).collect(workload, WINDOW, bundle, limits)
    return cov, bundle.files, server.requests


def test_the_recorded_answer_becomes_a_kernel_log_with_lokis_stamps() -> None:
    with replay_server() as server:
        server.route("GET", "/loki/api/v1/query_range", Answer(200, _recorded("query_range_streams.json")),
                     Answer(200, _recorded("query_range_empty.json")))
        bundle = MemoryBundle()
        cov = _source(server.url).collect(JOB, WINDOW, bundle, LIMITS)
    assert cov.state == "ok" and cov.origin == "shipped" and cov.files == ("syslog/gpu-a01.log",)
    # the connector asked per node, then for the job's output; gpu-a01 got the recorded answer here
    queries = [r.param("query") for r in server.requests]
    assert queries == ['{job="kernel", host="gpu-a01"}', '{job="kernel", host="gpu-a02"}',
                       '{job="slurm", slurm_job_id="88123"}']
    assert server.requests[0].param("start") == str(_ns(START - timedelta(minutes=5)))
    assert server.requests[0].param("end") == str(_ns(END + timedelta(minutes=1)) + 1)
    assert bundle.files["syslog/gpu-a01.log"].decode().splitlines() == [
        "2026-11-20T09:45:05.123456789Z gpu-a02 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=4411, name=python3, "
        "GPU has fallen off the bus.",
        "2026-11-20T09:45:05.123456790Z gpu-a01 mlx5_core 0000:5e:00.0: mlx5_cmd_out_err:838: QUERY_PORT(0x100) "
        "op_mod(0x0) failed",
        "2026-11-20T09:45:05.223456789Z gpu-a02 kernel: NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.",
    ]


def test_paging_forward_loses_nothing_and_doubles_nothing_at_page_boundaries() -> None:
    base = _ns(START) + 7
    kernel = (("host", "gpu-a01"), ("job", "kernel"))
    other = (("host", "gpu-a01"), ("job", "kernel"), ("source", "kmsg"))
    data = {kernel: [(base + i // 2, f"line {i}") for i in range(11)],  # pairs share a stamp
            other: [(base + 3, "kmsg at 3")]}
    cov, files, requests = _from_fake_loki(data, ONE_NODE, page_limit=3, job_label="")
    text = files["syslog/gpu-a01.log"].decode().splitlines()
    messages = [line.split(" ", 2)[2] for line in text]
    assert sorted(messages) == sorted([f"line {i}" for i in range(11)] + ["kmsg at 3"])
    assert len(messages) == len(set(messages)) == 12
    stamps = [line.split(" ")[0] for line in text]
    assert stamps == sorted(stamps)
    kernel_pages = [r for r in requests if "kernel" in r.param("query")]
    assert len(kernel_pages) > 3 and cov.state == "ok"


def test_more_entries_in_one_nanosecond_than_a_page_holds_stop_with_a_note() -> None:
    stamp = _ns(START) + 1
    data = {(("host", "gpu-a01"), ("job", "kernel")): [(stamp, f"same ns {i}") for i in range(5)]
            + [(stamp + 1, "after")]}
    cov, files, _ = _from_fake_loki(data, ONE_NODE, page_limit=2, job_label="")
    lines = files["syslog/gpu-a01.log"].decode().splitlines()
    assert lines[-1].endswith("after") and len(lines) == 3
    assert any("share the stamp" in note for note in cov.notes)


def test_job_output_goes_to_the_nodes_file_of_its_host_label() -> None:
    app = {(("host", "gpu-a02"), ("job", "slurm"), ("slurm_job_id", "88123")):
           [(_ns(START) + 5, "[rank3]: RuntimeError: NCCL error")],
           (("host", "login-1"), ("job", "slurm"), ("slurm_job_id", "88123")): [(_ns(START) + 6, "srun: error")],
           (("host", "gpu-a02"), ("job", "slurm"), ("slurm_job_id", "99999")): [(_ns(START) + 7, "other job")]}
    cov, files, _ = _from_fake_loki(app, JOB)
    assert cov.files == ("applog/gpu-a02.log", "applog/loki.log")
    assert files["applog/gpu-a02.log"] == b"2026-11-20T09:00:00.000000005Z [rank3]: RuntimeError: NCCL error\n"
    assert files["applog/loki.log"] == b"2026-11-20T09:00:00.000000006Z srun: error\n"


@pytest.mark.parametrize(("answers", "state", "reason"), [
    ([Answer(429, "slow down", {"Retry-After": "0"}), Answer(200, _recorded("query_range_empty.json"))], "empty",
     "no entries"),
    ([Answer(503, "ingester not ready")], "error", "HTTP 503"),
    ([Answer(400, _recorded("error_parse.json"))], "error", "parse error"),
    ([Answer(200, b'{"status": "success", "data": {"resultType": "streams", "result": [')], "error", "not JSON"),
    ([Answer(200, {"status": "success", "data": {"resultType": "matrix", "result": []}})], "error", "no streams"),
    ([Answer(200, {}, delay_s=5.0)], "timeout", "no answer in time"),
])
def test_backend_faults_are_coverage_lines(answers: list[Answer], state: str, reason: str) -> None:
    with replay_server() as server:
        server.route("GET", "/loki/api/v1/query_range", *answers)
        source = _source(server.url, retries=1, timeout_s=0.5)
        cov = source.collect(JOB, WINDOW, MemoryBundle(), Limits(seconds=1.5, max_bytes=1 << 20))
    assert cov.state == state and reason in cov.reason


def test_no_url_is_skipped() -> None:
    assert LokiSource(LokiConfig()).collect(JOB, WINDOW, MemoryBundle(), LIMITS).state == "skipped"


def test_the_byte_cap_cuts_at_a_line_end() -> None:
    data = {(("host", "gpu-a01"), ("job", "kernel")): [(_ns(START) + i, "x" * 100) for i in range(100)]}
    cov, files, _ = _from_fake_loki(data, ONE_NODE, Limits(10.0, 1000), job_label="")
    data_out = files["syslog/gpu-a01.log"]
    assert cov.truncated and len(data_out) <= 1000 and data_out.endswith(b"\n")


@pytest.mark.parametrize(("selector", "matcher", "expected"), [
    ('{job="kernel"}', 'host="n1"', '{job="kernel", host="n1"}'),
    ("{}", 'host="n1"', '{host="n1"}'),
    ('{job="k}ern"} |= "NVRM"', 'host="n1"', '{job="k}ern", host="n1"} |= "NVRM"'),
    ('{job=`k"}`}', 'host="n1"', '{job=`k"}`, host="n1"}'),
])
def test_the_host_matcher_goes_inside_the_stream_selector(selector: str, matcher: str, expected: str) -> None:
    assert add_matcher(selector, matcher) == expected


def test_label_values_are_escaped() -> None:
    assert label_value('a"b\\c') == '"a\\"b\\\\c"'
    with pytest.raises(ValueError):
        add_matcher('job="kernel"', 'host="n"')


def test_a_line_another_program_wrote_in_a_shipped_kernel_stream_is_refused_and_nothing_shipped_drains(
        tmp_path: Path) -> None:
    """A `logger -t alice` line that a mixed syslog stream shipped keeps its tag behind Loki's stamp, so the
    engine refuses it as kernel evidence; the kernel's own line is used, marked unverified: a shipped line says
    nothing of who wrote it, so it explains the verdict without naming the node."""
    xid = "NVRM: Xid (PCI:0000:3b:00): 79, pid=2, name=python3, GPU has fallen off the bus."
    forged = f"Nov 20 09:30:00 gpu-a01 alice[4242]: {xid}"
    real = f"Nov 20 09:40:00 gpu-a02 kernel: {xid}"
    data = {(("host", "gpu-a01"), ("job", "kernel")): [(_ns(START) + 1800 * 10**9, forged)],
            (("host", "gpu-a02"), ("job", "kernel")): [(_ns(START) + 2400 * 10**9, real)]}
    cov, files, _ = _from_fake_loki(data, JOB, job_label="")
    for rel, content in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(content)
    (tmp_path / "collection").mkdir()
    for node in cov.facts["kernel_nodes"]:
        (tmp_path / "collection" / f"{node}.yaml").write_text(
            "sources:\n- {source: kernel_log, state: ok, origin: shipped}\n")
    (tmp_path / "job.yaml").write_text("job_id: '88123'\nnodes: [gpu-a01, gpu-a02]\nstart: '2026-11-20T09:00:00Z'\n"
                                       "end: '2026-11-20T09:46:00Z'\nstate: FAILED\nexit_code: '1:0'\n")
    diag = Engine(load_ruleset(include_site=False)).diagnose(tmp_path)
    assert diag.status == "ambiguous" and diag.culprit_nodes == []
    assert [c.node for c in diag.candidates] == ["gpu-a02"] and diag.candidates[0].evidence[0].trust == "unverified"
