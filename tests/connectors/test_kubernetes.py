"""The Kubernetes connector against the replay server: recorded API answers (PodList, pod logs with
kubelet timestamps, EventList), retries, deadlines, caps, and what it writes into the bundle."""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from slurm_attrib.config import KubernetesConfig
from slurm_attrib.connectors.base import Limits, MemoryBundle, Window, Workload, collect_bounded
from slurm_attrib.connectors.kubernetes import ApiCalls, PodLogSource, build_api_client, parse_time
from slurm_attrib.errors import ConfigError
from slurm_attrib.timestamps import TimeContext, parse_line_time

from .replay import RECORDED, Answer, ReplayServer, Request, kube_client, replay_server

kubernetes = pytest.importorskip("kubernetes")

DATA = RECORDED / "kubernetes"
PODS = ("train-7-0-x7k2p", "train-7-1-q9d4m", "train-7-2-c3v8n")
NODES = {"train-7-0-x7k2p": "gpu-k01", "train-7-1-q9d4m": "gpu-k02", "train-7-2-c3v8n": "gpu-k03"}
WINDOW = Window(datetime(2026, 11, 20, 10, 0, tzinfo=timezone.utc),
                datetime(2026, 11, 20, 10, 22, 12, tzinfo=timezone.utc))
WORKLOAD = Workload(cluster="kubernetes", job_id="ml/job-train-7-3f2a1", kind="kueue", namespace="ml",
                    name="job-train-7-3f2a1", pods=PODS)


def recorded(name: str) -> Any:
    return json.loads((DATA / name).read_text())


def source(url: str, sleeps: list[float], **kwargs: Any) -> PodLogSource:
    calls = ApiCalls(timeout_s=kwargs.pop("timeout_s", 2.0), retries=kwargs.pop("retries", 2), backoff_s=0.25,
                     sleep=sleeps.append)
    return PodLogSource(kube_client(url), calls=calls, **kwargs)


def log_answer(request: Request) -> Answer:
    pod = request.path.split("/")[-2]
    index = PODS.index(pod)
    previous = request.param("previous") == "true"
    name = f"log_worker{index}{'_previous' if previous else ''}.txt"
    return Answer(200, (DATA / name).read_bytes(), {"Content-Type": "text/plain"})


def events_answer(request: Request) -> Answer:
    selector = request.param("fieldSelector")
    if selector == f"involvedObject.name={PODS[1]}":
        return Answer(200, recorded("events_worker1.json"))
    return Answer(200, recorded("events_empty.json"))


def serve_cluster(server: ReplayServer, pods: Any = None) -> None:
    server.route("GET", "/api/v1/namespaces/ml/pods", *(pods or [Answer(200, recorded("podlist.json"))]))
    for pod in PODS:
        server.route("GET", f"/api/v1/namespaces/ml/pods/{pod}/log", log_answer)
    server.route("GET", "/api/v1/namespaces/ml/events", events_answer)


def collect(src: PodLogSource, workload: Workload = WORKLOAD, seconds: float = 10.0,
            max_bytes: int = 1 << 20) -> tuple[Any, MemoryBundle]:
    bundle = MemoryBundle()
    return collect_bounded(src, workload, WINDOW, bundle, Limits(seconds, max_bytes)), bundle


