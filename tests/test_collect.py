"""The node collector end to end with fakes: real Epilog environments in, a node bundle out."""

from __future__ import annotations

import argparse
import io
import shutil
import time
from contextlib import redirect_stdout
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml

from slurm_attrib.bundle import load_bundle
from slurm_attrib.collect import Budget, EpilogJob, NodeSources, clock_skew, collect_node, main, run
from slurm_attrib.config import CollectorConfig, Config, SpoolConfig
from slurm_attrib.connectors.gpu import DcgmExporterSource, DcgmiSource, NvidiaSmiSource
from slurm_attrib.connectors.kernel_log import KernelLogSource
from slurm_attrib.connectors.node_facts import NodeFactsSource
from slurm_attrib.connectors.runner import FakeRunner

TESTS = Path(__file__).resolve().parent
ENVS = TESTS / "epilog" / "data"
A100 = (TESTS / "data" / "gpu" / "nvidia-smi-q-x.a100-sxm4-mig.xml").read_bytes()
NOW = datetime(2026, 11, 20, 9, 20, 0, tzinfo=timezone.utc)
XID = "NVRM: Xid (PCI:0000:01:00): 79, pid=1234, name=python3, GPU has fallen off the bus."


def env_dump(name: str) -> dict[str, str]:
    """A captured Epilog environment (Slurm 22.05, slurm-minicluster) as a mapping."""
    env = {}
    for line in (ENVS / name).read_text().splitlines():
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            env[key] = value
    return env


class _Facts(NodeFactsSource):
    def gather(self):  # type: ignore[no-untyped-def]
        return {"hostname": "node-01", "kernel": "6.1.0", "boot_time": "2026-11-20T08:00:00Z",
                "timezone": "UTC", "driver_version": "535.54.03"}, []


def sources(runner: FakeRunner, kernel_path: str = "") -> NodeSources:
    return NodeSources(kernel=KernelLogSource(runner, files=(), path=kernel_path),
                       nvidia_smi=NvidiaSmiSource(runner), dcgmi=DcgmiSource(runner),
                       exporter=DcgmExporterSource(None, ""), facts=_Facts())  # type: ignore[arg-type]


def config(tmp_path: Path, **collector: object) -> Config:
    return Config(spool=SpoolConfig(dir=str(tmp_path / "spool"), fallback_dir=str(tmp_path / "fallback")),
                  collector=replace(CollectorConfig(), **collector))  # type: ignore[arg-type]


def journal() -> bytes:
    return (f"2026-11-20T09:16:08.578973+00:00 node-01 kernel: {XID}\n").encode()


def test_failed_job_bundle_layout_and_contract(tmp_path: Path) -> None:
    runner = FakeRunner({"journalctl": journal(), "nvidia-smi": A100})
    report = collect_node(env_dump("fail-exit3.epilog.node-01.env"), config(tmp_path), sources(runner), now=NOW)
    root = tmp_path / "spool" / "nodes" / "mini_1_0" / "node-01"
    assert report.delivery is not None and report.delivery.path == str(root)
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert files == ["collection.yaml", "facts/node-01.yaml", "metrics/node-01.xml", "syslog/node-01.log"]
    assert (root / "syslog/node-01.log").read_bytes() == journal()
    assert (root / "metrics/node-01.xml").read_bytes() == A100
    collection = yaml.safe_load((root / "collection.yaml").read_text())
    assert {k: collection[k] for k in ("job_id", "cluster", "node", "user", "uid", "exit_code2", "derived_ec",
                                       "restart_count", "stdout", "stderr")} == {
        "job_id": "1", "cluster": "mini", "node": "node-01", "user": "root", "uid": "0", "exit_code2": "3:0",
        "derived_ec": "0", "restart_count": 0, "stdout": "/tmp/slurm-mini/jobs/%j.out",
        "stderr": "/tmp/slurm-mini/jobs/%j.err"}
    states = {e["source"]: e["state"] for e in collection["sources"]}
    assert states == {"node_facts": "ok", "kernel_log": "ok", "nvidia_smi": "ok", "dcgmi": "skipped",
                      "dcgm_exporter": "skipped"}
    for entry in collection["sources"]:
        extra = {"origin"} if entry["source"] == "kernel_log" else set()  # how far the engine trusts its lines
        assert set(entry) == {"source", "state", "reason", "bytes", "seconds", *extra}
    assert [e["origin"] for e in collection["sources"] if e["source"] == "kernel_log"] == ["journald"]
    assert "start" not in collection  # 22.05: no start time in the Epilog
    assert collection["window"] == {"start": "2026-11-20T08:20:00Z", "end": "2026-11-20T09:21:00Z"}


