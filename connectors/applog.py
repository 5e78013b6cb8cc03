"""The job's own StdOut/StdErr, read safely by root on the controller (a controller-side source).

One :class:`JobOutputSource` per output file (:func:`job_output_sources`: stdout, and stderr when it is
another file); each writes ``applog/<bundle name>`` and reports the path it read as its query.

Choice (documented in the README): the path is opened through :func:`slurm_attrib.safeio.open_regular`:
``lstat`` first, so a FIFO or a device is never opened at all (opening ``/dev/watchdog`` arms the
watchdog), then ``O_NOFOLLOW`` (a symlink a user planted as the output path is never followed) and
``O_NONBLOCK``, then ``fstat`` the open descriptor (the same file as the ``lstat``) and accept it only
when it is a regular file owned by the job's uid (a hard link or a path through a symlinked directory
to someone else's file fails the owner check). Only the last ``app_log_tail_bytes`` are read.

Filename patterns (sbatch "filename pattern"): ``%j`` raw job id, ``%u`` user, ``%x`` job name, ``%N``
short name of the batch host (the first node), ``%A`` array job id (the job id when not an array),
``%a`` array task id (``4294967294`` when not an array, as Slurm writes it), ``%%`` a percent sign,
an optional zero-padding width (``%4j``). For the batch script's output the per-node/per-task patterns
are those of the batch step: ``%n`` → 0, ``%t`` → 0, ``%s`` → ``batch``. Anything else is left as is.
"""

from __future__ import annotations

import errno
import os
import re
import time
from dataclasses import dataclass
from typing import Optional

from slurm_attrib.safeio import open_regular

from .base import BundleWriter, Limits, SourceCoverage, Window, Workload

__all__ = ["AppLogRead", "JobOutputSource", "expand_pattern", "job_output_sources", "read_tail"]

NO_ARRAY_TASK = "4294967294"
_PATTERN = re.compile(r"%(\d*)([jJuxNAatns%])")


def expand_pattern(pattern: str, job: Workload) -> str:
    """Expand sbatch's filename pattern for the batch step's output (see the module docstring)."""
    values = {
        "j": job.job_id, "J": job.job_id, "u": job.user, "x": job.job_name,
        "N": job.nodes[0] if job.nodes else "",
        "A": job.array_job_id or job.job_id, "a": job.array_task_id or NO_ARRAY_TASK,
        "n": "0", "t": "0", "s": "batch",
    }

    def one(m: re.Match[str]) -> str:
        width, code = m.group(1), m.group(2)
        if code == "%":
            return "%"
        value = values[code]
        return value.zfill(int(width)) if width and value.isdigit() else value

    expanded = _PATTERN.sub(one, pattern)
    if expanded and not os.path.isabs(expanded) and job.work_dir:
        expanded = os.path.join(job.work_dir, expanded)
    return expanded


@dataclass(frozen=True)
class AppLogRead:
    """One tail read: the path, its state, the bytes and the file's full size."""

    path: str
    state: str  # ok | empty | error | skipped
    reason: str = ""
    data: bytes = b""
    size: int = 0


def read_tail(path: str, owner_uid: Optional[int], limit: int) -> AppLogRead:
    """The last ``limit`` bytes of ``path`` if it is a regular file owned by ``owner_uid``."""
    if not path or path == "/dev/null":
        return AppLogRead(path, "skipped", "no output file")
    try:
        handle = open_regular(path)  # lstat first: a device or FIFO is never opened (/dev/watchdog arms)
    except OSError as exc:
        why = ("a symbolic link: not followed" if exc.errno == errno.ELOOP
               else "not a regular file" if exc.errno is None else (exc.strerror or str(exc)))
        return AppLogRead(path, "error", why)
    with handle:
        fd = handle.fileno()
        st = os.fstat(fd)
        if owner_uid is None:
            return AppLogRead(path, "error", "the job's uid is unknown: owner cannot be checked")
        if st.st_uid != owner_uid:
            return AppLogRead(path, "error", f"owned by uid {st.st_uid}, not the job's uid {owner_uid}")
        start = max(0, st.st_size - limit)
        os.lseek(fd, start, os.SEEK_SET)
        data = _read_all(fd, limit)
    return AppLogRead(path, "ok" if data else "empty", f"tail of {len(data)} bytes" if start else "", data,
                      st.st_size)


def _read_all(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while total < limit:
        chunk = os.read(fd, min(1 << 20, limit - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


class JobOutputSource:
    """The tail of one of the job's output files, written as ``applog/<name>``; ``name`` is also the
    source's name in the coverage (job.yaml ``collection.app_logs``)."""

    def __init__(self, name: str, path: str) -> None:
        self.name = name
        self.path = path

    def collect(self, workload: Workload, window: Window, bundle: BundleWriter, limits: Limits) -> SourceCoverage:
        began = time.monotonic()
        read = read_tail(self.path, workload.uid, limits.max_bytes)
        written = bundle.write(f"applog/{self.name}", read.data) if read.state == "ok" else 0
        files = (f"applog/{self.name}",) if read.state == "ok" else ()
        return SourceCoverage(self.name, read.state, read.reason, files, written, time.monotonic() - began,
                              query=read.path, size=read.size, truncated=read.size > len(read.data))


def job_output_sources(job: Workload) -> list[JobOutputSource]:
    """stdout (sbatch's default name when none was given), and stderr when it is a different file."""
    default = "slurm-%A_%a.out" if job.array_job_id else "slurm-%j.out"
    stdout = expand_pattern(job.std_out or default, job)
    sources = [JobOutputSource(f"slurm-{job.job_id}.out", stdout)]
    if job.std_err:
        stderr = expand_pattern(job.std_err, job)
        if stderr != stdout:
            sources.append(JobOutputSource(f"slurm-{job.job_id}.err", stderr))
    return sources
