"""Real-Slurm scenarios: the project's Epilog on four slurmd, its EpilogSlurmctld hook on slurmctld,
the finalizer running as a service; assertions on ``sacct -o admincomment`` and on the store."""

from __future__ import annotations

import gzip
import io
import json
import sys
import tarfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml

from slurm_attrib.store import Store

from .conftest import Env, wait_for

pytestmark = pytest.mark.slurm
PREFIX = "slurm-attrib/v1:"


def _now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")


def comment_of(env: Env, job: str) -> str:
    rows = env.cluster.sacct(job, "jobid,admincomment")
    return rows[0][1] if rows and len(rows[0]) > 1 else ""


def wait_comment(env: Env, job: str, timeout: float = 60) -> str:
    return str(wait_for(lambda: PREFIX in comment_of(env, job) and comment_of(env, job), timeout,
                        f"the verdict of job {job} in sacct"))


def stored(env: Env, job: str) -> list[dict[str, Any]]:
    if not env.store.exists():
        return []
    with Store.open(env.store, create=False, migrate=False) as store:
        return store.find(job)


def done_marker(env: Env, job: str) -> bool:
    return any(env.spool.joinpath("done").glob(f"*_{job}_0.json"))


def test_xid79_on_node02_is_gpu_hardware_within_60s(slurm_env: Env) -> None:
    env = slurm_env
    script = env.root / "nccl-fail.sh"
    script.write_text(f"""#!/bin/sh
srun -N2 -n2 -l sh -c 'echo "$(hostname) NCCL INFO Using network IB"; sleep 1'
printf '%s node-02 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python, GPU has fallen off the bus.\\n' \
    "$(date -u +%Y-%m-%dT%H:%M:%S.%6N+00:00)" >> {env.kern}/node-02.log
sleep 1
msg="RuntimeError: NCCL error: remote process exited or there was a network error, NCCL version 2.21.5"
export msg
srun -N2 -n2 -l sh -c 'echo "[rank$SLURM_PROCID]: $msg"; exit 1'
exit 1
""")
    job = env.cluster.sbatch("-N2", "-w", "node-01,node-02", "-o", str(env.root / "userjobs" / "x79-%j.out"),
                             str(script))
    env.cluster.wait_job_gone(job)
    ended = time.monotonic()
    text = wait_comment(env, job, 60)
    assert time.monotonic() - ended < 60
    assert "cat=gpu_hardware" in text and "node=node-02" in text and "root=xid-79" in text, text
    rows = stored(env, job)
    assert rows and rows[0]["category"] == "gpu_hardware" and "node-02" in rows[0]["culprit_nodes"]
    assert text == text.lower() and '"' not in text and "'" not in text and "|" not in text
    # opt-in remediation (on in this session, not dry-run): node-02 drained with our reason, then resumed
    state = wait_for(lambda: "drain" in env.cluster.node_state("node-02") and env.cluster.node_state("node-02"),
                     20, "node-02 drained")
    assert "drain" in state
    reason = env.cluster.run("sinfo", "-h", "-n", "node-02", "-o", "%E").stdout
    assert reason.startswith("slurm-attrib:")
    cli = str(Path(sys.executable).parent / "slurm-attrib")
    resumed = env.cluster.run(cli, "remediate", "resume", "node-02", "--config", str(env.config), check=False)
    assert resumed.returncode == 0, resumed.stderr
    wait_for(lambda: env.cluster.node_state("node-02") == "idle", 20, "node-02 idle again")


def test_success_leaves_no_comment_and_no_diagnosis(slurm_env: Env) -> None:
    env = slurm_env
    job = env.cluster.sbatch("-N2", "-o", "/dev/null", "--wrap", "srun -N2 true")
    env.cluster.wait_job_gone(job)
    wait_for(lambda: done_marker(env, job), 30, "the finalizer to see the job")
    assert PREFIX not in comment_of(env, job)
    assert stored(env, job) == []


