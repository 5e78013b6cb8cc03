"""Reading a time window out of a large, time-ordered log file without scanning it.

Two binary searches over byte offsets find the first line stamped at or after the window start and
the first line stamped after the window end: seek to the middle, resync to the next line start,
parse that line's stamp with :func:`slurm_attrib.timestamps.parse_line_time`, narrow. Only a few
dozen lines are parsed whatever the file size; the bytes in between are copied raw, and when the
window is larger than the cap only its tail is kept (the lines closest to the job's end).

Lines without a stamp (continuations, garbage) are skipped while searching and copied when inside
the window. Yearless RFC 3164 stamps take the year closest to the window (TimeContext), so a file
must not span more than about half a year around the job. The file is assumed to be roughly in
time order (a syslog file is); small disorder only moves the cut by a few lines.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import IO, Optional

from slurm_attrib.safeio import open_regular
from slurm_attrib.timestamps import TimeContext, parse_line_time

__all__ = ["WindowRead", "find_offset", "read_window", "read_window_rotated"]

_BLOCK = 4096  # below this span the search reads lines one by one
_PROBE_LIMIT = 256 * 1024  # bytes scanned after a probe point for a stamped line
_LINE_LIMIT = 64 * 1024  # longer lines are read in pieces while searching


@dataclass(frozen=True)
class WindowRead:
    """The window's bytes (a tail when capped), and where they came from."""

    data: bytes
    start_offset: int
    end_offset: int
    truncated: bool
    first_time: Optional[datetime]  # stamp of the file's first stamped line (rotation check)


def _stamp(line: bytes, ctx: TimeContext) -> Optional[datetime]:
    return parse_line_time(line[:300].decode("utf-8", "replace").rstrip("\n"), ctx).time


def _pieces(fh: IO[bytes], pos: int, limit: int, budget: int) -> Iterator[tuple[int, int, bool, bytes]]:
    """Lines from ``pos`` (a line start) up to ``limit``, read in pieces of at most ``_LINE_LIMIT``
    bytes: (start, end, whether the piece begins a line, piece); stops after ``budget`` bytes."""
    fh.seek(pos)
    at_start = True
    while pos < limit and budget > 0:
        piece = fh.readline(_LINE_LIMIT)
        if not piece:
            return
        end = pos + len(piece)
        yield pos, end, at_start, piece
        at_start = piece.endswith(b"\n")
        budget -= len(piece)
        pos = end


def _next_stamped(fh: IO[bytes], pos: int, limit: int, ctx: TimeContext) -> tuple[int, int, Optional[datetime]]:
    """From ``pos`` (resynced to the next line start unless 0), the first stamped line starting
    before ``limit``: (line start, end of its first piece, stamp); stamp None when there is none."""
    if pos > 0:
        fh.seek(pos - 1)
        pos = pos - 1 + len(fh.readline(_PROBE_LIMIT))  # skip the rest of the line that straddles pos
    for start, end, at_start, piece in _pieces(fh, pos, limit, _PROBE_LIMIT):
        when = _stamp(piece, ctx) if at_start else None
        if when is not None:
            return start, end, when
        pos = end
    return pos, pos, None


def find_offset(fh: IO[bytes], size: int, target: datetime, ctx: TimeContext, strict: bool = False) -> int:
    """Offset of the first line whose stamp is >= ``target`` (> when ``strict``); ``size`` if none.

    Invariant: every stamped line starting before ``lo`` is before the target; the answer is <= ``hi``.
    """
    lo, hi = 0, size

    def after(t: datetime) -> bool:
        return t > target if strict else t >= target

    while hi - lo > _BLOCK:
        mid = (lo + hi) // 2
        start, end, when = _next_stamped(fh, mid, hi, ctx)
        if when is None:
            hi = mid
        elif after(when):
            hi = start
        else:
            lo = end
    for start, _, at_start, piece in _pieces(fh, lo, hi, hi - lo):
        when = _stamp(piece, ctx) if at_start else None
        if when is not None and after(when):
            return start
    return hi


def _first_time(fh: IO[bytes], size: int, ctx: TimeContext) -> Optional[datetime]:
    return _next_stamped(fh, 0, size, ctx)[2]


def _copy_tail(fh: IO[bytes], start: int, end: int, cap: int) -> tuple[bytes, bool]:
    """Bytes [start, end), or their last ``cap`` bytes cut at a line start."""
    truncated = end - start > cap
    if truncated:
        cut = end - cap
        fh.seek(cut - 1)
        fh.readline(cap)  # resync: drop the partial first line
        start = min(end, fh.tell())
    fh.seek(start)
    return fh.read(max(0, end - start)), truncated


def read_window(path: str, start: datetime, end: datetime, ctx: TimeContext, cap: int) -> WindowRead:
    """Lines of ``path`` stamped in [start, end] (plus unstamped lines between them), tail-capped."""
    with open_regular(path) as fh:  # a root hook: no symlink at the last component, regular files only
        size = os.fstat(fh.fileno()).st_size
        first = _first_time(fh, size, ctx)
        lo = find_offset(fh, size, start, ctx)
        hi = find_offset(fh, size, end, ctx, strict=True) if lo < size else size
        hi = max(lo, hi)
        data, truncated = _copy_tail(fh, lo, hi, cap)
    return WindowRead(data, lo, hi, truncated, first)


def read_window_rotated(path: str, start: datetime, end: datetime, ctx: TimeContext,
                        cap: int) -> tuple[bytes, bool, list[str]]:
    """The window from ``path``, preceded by the window's part in ``path.1`` when the current file
    starts after the window start (logrotate moved the beginning away). Returns (bytes, truncated,
    files read)."""
    current = read_window(path, start, end, ctx, cap)
    files = [path]
    rotated = f"{path}.1"
    if current.first_time is None or current.first_time <= start or len(current.data) >= cap:
        return current.data, current.truncated, files
    try:
        older = read_window(rotated, start, end, ctx, cap - len(current.data))
    except OSError:
        return current.data, current.truncated, files
    if older.data and not older.data.endswith(b"\n"):
        older = WindowRead(older.data + b"\n", older.start_offset, older.end_offset, older.truncated,
                           older.first_time)
    return older.data + current.data, older.truncated or current.truncated, [rotated, path]
