"""Kueue discovery against the replay server (recorded WorkloadList pages, PodLists), the verdict
annotation's merge patch, and the whole path: a failed Workload → PodLogSource → bundle → engine."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml

from slurm_attrib.config import Config, KubernetesConfig, WatchConfig
from slurm_attrib.connectors.base import Limits, MemoryBundle, collect_bounded
from slurm_attrib.connectors.kubernetes import ApiCalls, PodLogSource
from slurm_attrib.engine import Engine
from slurm_attrib.finalizer.comment import verdict_segment
from slurm_attrib.watch.kueue import ANNOTATION, KueueDiscovery, KueueError


def _load_replay() -> Any:
    """tests/connectors/replay.py, loaded by path: tests/watch is no package (no conftest change)."""
    name = "kueue_replay_helper"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).parents[1] / "connectors" / "replay.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while the class is made
        spec.loader.exec_module(module)
    return sys.modules[name]


replay = _load_replay()
Answer, replay_server, kube_client = replay.Answer, replay.replay_server, replay.kube_client
kubernetes = pytest.importorskip("kubernetes")

DATA = Path(__file__).parent / "recorded" / "kueue"
PODS_DATA = Path(__file__).parents[1] / "connectors" / "recorded" / "kubernetes"
WORKLOADS = "/apis/kueue.x-k8s.io/v1beta1/workloads"
SINCE = datetime(2026, 11, 20, 10, 0, tzinfo=timezone.utc)
UNTIL = datetime(2026, 11, 20, 11, 0, tzinfo=timezone.utc)
TRAIN = "job-train-7-3f2a1"


def recorded(name: str, folder: Path = DATA) -> Any:
    return json.loads((folder / name).read_text())


def discovery(url: str, sleeps: list[float], **kwargs: Any) -> KueueDiscovery:
    calls = ApiCalls(timeout_s=2.0, retries=kwargs.pop("retries", 2), backoff_s=0.25, sleep=sleeps.append)
    return KueueDiscovery(kube_client(url), cluster="k8s-west", calls=calls, **kwargs)


def workload_pages(request: Any) -> Any:
    if request.param("continue"):
        return Answer(200, recorded("workloads_page2.json"))
    return Answer(200, recorded("workloads_page1.json"))


def serve(server: Any, workloads: Any = None) -> None:
    server.route("GET", WORKLOADS, *(workloads or [workload_pages]))
    server.route("GET", "/api/v1/namespaces/ml/pods", Answer(200, recorded("podlist.json", PODS_DATA)))
    server.route("GET", "/api/v1/namespaces/vision/pods", Answer(200, recorded("jobset_pods.json")))


def test_failed_workloads_finished_in_the_window_are_found_in_order() -> None:
    with replay_server() as server:
        serve(server)
        found = discovery(server.url, []).discover(SINCE, UNTIL)
        lists = server.calls(WORKLOADS)
        pods = server.calls("/api/v1/namespaces/ml/pods") + server.calls("/api/v1/namespaces/vision/pods")
    # succeeded (reason Succeeded, or JobFinished "finished successfully"), unfinished, outside the
    # window and badly named Workloads are left out
    assert [f.key for f in found] == ["kueue:ml/job-train-7-3f2a1:9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a",
                                      "kueue:vision/jobset-pretrain-b7e4a:2b3c4d5e-0000-4000-8000-000000000004"]
    assert [r.param("continue") for r in lists] == ["", recorded("workloads_page1.json")["metadata"]["continue"]]
    assert all(r.param("limit") == "500" for r in lists)
    assert [r.param("labelSelector") for r in pods] == ["batch.kubernetes.io/job-name=train-7",
                                                        "jobset.sigs.k8s.io/jobset-name=pretrain"]
    train = found[0]
    assert train.workload.kind == "kueue" and train.workload.namespace == "ml" and train.workload.name == TRAIN
    assert train.workload.cluster == "k8s-west" and train.workload.job_id == f"ml/{TRAIN}"
    assert train.workload.pods == ("train-7-0-x7k2p", "train-7-1-q9d4m", "train-7-2-c3v8n")
    assert train.workload.nodes == ("gpu-k01", "gpu-k02", "gpu-k03")
    assert train.workload.args == {"kubernetes": {"label_selector": "batch.kubernetes.io/job-name=train-7"}}
    assert train.window.start == datetime(2026, 11, 20, 10, 0, 1, tzinfo=timezone.utc)  # admitted, before the pods
    assert train.window.end == datetime(2026, 11, 20, 10, 22, 12, tzinfo=timezone.utc)
    # the first container whose final state is a non-zero exit: worker 1, OOMKilled at 10:21:58 (its
    # previous instance's exit 1 at 10:05:31 was restarted, so it did not end the job)
    assert train.job == {"job_id": f"ml/{TRAIN}", "cluster": "k8s-west", "nodes": ["gpu-k01", "gpu-k02", "gpu-k03"],
                         "start": "2026-11-20T10:00:01Z", "end": "2026-11-20T10:22:12Z", "state": "FAILED",
                         "exit_code": "137:0", "user": "ana.lopez", "partition": "gpu-queue"}
    pretrain = found[1]
    assert pretrain.workload.nodes == ("gpu-v01",) and pretrain.job["exit_code"] == "1:0"
    assert pretrain.job["start"] == "2026-11-20T10:02:00Z"


def test_the_configured_namespaces_are_listed_one_by_one() -> None:
    with replay_server() as server:
        serve(server)
        page = recorded("workloads_page1.json")
        del page["metadata"]["continue"]
        server.route("GET", "/apis/kueue.x-k8s.io/v1beta1/namespaces/ml/workloads", Answer(200, page))
        found = discovery(server.url, [], namespaces=["ml"]).discover(SINCE, UNTIL)
        assert server.calls(WORKLOADS) == []
    assert [f.workload.name for f in found] == [TRAIN]
    with pytest.raises(KueueError, match="not a namespace name"):
        KueueDiscovery(object(), ["ml", "../kube-system"])


def test_a_pod_of_a_recreated_job_of_the_same_name_is_not_taken() -> None:
    pods = recorded("podlist.json", PODS_DATA)
    pods["items"][2]["metadata"]["ownerReferences"][0]["uid"] = "11111111-2222-4333-8444-555555555555"
    with replay_server() as server:
        serve(server)
        server.route("GET", "/api/v1/namespaces/ml/pods", Answer(200, pods))
        found = discovery(server.url, []).discover(SINCE, UNTIL)
    assert found[0].workload.pods == ("train-7-0-x7k2p", "train-7-1-q9d4m")
    assert found[0].workload.nodes == ("gpu-k01", "gpu-k02")


def test_pods_that_cannot_be_listed_leave_the_workload_without_pods() -> None:
    with replay_server() as server:
        serve(server)
        server.route("GET", "/api/v1/namespaces/vision/pods", Answer(403, {"kind": "Status", "code": 403}))
        found = discovery(server.url, []).discover(SINCE, UNTIL)
    assert [f.workload.name for f in found] == [TRAIN, "jobset-pretrain-b7e4a"]
    assert found[1].workload.pods == () and found[1].job["nodes"] == [] and "exit_code" not in found[1].job
    assert found[1].workload.args == {"kubernetes": {"label_selector": "jobset.sigs.k8s.io/jobset-name=pretrain"}}


def test_the_verdict_is_written_as_a_merge_patch_annotation() -> None:
    segment = verdict_segment({"status": "attributed", "category": "host_oom", "culprit_nodes": [],
                               "root_cause": {"kind": "host_oom_kill"}}, "42")
    path = f"/apis/kueue.x-k8s.io/v1beta1/namespaces/ml/workloads/{TRAIN}"
    with replay_server() as server:
        serve(server)
        server.route("PATCH", path, Answer(200, recorded("workload_patched.json")))
        kueue = discovery(server.url, [])
        found = kueue.discover(SINCE, UNTIL)[0]
        said = kueue.annotate(found, segment)
        patches = [r for r in server.requests if r.method == "PATCH"]
    assert len(patches) == 1 and patches[0].path == path
    assert patches[0].headers["Content-Type"] == "application/merge-patch+json"
    assert json.loads(patches[0].body) == {"metadata": {"annotations": {ANNOTATION: segment}}}
    assert said == f"workload ml/{TRAIN}: annotation {ANNOTATION}={segment}"
    assert "\n" not in said


def test_an_annotation_refused_is_an_error_with_one_line() -> None:
    with replay_server() as server:
        serve(server)
        server.route("PATCH", f"/apis/kueue.x-k8s.io/v1beta1/namespaces/ml/workloads/{TRAIN}",
                     Answer(403, {"kind": "Status", "code": 403, "reason": "Forbidden"}))
        kueue = discovery(server.url, [])
        found = kueue.discover(SINCE, UNTIL)[0]
        with pytest.raises(KueueError, match="HTTP 403"):
            kueue.annotate(found, "slurm-attrib/v1:st=ambiguous")


def test_a_429_is_retried_and_5xx_until_the_retries_are_spent_is_an_error() -> None:
    sleeps: list[float] = []
    with replay_server() as server:
        serve(server, [Answer(429, {"kind": "Status", "code": 429}, {"Retry-After": "2"}), workload_pages])
        assert len(discovery(server.url, sleeps).discover(SINCE, UNTIL)) == 2
        assert sleeps == [2.0]
        serve(server, [Answer(500, {"kind": "Status", "code": 500})])
        with pytest.raises(KueueError, match=r"HTTP 500 \(3 tries\)"):
            discovery(server.url, sleeps).discover(SINCE, UNTIL)


def test_a_hanging_or_garbled_api_is_an_error_within_the_budget() -> None:
    with replay_server() as server:
        serve(server, [Answer(200, recorded("workloads_page1.json"), delay_s=5)])
        began = time.monotonic()
        with pytest.raises(KueueError, match=r"no answer in time|no time left"):
            discovery(server.url, [], budget_s=1.0).discover(SINCE, UNTIL)
        assert time.monotonic() - began < 2.5
        serve(server, [Answer(200, b"<html>proxy error</html>")])
        with pytest.raises(KueueError, match="not JSON"):
            discovery(server.url, []).discover(SINCE, UNTIL)


def test_a_kueue_oom_on_one_node_is_the_root_not_an_infrastructure_culprit(tmp_path: Path) -> None:
    """Worker 1 was OOMKilled on gpu-k02; the other workers then logged NCCL errors (and worker 1's log
    holds a line imitating a NodeNotReady report for gpu-k01). The verdict: host OOM on gpu-k02, the
    workload's, with no culprit node."""
    with replay_server() as server:
        serve(server)
        for pod in ("train-7-0-x7k2p", "train-7-1-q9d4m", "train-7-2-c3v8n"):
            server.route("GET", f"/api/v1/namespaces/ml/pods/{pod}/log", _log_answer)
        server.route("GET", "/api/v1/namespaces/ml/events", _events_answer)
        found = discovery(server.url, []).discover(SINCE, UNTIL)[0]
        source = PodLogSource(kube_client(server.url), calls=ApiCalls(timeout_s=2.0, retries=0))
        bundle = MemoryBundle()
        coverage = collect_bounded(source, found.workload, found.window, bundle, Limits(10.0, 8 << 20))
    assert coverage.state == "ok", coverage.reason
    root = tmp_path / "bundle"
    (root / "applog").mkdir(parents=True)
    (root / "sacct").mkdir()
    (root / "job.yaml").write_text(yaml.safe_dump(found.job, sort_keys=True))
    for rel, data in bundle.files.items():
        (root / rel).write_bytes(data)
    diag = Engine().diagnose(root).to_dict()
    assert diag["status"] == "attributed", diag["summary"]
    assert diag["category"] == "host_oom" and diag["responsible"] == "workload"
    assert diag["culprit_nodes"] == []
    cause = diag["root_cause"]
    assert cause["kind"] == "host_oom_kill" and cause["node"] == "gpu-k02"
    assert cause["evidence"][0]["file"] == "sacct/kubernetes.txt"
    assert "reason=OOMKilled" in cause["evidence"][0]["raw"]
    assert cause["time"].startswith("2026-11-20T10:21:58")
    symptoms = Engine().run(root).symptoms
    assert any(s.kind == "nccl_error" and s.node == "gpu-k01" for s in symptoms)  # the peers' errors were read
    assert not any(s.kind == "node_not_ready" for s in symptoms)  # a pod log cannot forge the scheduler's line


