"""Opening files that someone else could have planted: never follow a symlink at the last
component, never block on a FIFO or device, accept regular files only. The hooks run as root; this
is the one place that decides how an untrusted path is opened."""

from __future__ import annotations

import os
import stat
from typing import IO, Optional, Union

PathLike = Union[str, "os.PathLike[str]"]


def open_regular(path: PathLike) -> IO[bytes]:
    """Open ``path`` for binary reading; OSError if it is a symlink, missing or not a regular file."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{os.fspath(path)}: not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: PathLike, limit: Optional[int] = None) -> bytes:
    """The whole file through :func:`open_regular`; with ``limit``, ValueError if it is larger."""
    with open_regular(path) as handle:
        data = handle.read() if limit is None else handle.read(limit + 1)
    if limit is not None and len(data) > limit:
        raise ValueError(f"larger than {limit} bytes")
    return data
