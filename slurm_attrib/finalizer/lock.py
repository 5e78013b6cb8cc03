"""One finalizer per spool: an exclusive ``flock`` on ``<spool>/finalizer.lock``, held for the life of
the process (the kernel drops it when the process dies, however it dies).

Two finalizers on one spool process every job twice: each writes its own verdict over the other's, each
counts drains against the cap on its own. A second instance does not wait: it exits with
:class:`FinalizerRunning` (exit 75) naming the holder, so a mistaken second start is loud, and a unit
restarted while the old process still shuts down is retried by its service manager.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Optional

from ..errors import FinalizerRunning

LOCK_NAME = "finalizer.lock"


class SpoolLock:
    """The held lock; :meth:`release` (or process exit) lets the next finalizer in."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path, self._fd = path, fd

    @classmethod
    def acquire(cls, spool: Path) -> SpoolLock:
        """Take the lock of ``spool`` or raise :class:`FinalizerRunning`. The lock file is opened without
        following a symlink (root must not be steered into locking, or truncating, another file)."""
        path = spool / LOCK_NAME
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise FinalizerRunning(f"another finalizer{f' (pid {holder})' if holder else ''} holds {path}; "
                                   "one finalizer per spool") from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(path, fd)

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def holder(spool: Path) -> tuple[bool, Optional[int]]:
    """Whether a finalizer holds ``spool``'s lock now, and its pid when the lock file names it. Asked with a
    shared lock taken and dropped at once (a finalizer starting in that instant exits 75 and systemd
    starts it again)."""
    try:
        fd = os.open(spool / LOCK_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return False, None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True, _holder(fd)
    except OSError:
        return False, None
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False, None
    finally:
        os.close(fd)


def _holder(fd: int) -> Optional[int]:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isascii() and text.isdigit() else None
