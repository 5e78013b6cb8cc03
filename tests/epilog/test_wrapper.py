"""The real /bin/sh Epilog wrapper, run with ``env -i`` (no PATH, as slurmd runs it)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WRAPPER = ROOT / "epilog" / "slurm-attrib-epilog.sh"
DATA = Path(__file__).resolve().parent / "data"


def env_dump(name: str) -> dict[str, str]:
    env = {}
    for line in (DATA / name).read_text().splitlines():
        if line and not line.startswith("#") and "=" in line and not line.startswith("_="):
            key, value = line.split("=", 1)
            env[key] = value
    return env


def fake_python(tmp_path: Path, body: str = "") -> tuple[Path, Path]:
    """A stand-in interpreter that records its arguments (and PATH) in a marker file."""
    marker = tmp_path / "python-ran"
    script = tmp_path / "python"
    script.write_text(f'#!/bin/sh\necho "$PATH $*" > {marker}\n{body}')
    script.chmod(0o755)
    return script, marker


def run_wrapper(env: dict[str, str], etc: Path, timeout: float = 30) -> tuple[subprocess.CompletedProcess[str], float]:
    args = ["/usr/bin/env", "-i", *[f"{k}={v}" for k, v in env.items()], f"SLURM_ATTRIB_ETC={etc}",
            "/bin/sh", str(WRAPPER)]
    began = time.monotonic()
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    return proc, time.monotonic() - began


@pytest.fixture()
def etc(tmp_path: Path) -> Path:
    path = tmp_path / "etc"
    path.mkdir()
    return path


def test_wrapper_is_posix_sh_and_executable() -> None:
    assert WRAPPER.read_text().startswith("#!/bin/sh\n")
    assert os.access(WRAPPER, os.X_OK)
    subprocess.run(["/bin/sh", "-n", str(WRAPPER)], check=True)
    text = WRAPPER.read_text()
    assert "eval" not in text.replace("no eval", "")
    for command in ("scontrol", "sacct", "squeue", "sacctmgr"):
        assert f"{command} " not in text.split("\nPATH=", 1)[1]
    assert text.rstrip().endswith("exit 0")


@pytest.mark.parametrize("dump", ["timeout.epilog.node-01.env"])
def test_success_path_returns_without_starting_python(tmp_path: Path, etc: Path, dump: str) -> None:
    python, marker = fake_python(tmp_path)
    env = {**env_dump(dump), "SLURM_ATTRIB_PYTHON": str(python)}
    proc, _ = run_wrapper(env, etc)
    assert proc.returncode == 0 and proc.stdout == proc.stderr == ""
    assert not marker.exists()


@pytest.mark.parametrize("dump", ["fail-exit3.epilog.node-01.env", "multinode-step-exit7.epilog.node-02.env",
                                  "signal-kill9.epilog.node-01.env"])
def test_failure_path_runs_the_collector_with_a_fixed_path(tmp_path: Path, etc: Path, dump: str) -> None:
    python, marker = fake_python(tmp_path)
    proc, _ = run_wrapper({**env_dump(dump), "SLURM_ATTRIB_PYTHON": str(python)}, etc)
    assert proc.returncode == 0
    assert marker.read_text() == "/usr/sbin:/usr/bin:/sbin:/bin -m slurm_attrib.collect --budget 10\n"


def test_capture_always_flag_file_and_env(tmp_path: Path, etc: Path) -> None:
    python, marker = fake_python(tmp_path)
    env = {**env_dump("timeout.epilog.node-01.env"), "SLURM_ATTRIB_PYTHON": str(python)}
    run_wrapper({**env, "SLURM_ATTRIB_CAPTURE_ALWAYS": "1"}, etc)
    assert marker.exists()
    marker.unlink()
    (etc / "capture-always").write_text("")
    run_wrapper(env, etc)
    assert marker.exists()


def test_settings_file_is_read_not_sourced(tmp_path: Path, etc: Path) -> None:
    python, marker = fake_python(tmp_path)
    evil = tmp_path / "evil"
    (etc / "epilog.conf").write_text(f"budget=7\npython={python}\nlog_file=$(touch {evil})\nfoo=`touch {evil}`")
    proc, _ = run_wrapper(env_dump("fail-exit3.epilog.node-01.env"), etc)
    assert proc.returncode == 0
    assert marker.read_text().endswith("--budget 7\n")
    assert not evil.exists()


def test_config_path_is_passed_to_the_collector(tmp_path: Path, etc: Path) -> None:
    python, marker = fake_python(tmp_path)
    (etc / "epilog.conf").write_text(f"python={python}\nconfig=/srv/test cluster/slurm-attrib.yaml\n")
    run_wrapper(env_dump("fail-exit3.epilog.node-01.env"), etc)
    assert marker.read_text().endswith("--budget 10 --config /srv/test cluster/slurm-attrib.yaml\n")


@pytest.mark.parametrize("budget", ["", "abc", "1;touch /tmp/x", "-5", "1.2.3", ".5", "0", "00", "0.0"])
def test_invalid_budget_falls_back_to_the_default(tmp_path: Path, etc: Path, budget: str) -> None:
    python, marker = fake_python(tmp_path)
    env = {**env_dump("fail-exit3.epilog.node-01.env"), "SLURM_ATTRIB_PYTHON": str(python),
           "SLURM_ATTRIB_BUDGET": budget}
    run_wrapper(env, etc)
    assert marker.read_text().endswith("--budget 10\n")


def test_job_strings_are_never_run(tmp_path: Path, etc: Path) -> None:
    python, marker = fake_python(tmp_path)
    evil = tmp_path / "evil"
    env = {**env_dump("fail-exit3.epilog.node-01.env"), "SLURM_ATTRIB_PYTHON": str(python),
           "SLURM_JOB_ID": f"$(touch {evil})", "SLURMD_NODENAME": f"`touch {evil}`; touch {evil}",
           "SLURM_JOB_EXIT_CODE2": f"1:0 $(touch {evil})"}
    proc, _ = run_wrapper(env, etc)
    assert proc.returncode == 0 and marker.exists() and not evil.exists()


def test_missing_interpreter_exits_zero(tmp_path: Path, etc: Path) -> None:
    log = tmp_path / "epilog.log"
    env = {**env_dump("fail-exit3.epilog.node-01.env"), "SLURM_ATTRIB_PYTHON": str(tmp_path / "nope"),
           "SLURM_ATTRIB_LOG": str(log)}
    proc, elapsed = run_wrapper(env, etc)
    assert proc.returncode == 0 and elapsed < 15


def test_non_executable_interpreter_exits_zero(tmp_path: Path, etc: Path) -> None:
    python, marker = fake_python(tmp_path)
    python.chmod(0o644)
    proc, _ = run_wrapper({**env_dump("fail-exit3.epilog.node-01.env"), "SLURM_ATTRIB_PYTHON": str(python)}, etc)
    assert proc.returncode == 0 and not marker.exists()


def test_failing_collector_exits_zero(tmp_path: Path, etc: Path) -> None:
    python, marker = fake_python(tmp_path, "exit 3\n")
    proc, _ = run_wrapper({**env_dump("fail-exit3.epilog.node-01.env"), "SLURM_ATTRIB_PYTHON": str(python)}, etc)
    assert proc.returncode == 0 and marker.exists()


def test_hanging_collector_is_stopped_within_budget_and_kill_margin(tmp_path: Path, etc: Path) -> None:
    python, marker = fake_python(tmp_path, "trap '' TERM\n/bin/sleep 60\n")  # ignores TERM: needs the KILL
    env = {**env_dump("fail-exit3.epilog.node-01.env"), "SLURM_ATTRIB_PYTHON": str(python),
           "SLURM_ATTRIB_BUDGET": "1"}
    proc, elapsed = run_wrapper(env, etc)
    assert proc.returncode == 0 and marker.exists()
    assert 1.0 <= elapsed < 1 + 2 + 1.5


def test_log_line_goes_to_the_log_file_when_logger_is_absent(tmp_path: Path, etc: Path) -> None:
    """With logger present the line goes to syslog; the collector's own output always goes to the file."""
    python, _ = fake_python(tmp_path, "echo 'slurm-attrib collect: summary'\n")
    log = tmp_path / "epilog.log"
    env = {**env_dump("fail-exit3.epilog.node-01.env"), "SLURM_ATTRIB_PYTHON": str(python),
           "SLURM_ATTRIB_LOG": str(log)}
    run_wrapper(env, etc)
    text = log.read_text()
    assert "slurm-attrib collect: summary" in text
    if not os.access("/usr/bin/logger", os.X_OK):
        assert "epilog job=1 node=node-01" in text


