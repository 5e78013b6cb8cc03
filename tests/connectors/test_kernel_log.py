"""The kernel log source: journald first, then the ring buffer (dmesg), then syslog files (time-seeked)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from slurm_attrib.connectors.kernel_log import KernelLogSource
from slurm_attrib.connectors.runner import CommandResult, FakeRunner

UTC = timezone.utc
START = datetime(2026, 11, 20, 9, 12, 0, tzinfo=UTC)
END = datetime(2026, 11, 20, 9, 20, 0, tzinfo=UTC)
XID = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus."
JOURNAL = (f"2026-11-20T09:16:08.578973+00:00 node-02 kernel: {XID}\n"
           "2026-11-20T09:16:08.579001+00:00 node-02 kernel: NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.\n")


def _syslog(path: Path) -> None:
    lines = []
    t = START - timedelta(hours=2)
    while t < END + timedelta(hours=1):
        lines.append(f"{t:%b} {t.day:2d} {t:%H:%M:%S} node-02 kernel: [ 1234.000000] tick\n")
        if t == START + timedelta(minutes=4):
            lines.append(f"{t:%b} {t.day:2d} {t:%H:%M:%S} node-02 kernel: [ 1234.500000] {XID}\n")
        t += timedelta(seconds=30)
    path.write_text("".join(lines))


def test_journald_first_with_exact_arguments() -> None:
    runner = FakeRunner({"journalctl": JOURNAL.encode()})
    result = KernelLogSource(runner, files=()).gather(START, END, timeout=3, cap=1 << 20)
    assert result.state == "ok" and result.data == JOURNAL.encode()
    assert runner.calls == [("journalctl", "-k", "-q", "-o", "short-iso-precise", "--no-pager",
                             f"--since=@{int(START.timestamp())}", f"--until=@{int(END.timestamp()) + 1}")]


def test_journald_hung_is_a_timeout() -> None:
    result = KernelLogSource(FakeRunner({"journalctl": "hang"}), files=()).gather(START, END, 3, 1 << 20)
    assert result.state == "timeout"


def test_journald_huge_output_keeps_the_tail_from_a_line_start() -> None:
    big = ("2026-11-20T09:13:00.000000+00:00 node-02 kernel: noise\n" * 50000 + JOURNAL).encode()
    result = KernelLogSource(FakeRunner({"journalctl": big}), files=()).gather(START, END, 3, cap=4096)
    assert result.state == "ok" and result.truncated and len(result.data) <= 4096
    assert result.data.endswith(JOURNAL.encode()) and result.data.startswith(b"2026-11-20T09:13:00")


def test_no_journalctl_reads_the_first_existing_file(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    kern = tmp_path / "kern.log"
    _syslog(kern)
    source = KernelLogSource(FakeRunner({}), files=(str(tmp_path / "a" / "kern.log"), str(kern)))
    result = source.gather(START, END, 3, 1 << 20)
    assert result.state == "ok" and result.origin == "kern-file"
    assert XID.encode() in result.data
    first, last = result.data.splitlines()[0], result.data.splitlines()[-1]
    assert first.startswith(b"Nov 20 09:12:00") and last.startswith(b"Nov 20 09:20:00")
    assert "journalctl: not found" in result.reason and "a/kern.log: not found" in result.reason


@pytest.mark.parametrize(("name", "origin"), [("messages", "mixed-file"), ("kern.log", "kern-file")])
def test_the_ring_buffer_comes_before_a_syslog_file(tmp_path: Path, name: str, origin: str) -> None:
    """/var/log/messages holds what `logger -t kernel` writes, kern.log what a program's raw write to /dev/log names as
    the kern facility: a syslog file is read only when journald and the ring buffer (only the kernel, or root, writes
    it) have nothing, and its origin says so (the engine then marks its lines unverified)."""
    syslog = tmp_path / name
    _syslog(syslog)
    ring = f"2026-11-20T09:16:08,578973+00:00 {XID}\n".encode()
    with_ring = KernelLogSource(FakeRunner({"journalctl": b"", "dmesg": ring}), files=(str(syslog),))
    result = with_ring.gather(START, END, 3, 1 << 20)
    assert result.state == "ok" and result.origin == "dmesg" and result.data == ring
    without = KernelLogSource(FakeRunner({"journalctl": b""}), files=(str(syslog),)).gather(START, END, 3, 1 << 20)
    assert without.state == "ok" and without.origin == origin and XID.encode() in without.data
    assert "journalctl: no kernel lines in the window" in without.reason


def test_a_configured_file_is_trusted_as_configured(tmp_path: Path) -> None:
    """The one file the configuration names as the node's kernel log (the emulation's knob) has its own origin."""
    kern = tmp_path / "node-02.log"
    _syslog(kern)
    result = KernelLogSource(FakeRunner({}), path=str(kern)).gather(START, END, 3, 1 << 20)
    assert result.state == "ok" and result.origin == "configured"


def test_the_origin_reaches_collection_yaml(tmp_path: Path) -> None:
    from slurm_attrib.connectors.base import Limits, Window, Workload

    messages = tmp_path / "messages"
    _syslog(messages)

    class Writer:
        def write(self, rel: str, data: bytes) -> int:
            return len(data)

    source = KernelLogSource(FakeRunner({"journalctl": b""}), files=(str(messages),))
    coverage = source.collect(Workload(cluster="c", job_id="7", node="node-02"), Window(START, END), Writer(),
                              Limits(3, 1 << 20))
    assert coverage.entry()["origin"] == "mixed-file"


def test_empty_journal_falls_back_to_files_then_reports_empty(tmp_path: Path) -> None:
    kern = tmp_path / "kern.log"
    _syslog(kern)
    assert KernelLogSource(FakeRunner({"journalctl": b""}), files=(str(kern),)).gather(
        START, END, 3, 1 << 20).state == "ok"
    assert KernelLogSource(FakeRunner({"journalctl": b""}), files=()).gather(START, END, 3, 1 << 20).state == "empty"


def test_template_path_replaces_journald_and_files(tmp_path: Path) -> None:
    kern = tmp_path / "node-02.log"
    _syslog(kern)
    runner = FakeRunner({"journalctl": JOURNAL.encode()})
    result = KernelLogSource(runner, files=(), path=str(kern)).gather(START, END, 3, 1 << 20)
    assert result.state == "ok" and runner.calls == [] and XID.encode() in result.data


def test_window_outside_the_file_is_empty(tmp_path: Path) -> None:
    kern = tmp_path / "kern.log"
    _syslog(kern)
    later = END + timedelta(days=2)
    result = KernelLogSource(FakeRunner({}), files=(str(kern),)).gather(later, later + timedelta(hours=1), 3, 1 << 20)
    assert result.state == "empty" and result.data == b""


def test_planted_symlink_is_an_error_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "shadow"
    secret.write_text("Nov 20 09:15:00 node-02 root-only secret\n")
    link = tmp_path / "kern.log"
    link.symlink_to(secret)
    result = KernelLogSource(FakeRunner({}), files=(str(link),)).gather(START, END, 3, 1 << 20)
    assert result.state == "error" and b"secret" not in result.data and "not followed" in result.reason


def test_dmesg_iso_is_filtered_to_the_window() -> None:
    out = ("2026-11-20T08:00:00,000000+00:00 early line\n"
           f"2026-11-20T09:16:08,578973+00:00 {XID}\n"
           "2026-11-20T11:00:00,000000+00:00 late line\n").encode()
    result = KernelLogSource(FakeRunner({"dmesg": out}), files=()).gather(START, END, 3, 1 << 20)
    assert result.state == "ok" and result.data == f"2026-11-20T09:16:08,578973+00:00 {XID}\n".encode()


def test_dmesg_decoded_keeps_the_facility_for_the_engine() -> None:
    """`dmesg --decode` (util-linux's -x) writes each record's facility first; the window filter reads past it,
    and the lines are kept as printed, so the engine can refuse a program's /dev/kmsg write (facility user)."""
    out = ("kern  :info  : 2026-11-20T08:00:00,000000+00:00 early line\n"
           f"kern  :err   : 2026-11-20T09:16:08,578973+00:00 {XID}\n"
           f"user  :err   : 2026-11-20T09:16:09,000000+00:00 {XID}\n").encode()
    result = KernelLogSource(FakeRunner({"dmesg": out}), files=()).gather(START, END, 3, 1 << 20)
    assert result.state == "ok" and result.data == out.split(b"\n", 1)[1]


def test_dmesg_without_iso_support_uses_uptimes_and_the_boot_time() -> None:
    boot = START - timedelta(seconds=1000)

    def dmesg(argv: list[str]) -> bytes:
        return (f"[  500.000000] before the job\n[ 1248.578973] {XID}\n[ 9000.000000] after\n").encode()

    refused = CommandResult("error", b"", 1, "dmesg: exit status 1")
    runner = FakeRunner({"dmesg": dmesg})
    calls: list[tuple[str, ...]] = []

    class Runner(FakeRunner):
        def run(self, argv, timeout, max_bytes, keep="head"):  # type: ignore[no-untyped-def]
            calls.append(tuple(argv))
            return refused if "--time-format" in argv else runner.run(argv, timeout, max_bytes, keep)

    source = KernelLogSource(Runner({"dmesg": b""}), files=(), use_journald=False, boot_time=boot)
    result = source.gather(START, END, 3, 1 << 20)
    assert calls == [("dmesg", "--decode", "--time-format", "iso"), ("dmesg", "--time-format", "iso"), ("dmesg",)]
    assert result.state == "ok" and result.data == f"[ 1248.578973] {XID}\n".encode()


def test_nothing_available_is_skipped() -> None:
    result = KernelLogSource(FakeRunner({}), files=("/nonexistent/kern.log",)).gather(START, END, 3, 1 << 20)
    assert result.state == "skipped"
