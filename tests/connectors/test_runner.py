"""The real subprocess runner: timeouts kill the whole group, missing tools are skipped, output is capped."""

from __future__ import annotations

import os
import time
from pathlib import Path

from slurm_attrib.connectors.runner import FakeRunner, SubprocessRunner, TailBuffer


def _tool(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_ok_output_and_clean_environment(tmp_path: Path) -> None:
    tool = _tool(tmp_path, "tool", 'echo "out $PATH"\necho err >&2\n')
    result = SubprocessRunner().run([tool], timeout=5, max_bytes=1000)
    assert result.state == "ok"
    assert result.stdout == b"out /usr/sbin:/usr/bin:/sbin:/bin\n"  # stderr dropped, fixed PATH


def test_missing_tool_is_skipped() -> None:
    result = SubprocessRunner().run(["no-such-tool-slurm-attrib"], timeout=5, max_bytes=1000)
    assert result.state == "skipped"
    assert "not found" in result.reason


def test_non_zero_exit_is_error(tmp_path: Path) -> None:
    tool = _tool(tmp_path, "tool", "echo partial\nexit 3\n")
    result = SubprocessRunner().run([tool], timeout=5, max_bytes=1000)
    assert (result.state, result.returncode, result.stdout) == ("error", 3, b"partial\n")


def test_hung_tool_is_a_timeout_within_budget_and_its_group_is_killed(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    tool = _tool(tmp_path, "hang", f"/bin/sleep 60 & echo $! > {pidfile}\necho started\nwait\n")
    began = time.monotonic()
    result = SubprocessRunner().run([tool], timeout=0.5, max_bytes=1000)
    elapsed = time.monotonic() - began
    assert result.state == "timeout"
    assert elapsed < 1.5
    assert result.stdout == b"started\n"
    child = int(pidfile.read_text())
    time.sleep(0.1)
    try:
        os.kill(child, 0)
        alive = Path(f"/proc/{child}/stat").read_text().split()[2] != "Z"
    except ProcessLookupError:
        alive = False
    assert not alive, "the grandchild of a timed-out tool must be killed with its group"


def test_tool_that_closes_stdout_but_keeps_running_is_a_timeout(tmp_path: Path) -> None:
    tool = _tool(tmp_path, "daemonish", "exec >&-\n/bin/sleep 60\n")
    began = time.monotonic()
    result = SubprocessRunner().run([tool], timeout=0.5, max_bytes=1000)
    assert result.state == "timeout"
    assert time.monotonic() - began < 1.5


def test_huge_output_is_capped_head_or_tail(tmp_path: Path) -> None:
    tool = _tool(tmp_path, "big", "/usr/bin/seq 1 200000\n")
    head = SubprocessRunner().run([tool], timeout=10, max_bytes=100)
    tail = SubprocessRunner().run([tool], timeout=10, max_bytes=100, keep="tail")
    assert head.state == tail.state == "ok"
    assert head.truncated and tail.truncated
    assert head.stdout.startswith(b"1\n2\n") and len(head.stdout) == 100
    assert tail.stdout.endswith(b"199999\n200000\n") and len(tail.stdout) == 100


def test_no_time_left_is_skipped(tmp_path: Path) -> None:
    tool = _tool(tmp_path, "tool", "echo hi\n")
    assert SubprocessRunner().run([tool], timeout=0, max_bytes=10).state == "skipped"


def test_tail_buffer_keeps_last_bytes_across_chunks() -> None:
    buf = TailBuffer(5, keep="tail")
    for chunk in (b"abc", b"defg", b"h"):
        buf.add(chunk)
    assert buf.getvalue() == b"defgh" and buf.truncated


def test_fake_runner_hang_and_missing() -> None:
    fake = FakeRunner({"nvidia-smi": "hang", "dcgmi": b"text"})
    assert fake.run(["nvidia-smi", "-q", "-x"], 2.0, 100).state == "timeout"
    assert fake.run(["dcgmi", "health", "-c"], 2.0, 2).stdout == b"te"
    assert fake.run(["journalctl"], 2.0, 100).state == "skipped"
    assert fake.which("dcgmi") and not fake.which("journalctl")
