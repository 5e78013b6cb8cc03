"""The Prometheus connector against a real Prometheus (dcgm-exporter series built into a TSDB by promtool)
and, for the faults a healthy server does not make, against the replay server."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from slurm_attrib.config import HttpConfig, PrometheusConfig, PrometheusMetrics
from slurm_attrib.connectors.base import Limits, MemoryBundle, SourceCoverage, Window, Workload, collect_bounded
from slurm_attrib.connectors.http import HttpClient
from slurm_attrib.connectors.prometheus import (
    BYTES_PER_SAMPLE,
    MAX_CHUNKS,
    MAX_POINTS,
    MAX_SAMPLES,
    PrometheusSource,
    host_matcher,
    judge_counter,
    judge_xid,
    plan_ranges,
)

from . import promserver
from .promserver import NODES, PromServer, at
from .replay import Answer, replay_server

LIMITS = Limits(seconds=10.0, max_bytes=1 << 20)
JOB_A = Window(at(10, 0), at(10, 30), timedelta(minutes=5), timedelta(minutes=1))  # Xid 79, DBE 0 -> 2
JOB_B = Window(at(10, 40), at(11, 0), timedelta(minutes=5), timedelta(minutes=1))  # only values from before
JOB_C = Window(at(11, 5), at(11, 25), timedelta(minutes=5), timedelta(minutes=1))  # gpu-a3 gpu 1 slowed



def _collect(url: str, window: Window, nodes: tuple[str, ...] = NODES, limits: Limits = LIMITS,
             **settings: Any) -> tuple[SourceCoverage, dict[str, str]]:
    bundle = MemoryBundle()
    source = PrometheusSource(PrometheusConfig(url=url, **settings))
    coverage = source.collect(Workload("c1", "8101", nodes=nodes), window, bundle, limits)
    return coverage, {rel: data.decode() for rel, data in bundle.files.items()}


def _lines(files: dict[str, str], node: str) -> list[str]:
    return files.get(f"metrics/{node}.promql.log", "").splitlines()


# --- a real Prometheus --------------------------------------------------------------------------------


def test_an_xid_appearing_inside_the_window_is_one_line_at_the_first_sample_showing_it(prom: PromServer) -> None:
    coverage, files = _collect(prom.url, JOB_A)
    assert coverage.state == "ok", coverage.reason
    assert _lines(files, "gpu-a2") == [
        "2026-11-20T10:12:00Z promql changed xid node=gpu-a2 gpu=1 uuid=GPU-00000002-aaaa-bbbb-cccc-000000000001 "
        "pci=00000000:5D:00.0 DCGM_FI_DEV_XID_ERRORS changed 0 -> 79 in the job window: xid 79 "
        "(previous sample 2026-11-20T10:11:45Z)"]


def test_counter_rises_resets_and_old_values(prom: PromServer) -> None:
    coverage, files = _collect(prom.url, JOB_A)
    lines = _lines(files, "gpu-a1")
    assert [line.split(" ")[:4] for line in lines] == [
        ["2026-11-20T10:20:00Z", "promql", "increase", "ecc_dbe_volatile"],
        ["2026-11-20T10:15:00Z", "promql", "increase", "ecc_sbe_volatile"],
        ["2026-11-20T10:00:00Z", "promql", "pre_existing", "xid"]]
    assert "increased 0 -> 2 in the job window (previous sample 2026-11-20T10:19:45Z" in lines[0]
    assert "1 counter reset(s)" in lines[1]  # 10 -> 0 at 10:10 is a reset, not a fall; 0 -> 1 the rise
    assert "was 13 before the job" in lines[2]
    assert _lines(files, "gpu-a3")[0].startswith(
        "2026-11-20T10:00:00Z promql pre_existing ecc_dbe_volatile node=gpu-a3 gpu=0 ")
    assert coverage.files == ("metrics/gpu-a1.promql.log", "metrics/gpu-a2.promql.log", "metrics/gpu-a3.promql.log")
    assert coverage.bytes == sum(len(text.encode()) for text in files.values())


def test_a_later_job_sees_the_same_values_as_pre_existing_only(prom: PromServer) -> None:
    coverage, files = _collect(prom.url, JOB_B, nodes=("gpu-a1", "gpu-a2", "gpu-a3"))
    assert coverage.state == "ok"
    kinds = sorted({line.split(" ")[2] for text in files.values() for line in text.splitlines()})
    assert kinds == ["pre_existing"]
    assert "2026-11-20T10:40:00Z promql pre_existing xid node=gpu-a2 gpu=1" in files["metrics/gpu-a2.promql.log"]
    assert "was 79 before the job" in files["metrics/gpu-a2.promql.log"]


def test_one_slowed_gpu_on_one_node_is_a_straggler_with_its_temperature_and_power(prom: PromServer) -> None:
    _, files = _collect(prom.url, JOB_C)
    stragglers = [line for text in files.values() for line in text.splitlines() if "throttle_straggler" in line]
    assert stragglers == [
        "2026-11-20T11:08:00Z promql throttle_straggler clock_throttle_reasons node=gpu-a3 gpu=1 "
        "uuid=GPU-00000003-aaaa-bbbb-cccc-000000000001 pci=00000000:5D:00.0 DCGM_FI_DEV_CLOCK_THROTTLE_REASONS "
        "hw_slowdown (0x8) in 49 of 81 job-window samples (60%) from 2026-11-20T11:08:00Z (temp=92 C, "
        "power=310.5 W then) until 2026-11-20T11:20:00Z; not slowed on 2 other node(s) of the job: a straggler "
        "candidate"]


def test_no_straggler_when_the_slowed_node_has_nothing_to_compare_with(prom: PromServer) -> None:
    coverage, files = _collect(prom.url, JOB_C, nodes=("gpu-a3",))
    assert coverage.state == "ok"
    assert "throttle_straggler" not in files.get("metrics/gpu-a3.promql.log", "")


def test_a_straggler_needs_a_meaningful_part_of_the_window(prom: PromServer) -> None:
    _, files = _collect(prom.url, JOB_C, throttle_min_fraction=0.7)  # slowed 60% of the time
    assert "throttle_straggler" not in "".join(files.values())


def test_the_same_window_gives_the_same_bytes_whatever_the_node_order(prom: PromServer) -> None:
    first = _collect(prom.url, JOB_A)
    again = _collect(prom.url, JOB_A, nodes=tuple(reversed(NODES)))
    assert first[1] == again[1]
    assert first[0].reason == again[0].reason


def test_node_names_are_escaped_for_promql_regex_and_string(prom: PromServer) -> None:
    """'.*' as a node name must match a node called '.*', not every host; quotes and backslashes must
    not break the string. Counted by Prometheus itself."""
    client = HttpClient(HttpConfig(url=prom.url))
    for nodes, expected in (((".*",), 0), (("gpu-a1", ".*"), 2), (('gpu"a1\\', "gpu-a2"), 2), (("gpu-a",), 0)):
        query = f'count(DCGM_FI_DEV_GPU_TEMP{{Hostname=~"{host_matcher(nodes)}"}}) or vector(0)'
        answer = client.get("/api/v1/query", {"query": query, "time": str(at(10, 0).timestamp())}).json()
        assert answer["status"] == "success", answer
        assert int(answer["data"]["result"][0]["value"][1]) == expected, nodes


def test_a_window_past_11000_points_is_split_and_said(prom: PromServer) -> None:
    coverage, _ = _collect(prom.url, JOB_A, step_s=0.25)  # 2,160 s at 0.25 s: 8,641 points, one query
    assert coverage.state == "ok" and coverage.notes == (), coverage.notes
    long_window = Window(at(9, 35), at(11, 25), timedelta(0), timedelta(0))  # 6,600 s at 0.5 s: 13,201 points
    coverage, files = _collect(prom.url, long_window, step_s=0.5)
    assert coverage.state == "ok", coverage.reason
    assert any("split into 2 queries per metric" in note for note in coverage.notes), coverage.notes
    assert "changed 0 -> 79" in files["metrics/gpu-a2.promql.log"]


def test_a_window_too_long_to_split_raises_the_step_and_says_so(prom: PromServer) -> None:
    coverage, files = _collect(prom.url, JOB_A, step_s=0.02)  # 2,160 s at 0.02 s: 108,001 points
    assert coverage.state == "ok", coverage.reason
    assert any("step raised to" in note for note in coverage.notes), coverage.notes
    assert "changed 0 -> 79" in files["metrics/gpu-a2.promql.log"]


def test_a_node_without_series_is_named_and_a_window_without_data_is_empty(prom: PromServer) -> None:
    coverage, _ = _collect(prom.url, JOB_A, nodes=(*NODES, "gpu-b9"))
    assert any("no series for gpu-b9" in note for note in coverage.notes)
    day_later = Window(at(10, 0) + timedelta(days=1), at(10, 30) + timedelta(days=1))
    coverage, files = _collect(prom.url, day_later)
    assert (coverage.state, files) == ("empty", {})


def test_the_bytes_written_stay_under_the_cap(prom: PromServer) -> None:
    coverage, files = _collect(prom.url, JOB_B, limits=Limits(10.0, 600))
    written = sum(len(text.encode()) for text in files.values())
    assert 0 < written <= 600 and coverage.bytes == written
    assert coverage.truncated and any("past the 600-byte cap" in note for note in coverage.notes)


def test_more_samples_than_planned_is_an_error_that_says_what_to_change(
        prom: PromServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan assumes GPUS_PER_NODE series a node; nodes with more (or label churn) can still pass the
    sample budget, and then the source stops rather than hold them."""
    from slurm_attrib.connectors import prometheus

    monkeypatch.setattr(prometheus, "MAX_SAMPLES", 500)  # planned for 24 series: 20 points each
    coverage, _ = _collect(prom.url, JOB_A)
    assert coverage.state == "ok" and "step raised to 114 s" in coverage.notes[0], coverage.notes
    monkeypatch.setattr(prometheus, "GPUS_PER_NODE", 1)  # planned for 3: 145 points at 15 s, 6 GPUs have 870
    coverage, files = _collect(prom.url, JOB_A)
    assert (coverage.state, files) == ("error", {})
    assert "more than 500 samples" in coverage.reason and "prometheus.step_s" in coverage.reason
    assert coverage.query.startswith("DCGM_FI_DEV_XID_ERRORS{Hostname=~")


