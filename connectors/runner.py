"""Running an outside tool once, bounded in time and in bytes.

A gatherer never waits on a tool past its budget: the tool runs in its own session (process
group) without a shell, its output is read in chunks up to a byte cap, and on timeout the whole
group is killed and the run recorded as ``timeout``. A missing tool is ``skipped``, a non-zero exit
``error``. Tests inject :class:`FakeRunner` through the gatherer's constructor (Meta GCM style).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Optional, Protocol

__all__ = ["CommandResult", "CommandRunner", "FakeRunner", "SubprocessRunner", "TailBuffer", "stop_running"]

SAFE_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
_CHUNK = 64 * 1024
_RUNNING: set[subprocess.Popen[bytes]] = set()  # tools started and not yet reaped, for stop_running
_RUNNING_LOCK = threading.Lock()


@dataclass(frozen=True)
class CommandResult:
    """What one run of a tool produced: ``state`` is ok, error, timeout or skipped."""

    state: str
    stdout: bytes = b""
    returncode: Optional[int] = None
    reason: str = ""
    seconds: float = 0.0
    truncated: bool = False


class CommandRunner(Protocol):
    """Runs ``argv`` (no shell) for at most ``timeout`` seconds and keeps at most ``max_bytes``."""

    def which(self, name: str) -> Optional[str]: ...

    def run(self, argv: Sequence[str], timeout: float, max_bytes: int, keep: str = "head") -> CommandResult: ...


class TailBuffer:
    """Keeps the first (``keep='head'``) or last (``keep='tail'``) ``limit`` bytes of a stream."""

    def __init__(self, limit: int, keep: str = "head") -> None:
        self.limit = max(0, limit)
        self.keep = keep
        self.size = 0
        self.truncated = False
        self._chunks: deque[bytes] = deque()

    def add(self, data: bytes) -> None:
        if self.keep == "head":
            room = self.limit - self.size
            if len(data) > room:
                self.truncated = True
                data = data[:max(0, room)]
            if data:
                self._chunks.append(data)
                self.size += len(data)
            return
        self._chunks.append(data)
        self.size += len(data)
        while self.size > self.limit and self._chunks:
            self.truncated = True
            excess = self.size - self.limit
            first = self._chunks[0]
            if len(first) <= excess:
                self._chunks.popleft()
                self.size -= len(first)
            else:
                self._chunks[0] = first[excess:]
                self.size -= excess

    def getvalue(self) -> bytes:
        return b"".join(self._chunks)


class SubprocessRunner:
    """The real runner: ``subprocess.Popen`` in a new session, killed as a group on timeout."""

    def __init__(self, env: Optional[Mapping[str, str]] = None, path: str = SAFE_PATH) -> None:
        self.path = path
        self.env = dict(env) if env is not None else {"PATH": path, "LC_ALL": "C", "TZ": os.environ.get("TZ", "")}
        if not self.env.get("TZ"):
            self.env.pop("TZ", None)

    def which(self, name: str) -> Optional[str]:
        if "/" in name:
            return name if os.access(name, os.X_OK) else None
        return shutil.which(name, path=self.path)

    def run(self, argv: Sequence[str], timeout: float, max_bytes: int, keep: str = "head") -> CommandResult:
        started = time.monotonic()
        exe = self.which(argv[0]) if argv else None
        if exe is None:
            return CommandResult("skipped", reason=f"{argv[0] if argv else '?'}: not found")
        if timeout <= 0:
            return CommandResult("skipped", reason="no time left in the budget")
        try:
            proc = subprocess.Popen([exe, *argv[1:]], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, env=self.env, start_new_session=True,
                                    close_fds=True)
        except OSError as exc:
            return CommandResult("error", reason=f"{argv[0]}: cannot start: {exc.strerror or exc}")
        buffer = TailBuffer(max_bytes, keep)
        with _RUNNING_LOCK:
            _RUNNING.add(proc)
        try:
            timed_out = _pump(proc, buffer, started + timeout)
        except BaseException:  # e.g. the collector's own SIGTERM: never leave the tool running
            _kill_group(proc)
            raise
        finally:
            with _RUNNING_LOCK:
                _RUNNING.discard(proc)
        if timed_out:
            _kill_group(proc)
        rc = proc.wait() if not timed_out else proc.returncode
        seconds = time.monotonic() - started
        data = buffer.getvalue()
        if timed_out:
            return CommandResult("timeout", data, rc, f"{argv[0]}: no answer within {timeout:.1f} s; killed",
                                 seconds, buffer.truncated)
        if rc != 0:
            return CommandResult("error", data, rc, f"{argv[0]}: exit status {rc}", seconds, buffer.truncated)
        return CommandResult("ok", data, rc, "", seconds, buffer.truncated)


def stop_running() -> int:
    """Kill every tool still running under a :class:`SubprocessRunner`; how many. A source runs in a
    watchdog thread (:func:`.base.collect_bounded`), so the collector's SIGTERM lands in another thread
    than the one waiting on the tool: the collector calls this before it hands in a partial bundle."""
    with _RUNNING_LOCK:
        running = sorted(_RUNNING, key=lambda p: p.pid)
    for proc in running:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    return len(running)


def _pump(proc: subprocess.Popen[bytes], buffer: TailBuffer, deadline: float) -> bool:
    """Read stdout until EOF or the deadline; True when the deadline passed first."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            if not sel.select(left):
                continue
            data = os.read(fd, _CHUNK)
            if not data:
                break
            buffer.add(data)
    proc.stdout.close()
    try:
        proc.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return True
    return False


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the tool's whole session; reap it only briefly (a D-state child is left behind)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(0.5)
    if proc.stdout is not None:
        proc.stdout.close()


@dataclass
class FakeRunner:
    """A runner for tests: ``outputs`` maps a tool name to its result; others are not installed.

    A value may be bytes (printed, exit 0), a :class:`CommandResult`, or the string ``"hang"``
    (behaves as a tool that never answers: recorded as a timeout after the given timeout, without
    actually sleeping unless ``sleep_on_hang`` is set).
    """

    outputs: Mapping[str, object]
    sleep_on_hang: bool = False

    def __post_init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def which(self, name: str) -> Optional[str]:
        return f"/usr/bin/{name}" if name in self.outputs else None

    def run(self, argv: Sequence[str], timeout: float, max_bytes: int, keep: str = "head") -> CommandResult:
        self.calls.append(tuple(argv))
        value = self.outputs.get(argv[0])
        if value is None:
            return CommandResult("skipped", reason=f"{argv[0]}: not found")
        if timeout <= 0:
            return CommandResult("skipped", reason="no time left in the budget")
        if isinstance(value, CommandResult):
            return value
        if value == "hang":
            if self.sleep_on_hang:
                time.sleep(timeout)
            return CommandResult("timeout", reason=f"{argv[0]}: no answer within {timeout:.1f} s; killed",
                                 seconds=timeout)
        data = value(argv) if callable(value) else value
        assert isinstance(data, bytes)
        buffer = TailBuffer(max_bytes, keep)
        buffer.add(data)
        return CommandResult("ok", buffer.getvalue(), 0, "", 0.0, buffer.truncated)
