"""Opening files that someone else could have planted: never follow a symlink at the last
component, never open (let alone block on) a FIFO or device, accept regular files only. The hooks and
the finalizer run as root; this is the one place that decides how an untrusted path is opened.

Opening a device can act by itself (opening ``/dev/watchdog`` arms the watchdog), so the path is
``lstat``-ed first and only a regular file is opened; the open descriptor is then checked to be that
same file (a swap between the two calls is refused)."""

from __future__ import annotations

import errno
import os
import stat
from typing import IO, Optional, Union

PathLike = Union[str, "os.PathLike[str]"]
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
COPY_CHUNK = 1 << 20


def open_regular(path: PathLike) -> IO[bytes]:
    """Open ``path`` for binary reading; OSError if it is a symlink, missing or not a regular file."""
    before = os.lstat(path)
    if stat.S_ISLNK(before.st_mode):  # what O_NOFOLLOW says, so callers tell a planted link apart
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), os.fspath(path))
    if not stat.S_ISREG(before.st_mode):
        raise OSError(f"{os.fspath(path)}: not a regular file")
    fd = os.open(path, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (before.st_dev, before.st_ino):
            raise OSError(f"{os.fspath(path)}: not a regular file (replaced while opened)")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: PathLike, limit: Optional[int] = None) -> bytes:
    """The whole file through :func:`open_regular`; with ``limit``, ValueError if it is larger (found
    from its size before reading, so a huge file is never read)."""
    with open_regular(path) as handle:
        if limit is not None and os.fstat(handle.fileno()).st_size > limit:
            raise ValueError(f"larger than {limit} bytes")
        data = handle.read() if limit is None else handle.read(limit + 1)
    if limit is not None and len(data) > limit:
        raise ValueError(f"larger than {limit} bytes")
    return data


def copy_regular(source: PathLike, dest: PathLike, limit: int, mode: int = 0o640) -> int:
    """Copy the regular file ``source`` to the new file ``dest`` (never an existing one, never through
    a symlink), streaming; ValueError, and nothing written, if ``source`` is larger than ``limit``.
    Returns the bytes copied."""
    with open_regular(source) as src:
        size = os.fstat(src.fileno()).st_size
        if size > limit:
            raise ValueError(f"{os.fspath(source)}: {size} bytes, more than {limit}")
        fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, mode)
        copied = 0
        with os.fdopen(fd, "wb") as out:
            while copied < limit:
                chunk = src.read(min(COPY_CHUNK, limit - copied))
                if not chunk:
                    break
                out.write(chunk)
                copied += len(chunk)
    return copied
