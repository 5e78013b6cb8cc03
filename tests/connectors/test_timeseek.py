"""The time-seeked window reader against a brute-force filter, on generated RFC 3164 and ISO files."""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from slurm_attrib.connectors.timeseek import find_offset, read_window, read_window_rotated
from slurm_attrib.timestamps import TimeContext, parse_line_time

UTC = timezone.utc
T0 = datetime(2026, 3, 1, 0, 0, 0, tzinfo=UTC)


def _rfc3164(t: datetime, i: int) -> str:
    return f"{t:%b} {t.day:2d} {t:%H:%M:%S} node-01 kernel: [{i:8d}.000000] message number {i}\n"


def _iso(t: datetime, i: int) -> str:
    return f"{t:%Y-%m-%dT%H:%M:%S}.{i % 1000000:06d}+00:00 node-01 kernel: message number {i}\n"


def _write(path: Path, fmt, count: int = 20000, step_s: float = 7.0, start: datetime = T0) -> list[str]:
    lines = []
    for i in range(count):
        lines.append(fmt(start + timedelta(seconds=i * step_s), i))
        if i % 97 == 0:
            lines.append("    continuation line without a stamp\n")
    path.write_text("".join(lines))
    return lines


def _brute(lines: list[str], lo: datetime, hi: datetime, ctx: TimeContext) -> str:
    out, keep, seen_start = [], False, False
    for line in lines:
        when = parse_line_time(line.rstrip("\n"), ctx).time
        if when is not None:
            if when > hi:
                break
            keep = when >= lo
            seen_start = seen_start or keep
        if keep and seen_start:
            out.append(line)
    return "".join(out)


CASES = {
    "start": (T0 - timedelta(hours=1), T0 + timedelta(hours=2)),
    "middle": (T0 + timedelta(hours=10), T0 + timedelta(hours=12)),
    "end": (T0 + timedelta(hours=38), T0 + timedelta(hours=60)),
    "before": (T0 - timedelta(days=3), T0 - timedelta(days=2)),
    "after": (T0 + timedelta(days=5), T0 + timedelta(days=6)),
}


@pytest.mark.parametrize("fmt", [_rfc3164, _iso], ids=["rfc3164", "iso"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_window_matches_brute_force(tmp_path: Path, fmt, case: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "kern.log"
    lines = _write(path, fmt)
    lo, hi = CASES[case]
    ctx = TimeContext(window_start=lo, window_end=hi)
    got = read_window(str(path), lo, hi, ctx, cap=1 << 30)
    assert got.data.decode() == _brute(lines, lo, hi, ctx)
    assert not got.truncated
    if case in ("before", "after"):
        assert got.data == b""


def test_cap_keeps_the_tail_from_a_line_start(tmp_path: Path) -> None:
    path = tmp_path / "kern.log"
    lines = _write(path, _iso)
    lo, hi = CASES["middle"]
    ctx = TimeContext(window_start=lo, window_end=hi)
    full = _brute(lines, lo, hi, ctx).encode()
    got = read_window(str(path), lo, hi, ctx, cap=4096)
    assert got.truncated and len(got.data) <= 4096
    assert full.endswith(got.data)
    assert got.data.startswith(b"2026-") or got.data.startswith(b"    continuation")


def test_find_offset_lands_on_line_starts(tmp_path: Path) -> None:
    path = tmp_path / "kern.log"
    _write(path, _iso, count=5000)
    ctx = TimeContext(window_start=T0, window_end=T0 + timedelta(days=1))
    data = path.read_bytes()
    with path.open("rb") as fh:
        for minutes in (0, 1, 77, 300, 580):
            off = find_offset(fh, len(data), T0 + timedelta(minutes=minutes), ctx)
            assert off == 0 or data[off - 1:off] == b"\n"


def test_yearless_stamps_across_new_year(tmp_path: Path) -> None:
    path = tmp_path / "kern.log"
    start = datetime(2025, 12, 31, 20, 0, 0, tzinfo=UTC)
    lines = _write(path, _rfc3164, count=5000, step_s=5.0, start=start)
    lo, hi = datetime(2025, 12, 31, 23, 50, tzinfo=UTC), datetime(2026, 1, 1, 0, 20, tzinfo=UTC)
    ctx = TimeContext(window_start=lo, window_end=hi)
    got = read_window(str(path), lo, hi, ctx, cap=1 << 30)
    assert got.data.decode() == _brute(lines, lo, hi, ctx)
    assert b"Dec 31 23:50:00" in got.data and b"Jan  1 00:20:00" in got.data


def test_rotated_file_is_read_when_the_window_starts_before_the_current_file(tmp_path: Path) -> None:
    path = tmp_path / "kern.log"
    older = _write(tmp_path / "kern.log.1", _iso, count=3000)
    split = T0 + timedelta(seconds=3000 * 7)
    newer = _write(path, _iso, count=3000, start=split)
    lo, hi = split - timedelta(hours=1), split + timedelta(hours=1)
    ctx = TimeContext(window_start=lo, window_end=hi)
    data, truncated, files = read_window_rotated(str(path), lo, hi, ctx, cap=1 << 30)
    assert files == [f"{path}.1", str(path)]
    assert data.decode() == _brute(older, lo, hi, ctx) + _brute(newer, lo, hi, ctx)
    assert not truncated


def test_rotated_file_is_not_read_when_the_window_is_inside_the_current_file(tmp_path: Path) -> None:
    path = tmp_path / "kern.log"
    _write(tmp_path / "kern.log.1", _iso, count=100)
    _write(path, _iso, count=3000, start=T0 + timedelta(days=1))
    lo = T0 + timedelta(days=1, hours=1)
    ctx = TimeContext(window_start=lo, window_end=lo + timedelta(hours=1))
    _, _, files = read_window_rotated(str(path), lo, lo + timedelta(hours=1), ctx, cap=1 << 30)
    assert files == [str(path)]


def test_symlink_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "secret"
    target.write_text("2026-03-01T00:00:00+00:00 root-only\n")
    link = tmp_path / "kern.log"
    link.symlink_to(target)
    ctx = TimeContext(window_start=T0, window_end=T0 + timedelta(hours=1))
    with pytest.raises(OSError):
        read_window(str(link), T0, T0 + timedelta(hours=1), ctx, cap=1 << 20)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):  # refused without blocking on the FIFO
        read_window(str(fifo), T0, T0 + timedelta(hours=1), ctx, cap=1 << 20)