def test_a_label_other_than_the_default_host_label(prom: PromServer) -> None:
    """dcgm-exporter renamed Hostname to hostname in 2026: with the wrong one nothing matches (empty)."""
    coverage, _ = _collect(prom.url, JOB_A, host_label="hostname")
    assert coverage.state == "empty" and "label hostname" in coverage.reason


# --- faults, on the replay server ---------------------------------------------------------------------

QUERY_RANGE = "/api/v1/query_range"


def _matrix(*series: dict[str, Any]) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": "matrix", "result": list(series)}}


def _series(node: str, values: list[tuple[float, str]], **labels: str) -> dict[str, Any]:
    return {"metric": {"__name__": "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Hostname": node, "gpu": "0", **labels},
            "values": [[t, v] for t, v in values]}


def _only_dbe() -> PrometheusMetrics:
    blank = {key: "" for key in PrometheusMetrics.__dataclass_fields__}
    return PrometheusMetrics(**{**blank, "ecc_dbe_volatile": "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"})


def _replayed(url: str, window: Window = JOB_A, limits: Limits = LIMITS, **settings: Any) -> tuple[
        SourceCoverage, dict[str, str]]:
    config = PrometheusConfig(url=url, **{"metrics": _only_dbe(), "backoff_s": 0.05, "timeout_s": 2.0, **settings})
    bundle = MemoryBundle()
    coverage = PrometheusSource(config).collect(Workload("c1", "1", nodes=("gpu-a1",)), window, bundle, limits)
    return coverage, {rel: data.decode() for rel, data in bundle.files.items()}


