"""The kernel log window of a job on one node, from the sources a user cannot write first: journald's
kernel transport, else the ring buffer (``dmesg``), and only then a syslog file, the kern-facility one
first.

- journald: ``journalctl -k -q -o short-iso-precise --since @S --until @E --no-pager`` prints the
  window itself (``-k`` is the match ``_TRANSPORT=kernel``: nothing a program logs); its ISO stamps
  carry the zone, so the engine reads them without assumptions.
- syslog files: ``/var/log/kern.log`` holds the kern facility only, but a program that writes its own
  priority to ``/dev/log`` (``<3>kernel: NVRM: Xid ...``) keeps that facility (rsyslog takes it as sent);
  ``/var/log/messages`` and ``/var/log/syslog`` hold every program's lines too, and ``logger -t kernel
  "NVRM: Xid ..."`` writes one there that looks exactly like the kernel's. The window is found by time-seeking
  (:mod:`.timeseek`), not by a scan; the rotated ``.1`` file is read too when the window starts before the current file.
- ``dmesg --decode --time-format iso`` (without ``--decode``, then plain ``dmesg``, when an option is
  refused): the ring buffer is small; lines are kept when their stamp falls in the window (uptimes resolved
  with the boot time). ``--decode`` names each record's facility, which tells a program's write to
  ``/dev/kmsg`` from the kernel's own.

The coverage records the origin (:data:`slurm_attrib.bundle.KERNEL_ORIGINS`): the engine marks the lines
of a syslog file's window (``kern-file``, ``mixed-file``) ``unverified``, and unverified evidence never drains
a node nor, alone, names one. Lines are written
exactly as the source printed them. When the window is larger than the cap, the tail is kept (the lines
nearest the job's end).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Optional

from slurm_attrib.timestamps import TimeContext, parse_line_time

from .base import BundleWriter, Limits, SourceCoverage, Window, Workload
from .runner import CommandResult, CommandRunner, TailBuffer
from .spool import safe_name
from .timeseek import read_window_rotated

__all__ = ["DEFAULT_FILES", "KernelLogResult", "KernelLogSource"]

DEFAULT_FILES = ("/var/log/kern.log", "/var/log/messages", "/var/log/syslog")
KERNEL_ONLY_NAMES = ("kern.log", "kernel.log")  # rsyslog's kern.* files; any other file is taken as mixed
# added to the reason when the window was larger than the cap: the engine reads the window as cut only then
# (slurm_attrib.bundle.KERNEL_LOG_CUT, the same words: the collector does not import the engine's modules)
KERNEL_LOG_CUT = "window larger than the cap, tail kept"


def file_origin(path: str) -> str:
    """``kern-file`` for a kern-facility file, ``mixed-file`` for any other syslog file."""
    name = path.rsplit("/", 1)[-1]
    return "kern-file" if name in KERNEL_ONLY_NAMES else "mixed-file"


@dataclass(frozen=True)
class KernelLogResult:
    """The window's bytes and how they were obtained (``state`` as in collection.yaml)."""

    state: str
    data: bytes
    reason: str
    seconds: float
    truncated: bool = False
    origin: str = ""  # journald | kern-file | dmesg | mixed-file ("" when nothing was read)