def test_facts_file_is_what_the_engine_reads(tmp_path: Path) -> None:
    runner = FakeRunner({"journalctl": journal(), "nvidia-smi": A100})
    collect_node(env_dump("fail-exit3.epilog.node-01.env"), config(tmp_path), sources(runner), now=NOW)
    node_bundle = tmp_path / "spool" / "nodes" / "mini_1_0" / "node-01"
    job_bundle = tmp_path / "job"
    shutil.copytree(node_bundle, job_bundle)
    (job_bundle / "job.yaml").write_text("job_id: '1'\nnodes: [node-01]\nstart: '2026-11-20T09:10:00Z'\n"
                                         "end: '2026-11-20T09:19:00Z'\nstate: FAILED\nexit_code: '3:0'\n")
    bundle = load_bundle(job_bundle)
    facts = bundle.node_facts["node-01"]
    assert facts.driver_version == "535.54.03" and facts.timezone == "UTC"
    assert facts.boot_time == datetime(2026, 11, 20, 8, 0, tzinfo=timezone.utc)
    assert facts.gpus == (("0000:01:00", "GPU-513536b6-7d19-9063-b049-1e69664bb298", 0),)
    assert [f.rel for f in bundle.files] == ["metrics/node-01.xml", "syslog/node-01.log"]
    assert not [p for p in bundle.problems if "facts" in p]


def test_hung_tools_are_recorded_and_the_budget_holds(tmp_path: Path) -> None:
    runner = FakeRunner({"journalctl": "hang", "nvidia-smi": "hang", "dcgmi": "hang"}, sleep_on_hang=True)
    began = time.monotonic()
    report = collect_node(env_dump("fail-exit3.epilog.node-01.env"),
                          config(tmp_path, source_timeout_s=0.4), sources(runner),
                          budget=Budget(1.5, 0.5), now=NOW)
    elapsed = time.monotonic() - began
    assert elapsed < 1.6
    states = {e["source"]: e["state"] for e in report.entries}
    assert states["kernel_log"] == "timeout" and states["nvidia_smi"] == "timeout"
    assert states["dcgmi"] in ("timeout", "skipped")
    assert report.delivery is not None and report.delivery.destination == "spool"


def test_kernel_log_template_per_node(tmp_path: Path) -> None:
    log = tmp_path / "kern-node-02.log"
    log.write_text("Nov 20 09:16:08 node-02 kernel: " + XID + "\nDec 20 09:16:08 node-02 kernel: later\n")
    env = env_dump("multinode-step-exit7.epilog.node-02.env")
    env["SLURM_ATTRIB_KERNEL_LOG"] = str(tmp_path / "kern-{node}.log")
    from slurm_attrib.collect import default_sources

    srcs = default_sources(config(tmp_path).collector, "node-02", env)
    assert srcs.kernel.path == str(log)
    srcs = sources(FakeRunner({}), kernel_path=str(log))
    report = collect_node(env, config(tmp_path), srcs, now=NOW)
    assert report.job.key.endswith("_0") and report.job.derived_ec == "1792"
    data = (Path(report.delivery.path) / "syslog" / "node-02.log").read_text()  # type: ignore[union-attr]
    assert data == "Nov 20 09:16:08 node-02 kernel: " + XID + "\n"


def test_start_and_end_from_the_environment_set_the_window(tmp_path: Path) -> None:
    env = env_dump("fail-exit3.epilog.node-01.env")
    start = NOW - timedelta(hours=5)
    env.update(SLURM_JOB_START_TIME=str(int(start.timestamp())), SLURM_JOB_END_TIME=str(int(NOW.timestamp())))
    runner = FakeRunner({"journalctl": journal()})
    collect_node(env, config(tmp_path), sources(runner), now=NOW + timedelta(seconds=3))
    since = runner.calls[0][6]
    assert since == f"--since=@{int((start - timedelta(seconds=300)).timestamp())}"
    collection = yaml.safe_load((tmp_path / "spool/nodes/mini_1_0/node-01/collection.yaml").read_text())
    assert collection["start"] == "2026-11-20T04:20:00Z" and collection["end"] == "2026-11-20T09:20:00Z"