T0 = at(9, 55).timestamp()
RISE = [(T0, "0"), (at(10, 5).timestamp(), "0"), (at(10, 6).timestamp(), "3")]


def test_429_and_5xx_are_retried_until_the_answer() -> None:
    with replay_server() as server:
        server.route("GET", QUERY_RANGE, Answer(429), Answer(503), Answer(200, _matrix(_series("gpu-a1", RISE))))
        coverage, files = _replayed(server.url)
        assert coverage.state == "ok", coverage.reason
        assert len(server.calls(QUERY_RANGE)) == 3
        assert "increased 0 -> 3" in files["metrics/gpu-a1.promql.log"]


def test_what_is_sent() -> None:
    with replay_server() as server:
        server.route("GET", QUERY_RANGE, Answer(200, _matrix()))
        _replayed(server.url)
        (request,) = server.calls(QUERY_RANGE)
        assert request.param("query") == 'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{Hostname=~"(?:gpu\\\\-a1)(?:\\\\..+)?"}'
        assert (float(request.param("start")), float(request.param("end"))) == (
            at(9, 55).timestamp(), at(10, 31).timestamp())
        assert request.param("step") == "15"


def test_an_error_answer_is_an_error_line_with_prometheus_words() -> None:
    refusal = {"status": "error", "errorType": "bad_data", "error": "invalid parameter \"query\": parse error"}
    with replay_server() as server:
        server.route("GET", QUERY_RANGE, Answer(400, refusal))
        coverage, files = _replayed(server.url)
    assert (coverage.state, files) == ("error", {})
    assert "HTTP 400" in coverage.reason and "parse error" in coverage.reason
    with replay_server() as server:
        server.route("GET", QUERY_RANGE, Answer(200, refusal))  # a proxy that says 200 over an error
        coverage, _ = _replayed(server.url)
    assert coverage.state == "error" and "bad_data: invalid parameter" in coverage.reason