class KernelLogSource:
    """Gathers the window [start, end] of the kernel log of this node.

    After journald, the ring buffer, then the kern-facility ``files`` in order, then the mixed ones. ``path`` (a
    single file the configuration names as this node's kernel log, e.g. the emulation knob
    ``SLURM_ATTRIB_KERNEL_LOG`` with ``{node}`` already filled in) replaces them all and is trusted as the
    configuration says (origin ``configured``): name only a file the kernel alone writes (a console or
    netconsole capture), never a syslog file, which any local program can write into.
    """

    name = "kernel_log"

    def __init__(self, runner: CommandRunner, files: Sequence[str] = DEFAULT_FILES, path: str = "",
                 use_journald: bool = True, boot_time: Optional[datetime] = None) -> None:
        self.runner = runner
        self.files = tuple(files)
        self.path = path
        self.use_journald = use_journald
        self.boot_time = boot_time

    def collect(self, workload: Workload, window: Window, bundle: BundleWriter, limits: Limits) -> SourceCoverage:
        """The window [since, until] as syslog/NODE.log; an empty window is an empty file (the node's log
        was read and had nothing), a failed read writes none."""
        klog = self.gather(window.since, window.until, limits.seconds, limits.max_bytes)
        rel = f"syslog/{safe_name(workload.node)}.log"
        if klog.state not in ("ok", "empty"):
            return SourceCoverage(self.name, klog.state, klog.reason, seconds=klog.seconds, truncated=klog.truncated)
        return SourceCoverage(self.name, klog.state, klog.reason, (rel,), bundle.write(rel, klog.data), klog.seconds,
                              truncated=klog.truncated, origin=klog.origin)

    def gather(self, start: datetime, end: datetime, timeout: float, cap: int) -> KernelLogResult:
        began = time.monotonic()
        notes: list[str] = []
        if self.path:
            return self._from_files([self.path], start, end, cap, began, notes, origin="configured")
        journal_empty = False
        if self.use_journald:
            result = self._journald(start, end, timeout, cap)
            data = _from_line_start(result.stdout) if result.truncated else result.stdout
            if result.state == "timeout" or (result.state == "ok" and data):
                return _result(result.state, data, _note(notes, result.reason or "journalctl"), began,
                               result.truncated, "journald")
            journal_empty = result.state == "ok"
            notes.append("journalctl: no kernel lines in the window" if journal_empty else result.reason)
        left = timeout - (time.monotonic() - began)
        ring = self._dmesg(start, end, left, cap, began, notes)
        if ring.state == "ok" or ring.state == "timeout":
            return ring
        notes.append("dmesg: no kernel lines in the window" if ring.state == "empty"
                     else ring.reason.rsplit("; ", 1)[-1])
        # the syslog files last: a kern-facility file before a mixed one, both unverified (a program's raw write to
        # /dev/log keeps the kern facility it names)
        kern_facility = [p for p in self.files if file_origin(p) == "kern-file"]
        mixed = [p for p in self.files if file_origin(p) == "mixed-file"]
        found = self._from_files([*kern_facility, *mixed], start, end, cap, began, notes)
        if found.state != "skipped":
            return found
        if journal_empty or ring.state == "empty":
            return _result("empty", b"", found.reason, began)
        return _result(ring.state, b"", found.reason, began)

    def _journald(self, start: datetime, end: datetime, timeout: float, cap: int) -> CommandResult:
        argv = ["journalctl", "-k", "-q", "-o", "short-iso-precise", "--no-pager",
                f"--since=@{int(start.timestamp())}", f"--until=@{int(end.timestamp()) + 1}"]
        return self.runner.run(argv, timeout, cap, keep="tail")

    def _from_files(self, paths: list[str], start: datetime, end: datetime, cap: int, began: float,
                    notes: list[str], origin: str = "") -> KernelLogResult:
        ctx = TimeContext(window_start=start, window_end=end, boot_time=self.boot_time)
        for path in paths:
            try:
                data, truncated, read = read_window_rotated(path, start, end, ctx, cap)
            except FileNotFoundError:
                notes.append(f"{path}: not found")
                continue
            except OSError as exc:
                reason = "symbolic link; not followed" if getattr(exc, "errno", 0) == 40 else str(exc)
                return _result("error", b"", _note(notes, f"{path}: {reason}"), began)
            return _result("ok" if data else "empty", data, _note(notes, "read " + " + ".join(read)),
                           began, truncated, origin or file_origin(path))
        return _result("skipped", b"", "; ".join(notes), began)

    def _dmesg(self, start: datetime, end: datetime, timeout: float, cap: int, began: float,
               notes: list[str]) -> KernelLogResult:
        # --decode puts each record's facility first ('kern  :err   : ...'): a program's write to /dev/kmsg never
        # has the kernel's (printk.c gives it LOG_USER unless it names another), so the engine can refuse it
        result = self.runner.run(["dmesg", "--decode", "--time-format", "iso"], timeout, 4 * cap, keep="tail")
        for argv in (["dmesg", "--time-format", "iso"], ["dmesg"]):
            if result.state != "error":
                break
            result = self.runner.run(argv, timeout - result.seconds, 4 * cap, keep="tail")
        if result.state != "ok":
            return _result(result.state, b"", _note(notes, result.reason), began)
        ctx = TimeContext(window_start=start, window_end=end, boot_time=self.boot_time)
        kept = _in_window(result.stdout, start, end, ctx, cap)
        return _result("ok" if kept.size else "empty", kept.getvalue(), _note(notes, "dmesg"), began,
                       kept.truncated or result.truncated, "dmesg")


def _in_window(data: bytes, start: datetime, end: datetime, ctx: TimeContext, cap: int) -> TailBuffer:
    """Lines stamped inside [start, end], and unstamped lines that follow a kept one."""
    kept = TailBuffer(cap, keep="tail")
    keep = False
    for line in data.splitlines(keepends=True):
        when = parse_line_time(line[:300].decode("utf-8", "replace").rstrip("\n"), ctx).time
        if when is not None:
            keep = start <= when <= end
        if keep:
            kept.add(line)
    if kept.truncated:
        trimmed = TailBuffer(cap, keep="tail")
        trimmed.add(_from_line_start(kept.getvalue()))
        trimmed.truncated = True
        return trimmed
    return kept


def _from_line_start(data: bytes) -> bytes:
    """Drop the partial first line of a tail-capped output."""
    cut = data.find(b"\n") + 1
    return data[cut:] if cut else b""


def _note(notes: list[str], last: str) -> str:
    return "; ".join([*notes, last.strip()])


def _result(state: str, data: bytes, reason: str, began: float, truncated: bool = False,
            origin: str = "") -> KernelLogResult:
    if truncated:
        reason += "; " + KERNEL_LOG_CUT
    return KernelLogResult(state, data, reason, time.monotonic() - began, truncated, origin)
