"""Controller enqueue hooks: one JSON file (temp + rename), the whole environment, exit 0 always,
well under 100 ms through the shipped /bin/sh wrapper."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from slurm_attrib import hooks

ROOT = Path(__file__).resolve().parents[1]
DUMPS = ROOT / "tests" / "slurm" / "data"


def _env(name: str) -> dict[str, str]:
    lines = (DUMPS / name).read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


def test_epilog_slurmctld_entry_is_named_by_job_key(tmp_path: Path) -> None:
    env = _env("hook-epilog_slurmctld-array.env")
    path = hooks.enqueue("epilog_slurmctld", env, str(tmp_path), 1796218339.5)
    assert Path(path).name == "mini_7_0.json"
    data = json.loads(Path(path).read_text())
    assert data["hook"] == "epilog_slurmctld" and data["enqueued_at"] == 1796218339.5
    assert data["env"]["SLURM_ARRAY_TASK_ID"] == "2" and data["env"] == env
    assert not [p for p in (tmp_path / "queue").iterdir() if p.name.startswith(".tmp-")]


def test_jobcomp_entry_has_no_restart_count_but_the_runs_start(tmp_path: Path) -> None:
    """Two runs of a requeued job are two entries: the second no longer replaces the first in the queue."""
    env = _env("hook-jobcomp-timeout.env")
    path = hooks.enqueue("jobcomp", env, str(tmp_path), 1.0)
    assert Path(path).name == "mini_10_s1796218347.jobcomp.json"
    later = hooks.enqueue("jobcomp", {**env, "START": "1796218999"}, str(tmp_path), 2.0)
    assert Path(later).name == "mini_10_s1796218999.jobcomp.json" and Path(path).exists()
    assert Path(hooks.enqueue("jobcomp", {**env, "START": "../x"}, str(tmp_path), 3.0)).name == "mini_10.jobcomp.json"


def test_hook_is_detected_from_the_environment() -> None:
    assert hooks.detect_hook(_env("hook-epilog_slurmctld-array.env")) == "epilog_slurmctld"
    assert hooks.detect_hook(_env("hook-jobcomp-timeout.env")) == "jobcomp"
    assert hooks.detect_hook({}) == ""


def test_main_exits_zero_when_the_spool_is_unwritable(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert hooks.main(["epilog_slurmctld", "--spool", str(blocker)]) == 0


def _wrapper(tmp_path: Path) -> Path:
    text = (ROOT / "etc" / "libexec" / "slurm-attrib-ctld-hook").read_text()
    text = text.replace("PYTHON=/usr/bin/python3", f"PYTHON={sys.executable}")
    text = text.replace("SPOOL=/var/spool/slurm-attrib", f"SPOOL={tmp_path}")
    hook = tmp_path / "ctld-hook"
    hook.write_text(text)
    hook.chmod(0o755)
    return hook


def test_wrapper_enqueues_well_under_100_ms(tmp_path: Path) -> None:
    hook = _wrapper(tmp_path)
    env = _env("hook-epilog_slurmctld-fail-exit3.env")
    env.pop("PATH", None)  # Slurm gives the hook no PATH
    times = []
    for i in range(7):
        env["SLURM_JOB_ID"] = str(100 + i)
        began = time.perf_counter()
        done = subprocess.run([str(hook)], env=env, capture_output=True, timeout=10)
        times.append(time.perf_counter() - began)
        assert done.returncode == 0
    assert len(list((tmp_path / "queue").glob("*.json"))) == 7
    assert statistics.median(times) < 0.1, times


def _recording_logger(tmp_path: Path, hook: Path) -> Path:
    said = tmp_path / "syslog.txt"
    logger = tmp_path / "logger"
    logger.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >> {said}\n")
    logger.chmod(0o755)
    hook.write_text(hook.read_text().replace("LOGGER=/usr/bin/logger", f"LOGGER={logger}"))
    return said


def test_wrapper_exits_zero_without_its_interpreter_and_says_so(tmp_path: Path) -> None:
    hook = _wrapper(tmp_path)
    hook.write_text(hook.read_text().replace(f"PYTHON={sys.executable}", "PYTHON=/nonexistent/python3"))
    said = _recording_logger(tmp_path, hook)
    assert subprocess.run([str(hook)], env={"SLURM_JOB_ID": "71"}, timeout=10).returncode == 0
    assert not (tmp_path / "queue").exists()
    assert said.read_text() == "-t slurm-attrib -p daemon.err -- controller hook: /nonexistent/python3 missing; " \
                               "job 71 not queued for a verdict\n"
    assert "job 71 not queued" in (tmp_path / "hook-errors.log").read_text()


def test_a_spool_the_hook_cannot_write_reaches_syslog(tmp_path: Path) -> None:
    """EpilogSlurmctld as a SlurmUser that cannot write the spool: the job is lost, and syslog says so
    (the hook-errors.log in that same spool cannot be written either). Here the spool is a file."""
    hook = _wrapper(tmp_path)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    hook.write_text(hook.read_text().replace(f"SPOOL={tmp_path}", f"SPOOL={blocker}"))
    said = _recording_logger(tmp_path, hook)
    env = _env("hook-epilog_slurmctld-fail-exit3.env")
    env.pop("PATH", None)
    assert subprocess.run([str(hook)], env=env, timeout=10).returncode == 0
    text = said.read_text()
    assert text.startswith("-t slurm-attrib -p daemon.err -- controller hook (uid ") and "not enqueued" in text