@pytest.mark.parametrize("body", [b"{not json", b'{"status":"success","data":{"resultType":"vector","result":[]}}',
                                  b'{"status":"success","data":{"resultType":"matrix","result":[1]}}', b"[]"])
def test_an_answer_that_is_not_a_matrix_is_an_error(body: bytes) -> None:
    with replay_server() as server:
        server.route("GET", QUERY_RANGE, Answer(200, body))
        coverage, files = _replayed(server.url)
    assert (coverage.state, files) == ("error", {}), coverage.reason


def test_an_empty_result_is_empty() -> None:
    with replay_server() as server:
        server.route("GET", QUERY_RANGE, Answer(200, _matrix()))
        coverage, files = _replayed(server.url)
    assert (coverage.state, files) == ("empty", {})


def test_a_backend_that_hangs_is_a_timeout_within_the_limit() -> None:
    with replay_server() as server:
        server.route("GET", QUERY_RANGE, Answer(200, _matrix(), delay_s=5))
        began = time.monotonic()
        coverage = collect_bounded(PrometheusSource(PrometheusConfig(url=server.url, metrics=_only_dbe())),
                                   Workload("c1", "1", nodes=("gpu-a1",)), JOB_A, MemoryBundle(), Limits(1.0, 1 << 20))
        assert coverage.state == "timeout", coverage.reason
        assert time.monotonic() - began < 2.0