def _log_answer(request: Any) -> Any:
    pod = request.path.split("/")[-2]
    index = ("train-7-0-x7k2p", "train-7-1-q9d4m", "train-7-2-c3v8n").index(pod)
    name = f"log_worker{index}{'_previous' if request.param('previous') == 'true' else ''}.txt"
    return Answer(200, (PODS_DATA / name).read_bytes(), {"Content-Type": "text/plain"})


def _events_answer(request: Any) -> Any:
    if request.param("fieldSelector") == "involvedObject.name=train-7-1-q9d4m":
        return Answer(200, recorded("events_worker1.json", PODS_DATA))
    return Answer(200, recorded("events_empty.json", PODS_DATA))


def test_the_discovery_the_configuration_describes(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "a",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {"token": "t0ken"}}],
        "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u"}}]}))
    config = Config(cluster="west", kubernetes=KubernetesConfig(kubeconfig=str(kubeconfig), namespaces=("vision", "ml"),
                                                                 timeout_s=3.0, retries=1),
                    watch=WatchConfig(window_before_s=300.0, window_after_s=60.0))
    kueue = KueueDiscovery.from_config(config)
    assert kueue.namespaces == ("ml", "vision") and kueue.cluster == "west"
    assert kueue.calls.timeout_s == 3.0 and kueue.calls.retries == 1
    assert kueue.before == timedelta(minutes=5) and kueue.after == timedelta(minutes=1)
    assert kueue.api_client.configuration.host == "http://127.0.0.1:9"
    with replay_server() as server:
        serve(server)
        found = discovery(server.url, [], before=kueue.before).discover(SINCE.replace(tzinfo=None),
                                                                        UNTIL.replace(tzinfo=None))
    assert found[0].window.since == datetime(2026, 11, 20, 9, 55, 1, tzinfo=timezone.utc)