def test_real_collector_through_the_wrapper(tmp_path: Path, etc: Path) -> None:
    kern = tmp_path / "kern-node-01.log"
    kern.write_text("")
    log = tmp_path / "epilog.log"
    env = {**env_dump("fail-exit3.epilog.node-01.env"), "SLURM_ATTRIB_PYTHON": sys.executable,
           "SLURM_ATTRIB_LOG": str(log), "SLURM_ATTRIB_SPOOL": str(tmp_path / "spool"),
           "SLURM_ATTRIB_KERNEL_LOG": str(tmp_path / "kern-{node}.log"),
           "SLURM_ATTRIB_CONFIG": str(tmp_path / "none.yaml")}
    proc, _ = run_wrapper(env, etc)
    assert proc.returncode == 0
    assert (tmp_path / "spool/nodes/mini_1_0/node-01/collection.yaml").is_file(), log.read_text()
    assert "kernel_log=empty" in log.read_text()


def test_hung_nvidia_smi_with_the_real_collector_is_stopped_and_reported(tmp_path: Path, etc: Path) -> None:
    """The wrapper TERMs the collector at the budget while nvidia-smi hangs: the node bundle still
    arrives, marked timeout, the tool is killed, and the wrapper exits 0 in budget + margin."""
    smi = tmp_path / "nvidia-smi"
    pidfile = tmp_path / "smi.pid"
    smi.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec /bin/sleep 60\n")
    smi.chmod(0o755)
    (tmp_path / "kern-node-01.log").write_text("")
    conf = tmp_path / "slurm-attrib.yaml"
    conf.write_text(f"spool:\n  dir: {tmp_path / 'spool'}\ncollector:\n  budget_margin_s: 0\n  source_timeout_s: 30\n"
                    f"  nvidia_smi: {smi}\n  dcgmi: ''\n  kernel_log_path: {tmp_path}/kern-{{node}}.log\n")
    log = tmp_path / "epilog.log"
    env = {**env_dump("fail-exit3.epilog.node-01.env"), "SLURM_ATTRIB_PYTHON": sys.executable,
           "SLURM_ATTRIB_LOG": str(log), "SLURM_ATTRIB_CONFIG": str(conf), "SLURM_ATTRIB_BUDGET": "6"}
    proc, elapsed = run_wrapper(env, etc)  # a 6 s budget: interpreter start-up on a loaded machine fits in it
    assert proc.returncode == 0 and elapsed < 6 + 2 + 1.5
    collection = tmp_path / "spool/nodes/mini_1_0/node-01/collection.yaml"
    assert collection.is_file(), log.read_text()
    text = collection.read_text()
    assert "state: timeout" in text and "stopped at the Epilog budget" in text
    time.sleep(0.2)
    pid = int(pidfile.read_text())
    assert not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