def test_no_url_is_skipped_and_no_node_is_skipped() -> None:
    coverage, _ = _collect("", JOB_A)
    assert coverage.state == "skipped" and "prometheus.url" in coverage.reason
    coverage, _ = _collect("http://127.0.0.1:9", JOB_A, nodes=())
    assert coverage.state == "skipped"


@pytest.mark.parametrize("settings", [{"step_s": 0.0}, {"step_s": float("nan")}, {"host_label": "host name"},
                                      {"gpu_label": "gpu}"}, {"metrics": PrometheusMetrics(xid="DCGM XID")}])
def test_a_bad_configuration_is_an_error_line_and_no_request(settings: dict[str, Any]) -> None:
    with replay_server() as server:
        server.route("GET", QUERY_RANGE, Answer(200, _matrix()))
        coverage, files = _replayed(server.url, **settings)
        assert (coverage.state, files, server.requests) == ("error", {}, [])
    assert coverage.reason.startswith("configuration: ")


def test_a_missing_token_file_is_an_error_line_and_no_request(tmp_path: Path) -> None:
    with replay_server() as server:
        server.route("GET", QUERY_RANGE, Answer(200, _matrix()))
        coverage, _ = _replayed(server.url, token_file=str(tmp_path / "absent"))
        assert (coverage.state, server.requests) == ("error", [])
    assert coverage.reason.startswith("configuration: ") and "token" in coverage.reason


def test_warnings_nan_infinity_and_dcgm_blank_values() -> None:
    values = [*RISE[:2], (at(10, 5, 30).timestamp(), "NaN"), (at(10, 5, 45).timestamp(), "+Inf"),
              (at(10, 5, 50).timestamp(), "9223372036854775794"), *RISE[2:]]
    body = {**_matrix(_series("gpu-a1", values)), "warnings": ["query hit the series limit"]}
    with replay_server() as server:
        server.route("GET", QUERY_RANGE, Answer(200, body))
        coverage, files = _replayed(server.url)
    assert "increased 0 -> 3" in files["metrics/gpu-a1.promql.log"]
    assert any("3 sample(s) NaN, infinite or DCGM's blank value" in note for note in coverage.notes)
    assert any("prometheus warns: query hit the series limit" in note for note in coverage.notes)


def test_a_malformed_pair_is_dropped_and_the_rest_of_its_series_kept() -> None:
    values: list[Any] = [[T0, "0"], [at(10, 1).timestamp()], ["soon", "1"], {"t": 1}, *([t, v] for t, v in RISE[1:])]
    series = {**_series("gpu-a1", []), "values": values}
    with replay_server() as server:
        server.route("GET", QUERY_RANGE, Answer(200, _matrix(series)))
        coverage, files = _replayed(server.url)
    assert "increased 0 -> 3" in files["metrics/gpu-a1.promql.log"]
    assert any(note.startswith("3 sample(s)") for note in coverage.notes), coverage.notes


def test_label_values_cannot_break_a_line() -> None:
    series = _series("gpu-a1.cluster.example", RISE, UUID="GPU-1\n2026-01-01T00:00:00Z promql changed xid",
                     pci_bus_id="00000000:3B:00.0")
    with replay_server() as server:
        server.route("GET", QUERY_RANGE, Answer(200, _matrix(series)))
        _, files = _replayed(server.url)
    (line,) = files["metrics/gpu-a1.promql.log"].splitlines()  # a host with a domain is the node
    assert "uuid=GPU-1_2026-01-01T00:00:00Z_promql_changed_xid pci=" in line


# --- the judgements, on their own ---------------------------------------------------------------------

START, END = 1000.0, 2000.0