def test_array_and_restart_keys() -> None:
    env = env_dump("array.epilog.node-01.job7.env")
    assert EpilogJob.from_env(env).key == "mini_7_0"  # 22.05: the Epilog does not know the array
    env.update(SLURM_ARRAY_JOB_ID="6", SLURM_ARRAY_TASK_ID="1", SLURM_JOB_RESTART_COUNT="2")
    job = EpilogJob.from_env(env)
    assert job.key == "mini_7_2" and job.facts()["raw_job_id"] == "7"  # the raw id, as the finalizer looks it up
    assert job.facts()["job_id"] == "6_1"
    del env["SLURM_JOB_RESTART_COUNT"]
    assert EpilogJob.from_env(env).restart_count == 0


def test_the_workload_the_sources_see() -> None:
    job = EpilogJob.from_env(env_dump("multinode-step-exit7.epilog.node-02.env"))
    work = job.workload()
    assert (work.node, work.nodes, work.job_id, work.cluster) == ("node-02", ("node-02",), job.spool_job_id, "mini")
    assert work.uid == int(job.uid) and work.std_out == job.stdout
    assert "slurm_attrib.slurm" not in _imported_by_the_collector()  # the node side stays lean


def _imported_by_the_collector() -> str:
    import subprocess
    import sys

    code = "import sys, slurm_attrib.collect; print(' '.join(sorted(sys.modules)))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout


def test_success_detection_matches_the_wrapper() -> None:
    assert EpilogJob.from_env(env_dump("timeout.epilog.node-01.env")).succeeded()  # TIMEOUT looks like success
    assert not EpilogJob.from_env(env_dump("multinode-step-exit7.epilog.node-02.env")).succeeded()
    assert not EpilogJob.from_env(env_dump("signal-kill9.epilog.node-01.env")).succeeded()


def test_kernel_log_cap_keeps_the_tail(tmp_path: Path) -> None:
    big = b"".join(b"2026-11-20T09:13:%02d.000000+00:00 node-01 kernel: noise %d\n" % (i % 60, i)
                   for i in range(20000)) + journal()
    runner = FakeRunner({"journalctl": big})
    report = collect_node(env_dump("fail-exit3.epilog.node-01.env"),
                          config(tmp_path, max_bundle_bytes=256 * 1024), sources(runner), now=NOW)
    entry = next(e for e in report.entries if e["source"] == "kernel_log")
    assert 0 < entry["bytes"] <= 256 * 1024 and "tail kept" in entry["reason"]
    data = (Path(report.delivery.path) / "syslog/node-01.log").read_bytes()  # type: ignore[union-attr]
    assert data.endswith(journal()) and data.startswith(b"2026-11-20T09:13:")


def _args(**kw: object) -> argparse.Namespace:
    return argparse.Namespace(**{"config": "/nonexistent.yaml", "spool": None, "budget": None, "force": False, **kw})


def test_run_skips_a_successful_job_and_never_raises(tmp_path: Path) -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        assert run(_args(spool=str(tmp_path / "s")), env_dump("timeout.epilog.node-01.env")) == 0
    assert "nothing to do" in out.getvalue() and not (tmp_path / "s").exists()