def test_watch_kueue_once_as_a_process_diagnoses_and_annotates(tmp_path: Path) -> None:
    """`slurm-attrib watch --source kueue --once --format json` against the replayed API through a
    kubeconfig: one Diagnosis per failed Workload, the kubernetes connector's coverage line, and with
    kubernetes.annotate the merge PATCH of the verdict onto the Workload."""
    import subprocess

    with replay_server() as server:
        serve(server)
        for pod in ("train-7-0-x7k2p", "train-7-1-q9d4m", "train-7-2-c3v8n"):
            server.route("GET", f"/api/v1/namespaces/ml/pods/{pod}/log", _log_answer)
        server.route("GET", "/api/v1/namespaces/ml/events", _events_answer)
        server.route("GET", "/api/v1/namespaces/vision/events", _events_answer)
        for namespace, name in (("ml", TRAIN), ("vision", "jobset-vit-9c1e0")):
            server.route("PATCH", f"/apis/kueue.x-k8s.io/v1beta1/namespaces/{namespace}/workloads/{name}",
                         Answer(200, recorded("workload_patched.json")))
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "a",
            "clusters": [{"name": "c", "cluster": {"server": server.url}}],
            "users": [{"name": "u", "user": {"token": "t0ken"}}],
            "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u"}}]}))
        config = tmp_path / "slurm-attrib.yaml"
        config.write_text(f"cluster: k8s-west\nrules_dir: {tmp_path / 'none'}\n"
                          f"kubernetes:\n  enabled: true\n  kubeconfig: {kubeconfig}\n  annotate: true\n"
                          "  retries: 0\n  timeout_s: 3\n"
                          "watch:\n  connectors: [kubernetes]\n  lookback_s: 3600\n")
        done = subprocess.run([sys.executable, "-m", "slurm_attrib.cli", "watch", "--config", str(config), "--source",
                               "kueue", "--once", "--format", "json", "--no-state", "--now", UNTIL.isoformat()],
                              capture_output=True, text=True, timeout=120)
        patches = [r for r in server.requests if r.method == "PATCH"]
    assert done.returncode == 0, done.stderr
    verdicts = [json.loads(line) for line in done.stdout.splitlines()]
    train = next(v for v in verdicts if v["job"]["job_id"] == f"ml/{TRAIN}")
    assert (train["category"], train["culprit_nodes"], train["root_cause"]["node"]) == ("host_oom", [], "gpu-k02")
    assert {c["connector"]: c["state"] for c in train["coverage"]}["kubernetes"] == "ok"
    patched = {r.path.rsplit("/", 1)[1]: json.loads(r.body) for r in patches}
    segment = patched[TRAIN]["metadata"]["annotations"][ANNOTATION]
    assert segment.startswith("slurm-attrib/v1:st=attributed,cat=host_oom,")
    assert [r.headers["Content-Type"] for r in patches] == ["application/merge-patch+json"] * len(patches)
    assert {r.headers.get("Authorization") for r in server.requests} == {"Bearer t0ken"}