def test_time_limit_is_job_limit(slurm_env: Env) -> None:
    env = slurm_env
    job = env.cluster.sbatch("-t", "1", "-o", "/dev/null", "--wrap", "sleep 300")
    env.cluster.wait_job_gone(job, timeout=150)
    text = wait_comment(env, job, 60)
    assert "cat=job_limit" in text, text
    assert stored(env, job)[0]["category"] == "job_limit"


def test_node_down_during_job_is_node_failure_naming_it(slurm_env: Env) -> None:
    env = slurm_env
    job = env.cluster.sbatch("--no-requeue", "-N2", "-w", "node-03,node-04", "-o",
                             str(env.root / "userjobs" / "nf-%j.out"), "--wrap", "srun -N2 sleep 300")
    wait_for(lambda: env.cluster.run("squeue", "-h", "-j", job, "-o", "%T").stdout.strip() == "RUNNING", 30,
             "job running")
    time.sleep(1)
    env.cluster.run("scontrol", "update", "nodename=node-04", "state=down", "reason=test: simulated node failure")
    try:
        env.cluster.wait_job_gone(job)
        text = wait_comment(env, job, 60)
        assert "cat=node_failure" in text and "node=node-04" in text, text
        row = stored(env, job)[0]
        assert row["category"] == "node_failure" and "node-04" in row["culprit_nodes"]
    finally:
        env.cluster.run("scontrol", "update", "nodename=node-04", "state=resume", check=False)


def test_hanging_collector_does_not_drain_and_coverage_shows_timeout(slurm_env: Env) -> None:
    env = slurm_env
    job = env.cluster.sbatch("-w", "node-03", "-o", "/dev/null", "--hold", "--wrap", "exit 3")
    env.hang_collector(job)
    env.cluster.run("scontrol", "release", job)
    env.cluster.wait_job_gone(job)
    text = wait_comment(env, job, 60)
    assert "st=" in text
    row = stored(env, job)[0]
    diag = json.loads(row["json"])
    assert diag["job"]["job_id"] == job
    bundles = dict(wait_for(lambda: _node_bundles(env, job), 5, "job.yaml"))
    assert bundles.get("node-03") == "timeout", bundles
    state = env.cluster.node_state("node-03")
    assert "drain" not in state, state


def _node_bundles(env: Env, job: str) -> dict[str, str]:
    path = next(iter(env.spool.joinpath("jobs").glob(f"*_{job}_0")), None)
    if path is None:
        return {}
    data = yaml.safe_load((path / "job.yaml").read_text())
    return dict(data["collection"]["node_bundles"])


def test_planted_symlink_stdout_never_reaches_the_store(slurm_env: Env) -> None:
    env = slurm_env
    secret = env.root / "root-only-secret.txt"
    secret.write_text("TOP-SECRET-ROOT-ONLY-CONTENT\n")
    secret.chmod(0o600)
    link = env.root / "userjobs" / "planted.out"
    env.cluster.run("ln", "-s", str(secret), str(link), user=env.user)
    job = env.cluster.sbatch("-o", str(link), "--wrap", "echo hello; exit 2", user=env.user,
                             cwd=str(env.root / "userjobs"))
    env.cluster.wait_job_gone(job)
    wait_for(lambda: stored(env, job), 60, "a stored verdict")
    with Store.open(env.store, create=False, migrate=False) as store:
        row = store.find(job)[0]
        blob = store.bundle(row["id"])
    everything = repr(row).encode() + (bytes(blob["data"]) if blob else b"")
    if blob:
        with tarfile.open(fileobj=io.BytesIO(bytes(blob["data"]))) as tar:
            for member in tar.getmembers():
                handle = tar.extractfile(member)
                if handle:
                    everything += handle.read()
    assert b"TOP-SECRET-ROOT-ONLY-CONTENT" not in everything
    assert b"TOP-SECRET" not in gzip.compress(b"") + everything
    assert secret.read_text() == "TOP-SECRET-ROOT-ONLY-CONTENT\n"