def test_judge_counter() -> None:
    assert judge_counter([(900, 0), (1100, 0), (1500, 2), (1600, 2)], START, END) == (
        "increase", 1500, "increased 0 -> 2 in the job window (previous sample 1970-01-01T00:18:20Z; +2 in all by "
        "1970-01-01T00:26:40Z)")
    assert judge_counter([(900, 4), (1500, 4)], START, END) == (
        "pre_existing", START, "was 4 before the job and did not increase in it")
    assert judge_counter([(900, 0), (1500, 0)], START, END) is None
    assert judge_counter([(900, 0), (2100, 5)], START, END) is None  # after the job's end
    kind, stamp, text = judge_counter([(900, 5), (1200, 0), (1300, 2)], START, END) or ("", 0, "")
    assert (kind, stamp) == ("increase", 1300) and "+2 in all" in text and "1 counter reset(s)" in text
    assert judge_counter([(1200, 3), (1300, 3)], START, END) == (
        "no_baseline", 1200, "first sampled at 3 inside the job window (no earlier value to compare)")
    assert judge_counter([(1200, 3), (1300, 5)], START, END) is not None


def test_judge_xid() -> None:
    assert [f[:2] for f in judge_xid([(900, 0), (1200, 79), (1300, 79), (1400, 48)], START, END)] == [
        ("changed", 1200), ("changed", 1400)]
    assert judge_xid([(900, 79), (1200, 79)], START, END)[0][:2] == ("pre_existing", START)
    cleared = judge_xid([(900, 79), (1200, 0)], START, END)  # an exporter restart clears it: no new Xid
    assert [f[:2] for f in cleared] == [("pre_existing", START)] and cleared[0][2].endswith("no new Xid in it")
    assert judge_xid([(1200, 13)], START, END)[0][0] == "no_baseline"


def _fits(step: float, ranges: list[tuple[float, float]], series: int, max_bytes: int) -> bool:
    points = [round((end - start) / step) + 1 for start, end in ranges]
    return (all(p <= MAX_POINTS and p * series * BYTES_PER_SAMPLE <= max_bytes for p in points)
            and sum(points) * series <= MAX_SAMPLES and len(ranges) <= MAX_CHUNKS
            and all(b[0] == a[1] + step for a, b in zip(ranges, ranges[1:])))


def test_plan_ranges() -> None:
    assert plan_ranges(0, 3600, 15) == (15, [(0, 3600)], "")
    step, ranges, note = plan_ranges(0, 20_000, 1)  # past 11,000 points: two queries at the same step
    assert (step, ranges) == (1, [(0, 10_999), (11_000, 20_000)]) and "split into 2 queries" in note
    step, ranges, note = plan_ranges(0, 30 * 86400, 15)  # a month at 15 s: past 8 queries, the step rises
    assert step == 30 and len(ranges) == 8 and ranges[-1][1] == 30 * 86400 and _fits(step, ranges, 1, 16 << 20)
    big = (0, 86400 + 360, 15, 64 * 8, 16 << 20)  # 64 nodes for a day with its margins
    step, ranges, note = plan_ranges(*big)
    assert step == 23 and len(ranges) == 4 and _fits(step, ranges, 64 * 8, 16 << 20), note
    step, ranges, note = plan_ranges(0, 86400, 15, 24, 64 << 10)  # a tiny answer cap: few points each
    assert len(ranges) <= MAX_CHUNKS and _fits(step, ranges, 24, 64 << 10) and "step raised" in note


def test_windows_without_a_zone_are_utc() -> None:
    naive = Window(datetime(2026, 11, 20, 10, 0), datetime(2026, 11, 20, 10, 30))
    with replay_server() as server:
        server.route("GET", QUERY_RANGE, Answer(200, _matrix()))
        _replayed(server.url, window=naive)
        (request,) = server.calls(QUERY_RANGE)
    assert float(request.param("start")) == datetime(2026, 11, 20, 10, 0, tzinfo=timezone.utc).timestamp()


def test_the_helper_writes_openmetrics(tmp_path: Path) -> None:
    text = promserver.openmetrics()
    assert text.endswith("# EOF\n") and "# TYPE DCGM_FI_DEV_XID_ERRORS gauge" in text
    assert 'err_code="79"' in text