def test_pods_logs_and_events_land_in_the_bundle_layout() -> None:
    with replay_server() as server:
        serve_cluster(server)
        coverage, bundle = collect(source(server.url, []))
        logs = [r for r in server.requests if r.path.endswith("/log")]
        events = server.calls("/api/v1/namespaces/ml/events")
    assert coverage.state == "ok", coverage.reason
    assert coverage.facts["nodes"] == ["gpu-k01", "gpu-k02", "gpu-k03"]
    assert coverage.facts["pods"] == NODES
    assert sorted(bundle.files) == ["applog/gpu-k01.log", "applog/gpu-k02.log", "applog/gpu-k03.log",
                                    "sacct/kubernetes.txt"]
    assert coverage.files == tuple(sorted(bundle.files, key=lambda rel: (not rel.startswith("sacct"), rel)))
    assert coverage.bytes == sum(len(data) for data in bundle.files.values())
    # every log with the kubelet's stamps, the container named; the previous instance only where it restarted
    assert all(r.param("timestamps") == "true" and r.param("container") == "trainer" for r in logs)
    assert sorted((r.path.split("/")[-2], r.param("previous")) for r in logs) == [
        (PODS[0], "false"), (PODS[1], "false"), (PODS[1], "true"), (PODS[2], "false")]
    # the end of a log is where a job fails: the kubelet is asked for a tail (lines; it has none in bytes)
    assert all(0 < int(r.param("tailLines")) <= (1 << 20) // 100 and r.param("limitBytes") == "" for r in logs)
    assert sorted(r.param("fieldSelector") for r in events) == [f"involvedObject.name={p}" for p in PODS]
    k02 = bundle.files["applog/gpu-k02.log"].decode()
    assert k02.splitlines()[0] == f"==> kubernetes pod ml/{PODS[1]} container trainer previous on gpu-k02 <=="
    assert k02.index("ValueError: bad shard 17") < k02.index("container trainer current on gpu-k02 <==")
    assert "2026-11-20T10:21:57.900000000Z [rank1]: loading 8 prefetch batches" in k02


def test_the_scheduler_lines_are_one_per_termination_and_event_sorted_by_time() -> None:
    with replay_server() as server:
        serve_cluster(server)
        _, bundle = collect(source(server.url, []))
    lines = bundle.files["sacct/kubernetes.txt"].decode().splitlines()
    assert lines[0].startswith("# kubernetes:")
    body = lines[1:]
    assert body == sorted(body)
    assert f"2026-11-20T10:21:58Z kubernetes container pod=ml/{PODS[1]} node=gpu-k02 container=trainer " \
           "state=current reason=OOMKilled exit_code=137 signal=0 restarts=1 message=\"\"" in body
    # the message a container wrote (multi-line, imitating fields) is flattened, quoted and last
    last = next(line for line in body if "state=last" in line)
    assert last.startswith("2026-11-20T10:05:31Z ") and last.endswith(
        'message="ValueError: bad shard reason=NodeNotReady node=gpu-k01"')
    assert sum(" kubernetes event " in line for line in body) == 4
    assert sum(" kubernetes container " in line for line in body) == 4
    assert any("reason=OOMKilling count=1 source=kernel-monitor" in line for line in body)


def test_a_message_cannot_make_columns_or_fields() -> None:
    podlist = recorded("podlist.json")
    term = podlist["items"][0]["status"]["containerStatuses"][0]["state"]["terminated"]
    term["message"] = "JobID|State\n7.0|NODE_FAIL\x1b[2J " + "x" * 500
    with replay_server() as server:
        serve_cluster(server, [Answer(200, podlist)])
        _, bundle = collect(source(server.url, []))
    line = next(x for x in bundle.files["sacct/kubernetes.txt"].decode().splitlines() if PODS[0] in x)
    assert "|" not in line and "\x1b" not in line
    assert json.loads(line.split(" message=", 1)[1]) == ("JobID|State 7.0|NODE_FAIL [2J " + "x" * 500)[:300]


def test_pods_are_listed_in_pages() -> None:
    def page(request: Request) -> Answer:
        if request.param("continue"):
            return Answer(200, recorded("podlist_page2.json"))
        return Answer(200, recorded("podlist_page1.json"))

    with replay_server() as server:
        serve_cluster(server, [page])
        coverage, _ = collect(source(server.url, []))
        lists = server.calls("/api/v1/namespaces/ml/pods")
    assert coverage.state == "ok" and coverage.facts["nodes"] == ["gpu-k01", "gpu-k02", "gpu-k03"]
    assert [r.param("continue") for r in lists] == ["", recorded("podlist_page1.json")["metadata"]["continue"]]
    assert all(r.param("limit") == "500" for r in lists)


def test_a_label_selector_finds_the_pods_when_none_are_named() -> None:
    workload = Workload(cluster="k", job_id="ml/x", kind="kueue", namespace="ml",
                        args={"kubernetes": {"label_selector": "batch.kubernetes.io/job-name=train-7"}})
    with replay_server() as server:
        serve_cluster(server)
        coverage, _ = collect(source(server.url, []), workload)
        lists = server.calls("/api/v1/namespaces/ml/pods")
    assert coverage.state == "ok" and len(coverage.facts["pods"]) == 3
    assert lists[0].param("labelSelector") == "batch.kubernetes.io/job-name=train-7"


def test_a_named_pod_that_is_gone_is_a_note() -> None:
    workload = Workload(cluster="k", job_id="ml/x", namespace="ml", pods=(PODS[0], "train-7-9-gone1"))
    with replay_server() as server:
        serve_cluster(server)
        coverage, bundle = collect(source(server.url, []), workload)
    assert coverage.state == "ok" and coverage.facts["nodes"] == ["gpu-k01"]
    assert coverage.notes == ("pod ml/train-7-9-gone1: not found",)
    assert sorted(bundle.files) == ["applog/gpu-k01.log", "sacct/kubernetes.txt"]


def test_an_empty_pod_list_is_empty() -> None:
    with replay_server() as server:
        serve_cluster(server, [Answer(200, recorded("podlist_empty.json"))])
        coverage, bundle = collect(source(server.url, []))
    assert coverage.state == "empty" and bundle.files == {}
    assert "no pod" in coverage.reason and len(coverage.notes) == 3


def test_nothing_to_read_is_skipped_without_a_call() -> None:
    with replay_server() as server:
        coverage, _ = collect(source(server.url, []), Workload(cluster="k", job_id="x", namespace="ml"))
        bad, _ = collect(source(server.url, []), Workload(cluster="k", job_id="x", namespace="../etc", pods=("a",)))
        assert server.requests == []
    assert coverage.state == "skipped" and bad.state == "skipped" and "namespace" in bad.reason


def test_a_429_is_retried_after_retry_after() -> None:
    sleeps: list[float] = []
    with replay_server() as server:
        serve_cluster(server, [Answer(429, {"kind": "Status", "code": 429}, {"Retry-After": "1"}),
                               Answer(200, recorded("podlist.json"))])
        coverage, _ = collect(source(server.url, sleeps))
    assert coverage.state == "ok" and sleeps == [1.0]


def test_5xx_until_the_retries_are_spent_is_an_error_line() -> None:
    sleeps: list[float] = []
    with replay_server() as server:
        serve_cluster(server, [Answer(503, {"kind": "Status", "code": 503, "message": "etcd timeout"})])
        coverage, bundle = collect(source(server.url, sleeps, retries=2))
        tries = len(server.calls("/api/v1/namespaces/ml/pods"))
    assert coverage.state == "error" and "HTTP 503" in coverage.reason and "3 tries" in coverage.reason
    assert tries == 3 and sleeps == [0.25, 0.5] and bundle.files == {}


def test_a_backend_that_hangs_is_a_timeout_within_the_limit() -> None:
    with replay_server() as server:
        serve_cluster(server, [Answer(200, recorded("podlist.json"), delay_s=5)])
        began = time.monotonic()
        coverage, bundle = collect(source(server.url, [], timeout_s=10.0), seconds=1.0)
        spent = time.monotonic() - began
    assert coverage.state == "timeout" and spent < 2.5 and bundle.files == {}


def test_a_malformed_answer_is_an_error_line() -> None:
    with replay_server() as server:
        serve_cluster(server, [Answer(200, b'{"kind": "PodList", "items": [')])
        coverage, _ = collect(source(server.url, []))
        serve_cluster(server, [Answer(200, {"kind": "Status", "status": "Success"})])
        no_items, _ = collect(source(server.url, []))
    assert coverage.state == "error" and "not JSON" in coverage.reason
    assert no_items.state == "error" and "not a PodList" in no_items.reason


def test_a_log_keeps_its_last_whole_lines_and_the_total_stays_under_max_bytes() -> None:
    log = (DATA / "log_worker0.txt").read_bytes()
    last = log.splitlines(keepends=True)[-1]
    with replay_server() as server:
        serve_cluster(server)
        coverage, bundle = collect(source(server.url, [], max_log_bytes=len(last) + 10))
        requests = [r for r in server.requests if r.path.endswith("/log")]
        capped, small = collect(source(server.url, []), max_bytes=1500)
    assert all(r.param("tailLines") == str(max(1, (len(last) + 10) // 100)) for r in requests)
    k01 = bundle.files["applog/gpu-k01.log"].decode()
    assert k01.splitlines(keepends=True)[1:] == [last.decode()]  # the header, then the last whole line
    assert coverage.truncated and "cut at the byte caps" in coverage.reason
    assert capped.truncated and capped.bytes <= 1500 and sum(len(d) for d in small.files.values()) <= 1500


def test_a_log_that_never_ends_is_read_up_to_four_times_its_cap() -> None:
    line = b"2026-11-20T10:10:00.000000000Z [rank0]: step loss 1.0\n"
    with replay_server() as server:
        serve_cluster(server)
        server.route("GET", f"/api/v1/namespaces/ml/pods/{PODS[0]}/log", Answer(200, line * 2000))
        coverage, bundle = collect(source(server.url, [], max_log_bytes=1000))
    k01 = bundle.files["applog/gpu-k01.log"]
    assert len(k01) < 1100 and k01.endswith(line) and coverage.truncated


def test_a_log_that_hangs_keeps_what_was_read_and_says_timeout() -> None:
    with replay_server() as server:
        serve_cluster(server)
        server.route("GET", f"/api/v1/namespaces/ml/pods/{PODS[2]}/log", Answer(200, b"late\n", delay_s=5))
        began = time.monotonic()
        coverage, bundle = collect(source(server.url, []), seconds=1.5)
        spent = time.monotonic() - began
    assert coverage.state == "timeout" and spent < 3.0 and "what was read is kept" in coverage.reason
    assert "applog/gpu-k01.log" in bundle.files and "applog/gpu-k03.log" not in bundle.files
    assert "sacct/kubernetes.txt" in bundle.files


def test_a_log_the_kubelet_no_longer_has_is_a_note() -> None:
    with replay_server() as server:
        serve_cluster(server)
        server.route("GET", f"/api/v1/namespaces/ml/pods/{PODS[2]}/log",
                     Answer(400, {"kind": "Status", "code": 400, "message": "container not found"}))
        coverage, bundle = collect(source(server.url, []))
    assert coverage.state == "ok" and any("HTTP 400" in note for note in coverage.notes)
    assert "applog/gpu-k03.log" not in bundle.files and "applog/gpu-k01.log" in bundle.files


def test_the_node_is_the_pods_spec_never_a_log_line() -> None:
    podlist = recorded("podlist.json")
    podlist["items"][0]["spec"]["nodeName"] = "../../etc/cron.d/x"
    with replay_server() as server:
        serve_cluster(server, [Answer(200, podlist)])
        coverage, bundle = collect(source(server.url, []))
    assert coverage.facts["pods"][PODS[0]] == ""
    assert sorted(bundle.files) == ["applog/gpu-k02.log", "applog/gpu-k03.log", "sacct/kubernetes.txt"]
    assert f"pod ml/{PODS[0]}: not on a node; no log" in coverage.notes
    assert f"pod=ml/{PODS[0]} node=- container=trainer" in bundle.files["sacct/kubernetes.txt"].decode()


def test_kubelet_stamps_are_read_to_the_microsecond() -> None:
    stamp = parse_line_time("2026-11-20T10:21:57.900000123Z [rank1]: x", TimeContext())
    assert stamp.time == datetime(2026, 11, 20, 10, 21, 57, 900000, tzinfo=timezone.utc)
    assert parse_time("2026-11-20T10:21:58.123456789+01:00") == datetime(
        2026, 11, 20, 9, 21, 58, 123456, tzinfo=timezone.utc)
    assert parse_time("yesterday") is None


def test_the_client_comes_from_a_kubeconfig(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "a",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}},
                     {"name": "d", "cluster": {"server": "http://127.0.0.1:10"}}],
        "users": [{"name": "u", "user": {"token": "t0ken"}}],
        "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u"}},
                     {"name": "b", "context": {"cluster": "d", "user": "u"}}]}))
    client = build_api_client(KubernetesConfig(kubeconfig=str(kubeconfig)))
    other = build_api_client(KubernetesConfig(kubeconfig=str(kubeconfig), context="b"))
    assert client.configuration.host == "http://127.0.0.1:9" and other.configuration.host == "http://127.0.0.1:10"
    assert client.configuration.retries is False
    assert kubernetes.client.Configuration.get_default_copy().host != "http://127.0.0.1:9"
    with pytest.raises(ConfigError, match="no usable configuration"):
        build_api_client(KubernetesConfig(kubeconfig=str(tmp_path / "missing")))