def test_run_survives_an_unusable_spool_and_fallback(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    conf = tmp_path / "slurm-attrib.yaml"
    conf.write_text(f"spool:\n  dir: {blocker}\n  fallback_dir: {blocker}\n")
    env = env_dump("fail-exit3.epilog.node-01.env")
    env.update(SLURM_ATTRIB_KERNEL_LOG=str(tmp_path / "none-{node}.log"))
    out = io.StringIO()
    with redirect_stdout(out):
        assert run(_args(config=str(conf)), env) == 0
    assert "failed:" in out.getvalue()


def test_run_with_a_broken_config_uses_defaults_and_says_so(tmp_path: Path) -> None:
    conf = tmp_path / "slurm-attrib.yaml"
    conf.write_text("collector:\n  no_such_key: 1\n")
    env = env_dump("fail-exit3.epilog.node-01.env")
    env.update(SLURM_ATTRIB_KERNEL_LOG=str(tmp_path / "none-{node}.log"))
    out = io.StringIO()
    with redirect_stdout(out):
        assert run(_args(config=str(conf), spool=str(tmp_path / "spool")), env) == 0
    assert "configuration not usable" in out.getvalue()
    assert (tmp_path / "spool/nodes/mini_1_0/node-01/collection.yaml").is_file()


def test_run_collects_with_the_real_sources(tmp_path: Path) -> None:
    log = tmp_path / "kern-node-01.log"
    log.write_text("")
    env = env_dump("fail-exit3.epilog.node-01.env")
    env.update(SLURM_ATTRIB_KERNEL_LOG=str(tmp_path / "kern-{node}.log"))
    out = io.StringIO()
    with redirect_stdout(out):
        assert run(_args(spool=str(tmp_path / "spool"), budget=5.0), env) == 0
    assert "kernel_log=empty" in out.getvalue(), out.getvalue()
    assert (tmp_path / "spool/nodes/mini_1_0/node-01/collection.yaml").is_file()


def test_main_bad_arguments_exit_zero() -> None:
    with redirect_stdout(io.StringIO()):
        assert main(["--budget", "soon"]) == 0


class _Stopped(NvidiaSmiSource):
    def gather(self, timeout: float, cap: int):  # type: ignore[no-untyped-def]
        raise SystemExit("signal 15")  # what the SIGTERM handler raises at the wrapper's budget


def test_stopped_collector_publishes_a_partial_bundle_marked_timeout(tmp_path: Path) -> None:
    import pytest

    node_state = pytest.importorskip("slurm_attrib.finalizer.nodebundles").node_state  # the finalizer's reader

    srcs = sources(FakeRunner({"journalctl": journal()}))
    srcs.nvidia_smi = _Stopped(FakeRunner({}))
    with pytest.raises(SystemExit):
        collect_node(env_dump("fail-exit3.epilog.node-01.env"), config(tmp_path), srcs, now=NOW)
    root = tmp_path / "spool/nodes/mini_1_0/node-01"
    collection = yaml.safe_load((root / "collection.yaml").read_text())
    assert collection["state"] == "timeout"
    assert collection["sources"][-1] == {"source": "collector", "state": "timeout",
                                         "reason": "stopped at the Epilog budget", "bytes": 0, "seconds": 0.0}
    assert (root / "syslog/node-01.log").read_bytes() == journal()
    assert node_state(root)[0] == "timeout"


def test_a_collector_stopped_while_reading_the_node_facts_still_hands_in_a_bundle(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a slow or loaded node the wrapper's SIGTERM can come before the first log source, while the main thread
    waits for the node facts: the bundle is staged before they are read, so a partial one marked timeout arrives."""
    import slurm_attrib.collect as collect_module

    def stopped(*_args: object) -> None:
        raise SystemExit("signal 15")  # what the SIGTERM handler raises in the main thread

    monkeypatch.setattr(collect_module, "_node_facts", stopped)
    with pytest.raises(SystemExit):
        collect_node(env_dump("fail-exit3.epilog.node-01.env"), config(tmp_path),
                     sources(FakeRunner({"journalctl": journal()})), now=NOW)
    collection = yaml.safe_load((tmp_path / "spool/nodes/mini_1_0/node-01/collection.yaml").read_text())
    assert collection["state"] == "timeout" and collection["reason"] == "stopped at the Epilog budget"


def test_a_node_clock_behind_the_controllers_shifts_the_window_and_says_so(tmp_path: Path) -> None:
    """slurmctld stamped the end (23.02+: SLURM_JOB_END_TIME) at 09:20 on its clock; this node's clock reads
    09:18:20 at the Epilog, which runs after the end: it is 100 s behind. The kernel log, stamped on the node's
    clock, is read for the window as the node saw it, and collection.yaml records the skew."""
    env = {**env_dump("fail-exit3.epilog.node-01.env"), "SLURM_JOB_START_TIME": str(int(NOW.timestamp()) - 3600),
           "SLURM_JOB_END_TIME": str(int(NOW.timestamp()))}
    node_now = NOW - timedelta(seconds=100)
    job = EpilogJob.from_env(env)
    assert clock_skew(job, node_now) == -100.0 and clock_skew(job, NOW + timedelta(seconds=40)) is None
    runner = FakeRunner({"journalctl": journal(), "nvidia-smi": A100})
    report = collect_node(env, config(tmp_path), sources(runner), now=node_now)
    argv = next(c for c in runner.calls if c[0] == "journalctl")
    after = int(CollectorConfig().window_after_s)
    assert f"--until=@{int(NOW.timestamp()) - 100 + after + 1}" in argv  # the window's end on the node's clock
    collection = yaml.safe_load((Path(report.delivery.path) / "collection.yaml").read_text())  # type: ignore[union-attr]
    assert collection["clock_skew_s"] == -100.0
    assert any("100 s behind the controller's" in p for p in collection["problems"])