def test_array_task_only_that_task_carries_the_verdict(slurm_env: Env) -> None:
    env = slurm_env
    array = env.cluster.sbatch("-a", "1-2", "-o", "/dev/null", "--wrap",
                               'if [ "$SLURM_ARRAY_TASK_ID" = 2 ]; then exit 4; fi; exit 0')
    env.cluster.wait_job_gone(array)
    failing = f"{array}_2"
    text = wait_comment(env, failing, 60)
    assert PREFIX in text
    wait_for(lambda: len(env.cluster.sacct(array)) >= 2, 20, "both tasks in sacct")
    time.sleep(2)
    # task 1 exited 0: no verdict on its record and none stored (the finalizer once took scontrol's
    # JobState=COMPLETING, shown while the node Epilog still runs, for the job's state and diagnosed it)
    assert PREFIX not in comment_of(env, f"{array}_1")
    assert stored(env, f"{array}_1") == []
    rows = stored(env, failing)
    assert rows and rows[0]["array_task"] == "2"
    assert json.loads(rows[0]["json"])["job"]["state"] == "FAILED"


def test_watch_slurm_once_discovers_a_failed_job_from_sacct(slurm_env: Env) -> None:
    """`watch --source slurm` finds the failed job in the real slurmdbd's accounting and diagnoses it from
    the sacct facts (no connector configured: every one says why it was skipped)."""
    env = slurm_env
    job = env.cluster.sbatch("-o", "/dev/null", "--wrap", "exit 3")
    env.cluster.wait_job_gone(job)
    wait_for(lambda: any(row[0] == job and row[2].startswith("FAILED") for row in env.cluster.sacct(job)), 30,
             "the failed job in sacct")
    cli = str(Path(sys.executable).parent / "slurm-attrib")
    done = env.cluster.run(cli, "watch", "--config", str(env.config), "--source", "slurm", "--once", "--format",
                           "json", "--no-state", "--sink", "stdout", check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    verdicts = {v["job"]["job_id"]: v for v in (json.loads(line) for line in done.stdout.splitlines())}
    assert job in verdicts, sorted(verdicts)
    verdict = verdicts[job]
    assert verdict["job"]["state"] == "FAILED" and verdict["job"]["exit_code"] == "3:0"
    states = {c["connector"]: c["state"] for c in verdict["coverage"]}
    assert states["files"] == "skipped" and states["loki"] == "skipped"


def test_requeued_run_is_left_and_the_next_runs_failure_gets_the_verdict(slurm_env: Env) -> None:
    """``scontrol requeue`` ends run 0 (the controller then holds the job PENDING): no verdict for it, and
    the failure of run 1 is diagnosed under its own key."""
    env = slurm_env
    script = env.root / "requeue.sh"
    script.write_text('#!/bin/sh\nif [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then sleep 300; fi\nexit 5\n')
    job = env.cluster.sbatch("--requeue", "-w", "node-03", "-o", "/dev/null", str(script))
    wait_for(lambda: env.cluster.run("squeue", "-h", "-j", job, "-o", "%T").stdout.strip() == "RUNNING", 30,
             "job running")
    env.cluster.run("scontrol", "requeue", job)
    # a requeued job is held back (BeginTime two minutes on) once its Epilogs are done; let it start at once
    wait_for(lambda: env.cluster.run("squeue", "-h", "-j", job, "-o", "%T").stdout.strip() == "PENDING", 60,
             "the job back in the queue")
    # (started again at once, the run may find slurmd still holding the revoked credential of the run before:
    # 'Killing non-startable batch JobId=N: Job credential revoked', exit 1; give it a moment)
    time.sleep(3)
    env.cluster.run("scontrol", "update", f"jobid={job}", "starttime=now")
    env.cluster.wait_job_gone(job, timeout=120)
    text = wait_comment(env, job, 60)
    assert "st=" in text
    # the requeued run leaves no done marker (its EpilogSlurmctld already carries restart count 1), the
    # failed run does, and its verdict carries that run's exit code as accounting has it
    assert [p.name for p in env.spool.joinpath("done").glob(f"*_{job}_*.json")] == [f"attrib_{job}_1.json"]
    row = stored(env, job)[0]
    accounted = next(r[3] for r in env.cluster.sacct(job) if r[0] == job)
    assert json.loads(row["json"])["job"]["exit_code"] == accounted