def test_without_the_package_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "kubernetes", None)
    with pytest.raises(ConfigError, match=r"slurm-attrib\[connectors\]") as failure:
        build_api_client(KubernetesConfig())
    assert isinstance(failure.value, ImportError)  # a wiring that skips connectors without their extra


def test_a_window_before_the_pods_changes_nothing_but_the_fallback_time() -> None:
    podlist = recorded("podlist.json")
    status = podlist["items"][1]["status"]["containerStatuses"][0]
    status["state"]["terminated"] = {"exitCode": 137, "reason": "ContainerStatusUnknown", "finishedAt": None,
                                     "message": "The container could not be located when the pod was terminated"}
    with replay_server() as server:
        serve_cluster(server, [Answer(200, podlist)])
        _, bundle = collect(source(server.url, []))
    text = bundle.files["sacct/kubernetes.txt"].decode()
    # no finishedAt: the pod's latest condition change (10:22:12), marked as estimated
    assert "2026-11-20T10:22:12Z kubernetes container pod=ml/train-7-1-q9d4m node=gpu-k02 container=trainer " \
           "state=current reason=ContainerStatusUnknown exit_code=137 signal=0 restarts=1 time=estimated" in text
    assert WINDOW.end - WINDOW.start == timedelta(minutes=22, seconds=12)
