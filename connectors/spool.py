"""Handing a node bundle to the finalizer: an atomic directory spool, or an HTTP POST.

Layout (the contract with the finalizer): ``<spool>/nodes/<job key>/<node>/``, job key
``<cluster>_<job id>_<restart count>``. A bundle is built in ``<spool>/nodes/<job key>/.tmp-<node>-<pid>/``
and renamed to ``<node>/`` in one step, so the finalizer never sees half a bundle. When ``<node>/``
already exists (the same epilog ran again), the old one is first renamed away to
``.tmp-<node>-<pid>.old`` and removed after the new one is in: for that instant ``<node>/`` is
absent, which the finalizer treats like a bundle not yet arrived. A staging directory left behind
(``.tmp-<node>-<pid>``) tells the finalizer that a collector began and never finished.

With an HTTP URL the bundle is built in a local temporary directory, POSTed as a tar.gz with the
headers ``X-Slurm-Attrib-Job-Key`` and ``X-Slurm-Attrib-Node``, and only on failure published to the
directory spool. When the spool cannot be written, the local fallback directory is used (and the
reason is reported, so the wrapper logs it).

The fallback lives in a world-writable place (``/var/tmp``), where a user can create it first and later
swap a directory inside it for a symlink, steering root's writes into a root-only directory. So it is
used only when it is a real directory (not a link) owned by the collector's uid with mode 0700, in a
parent that others cannot rename it out of (not writable by them, or sticky): :func:`private_dir`.
Inside it only root can create or replace anything, so no path below it can be swapped.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Protocol

__all__ = [
    "BundlePoster",
    "Delivery",
    "NodeBundle",
    "UrllibPoster",
    "deliver",
    "job_key",
    "private_dir",
    "safe_name",
]

DIR_MODE = 0o750
FILE_MODE = 0o640
PRIVATE_MODE = 0o700
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def safe_name(text: str) -> str:
    """A path component made of ``[A-Za-z0-9._-]`` only (anything else becomes '_'), never '.' or '..'."""
    name = _UNSAFE.sub("_", text.strip()) or "_"
    return "_" if name in (".", "..") else name


def job_key(cluster: str, job_id: str, restart_count: int) -> str:
    """``<cluster>_<job id>_<restart count>``; the job id is ``<array id>_<task id>`` for array tasks."""
    return f"{safe_name(cluster or 'cluster')}_{safe_name(job_id)}_{int(restart_count)}"


class NodeBundle:
    """A node bundle being built in a staging directory; files are created, never overwritten.

    Files are written relative to a descriptor of the staging directory taken when it was made, each
    component opened without following a link: swapping the staging directory (or a folder in it) for a
    symlink afterwards cannot steer root's writes anywhere else."""

    def __init__(self, staging: Path) -> None:
        self.staging = staging
        self.bytes = 0
        self._fd: Optional[int] = None

    @classmethod
    def create(cls, parent: Path, node: str) -> NodeBundle:
        parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        staging = parent / f".tmp-{safe_name(node)}-{os.getpid()}"
        if staging.exists() or staging.is_symlink():
            shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(mode=DIR_MODE)
        bundle = cls(staging)
        bundle._directory()
        return bundle

    def _directory(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.staging, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW)
        return self._fd

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def write(self, rel: str, data: bytes) -> int:
        parts = rel.split("/")
        if any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"{rel!r}: not a plain relative path")
        folder = os.dup(self._directory())
        try:
            for name in parts[:-1]:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, DIR_MODE, dir_fd=folder)
                inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW, dir_fd=folder)
                os.close(folder)
                folder = inner
            fd = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, FILE_MODE, dir_fd=folder)
        finally:
            os.close(folder)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        self.bytes += len(data)
        return len(data)

    def discard(self) -> None:
        self.close()
        shutil.rmtree(self.staging, ignore_errors=True)

    def tar_gz(self) -> bytes:
        """The bundle as a gzip'd tar whose members are relative to the bundle root."""
        import tarfile

        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            for path in sorted(self.staging.rglob("*")):
                if path.is_file() and not path.is_symlink():
                    tar.add(path, arcname=path.relative_to(self.staging).as_posix(), recursive=False)
        return buffer.getvalue()


def publish(bundle: NodeBundle, parent: Path, node: str) -> Path:
    """Move the staging directory to ``parent/<node>``, replacing an earlier bundle atomically."""
    final = parent / safe_name(node)
    staging = bundle.staging
    if staging.parent != parent:  # built elsewhere (HTTP path): copy next to the target first
        parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        local = parent / staging.name
        shutil.rmtree(local, ignore_errors=True)
        shutil.copytree(staging, local, symlinks=True)
        shutil.rmtree(staging, ignore_errors=True)
        staging = local
        bundle.close()
        bundle.staging = local
    old: Optional[Path] = None
    if final.exists() or final.is_symlink():
        old = parent / f".tmp-{safe_name(node)}-{os.getpid()}.old"  # ".tmp-": the finalizer skips it
        shutil.rmtree(old, ignore_errors=True)
        os.rename(final, old)
    os.rename(staging, final)
    bundle.close()
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return final


class BundlePoster(Protocol):
    """POSTs a tar.gz; raises OSError (or returns a non-2xx status) on failure."""

    def post(self, url: str, body: bytes, headers: dict[str, str], timeout: float) -> int: ...


class UrllibPoster:
    """The real poster: stdlib urllib, no proxy."""

    def post(self, url: str, body: bytes, headers: dict[str, str], timeout: float) -> int:
        import urllib.error
        import urllib.request  # imported here: urllib costs ~40 ms of the collector's start

        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(request, timeout=timeout) as response:
                return int(response.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)


@dataclass(frozen=True)
class Delivery:
    """Where the bundle went: ``http``, ``spool`` or ``fallback``; ``path`` for directory spools."""

    destination: str
    path: str
    notes: tuple[str, ...]


def private_dir(path: Path) -> Path:
    """``path``, created 0700 when missing; OSError (EPERM) unless it is a directory, not a symlink,
    owned by this process's uid, closed to group and others, in a parent others cannot rename it out of."""
    parent = path.parent
    parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    try:
        os.mkdir(path, PRIVATE_MODE)
        os.chmod(path, PRIVATE_MODE, follow_symlinks=False)  # the umask may have taken bits away; never more
    except FileExistsError:
        pass
    st, up, me = os.lstat(path), os.stat(parent), os.geteuid()
    problem = ("is a symbolic link" if stat.S_ISLNK(st.st_mode) else
               "is not a directory" if not stat.S_ISDIR(st.st_mode) else
               f"is owned by uid {st.st_uid}, not {me}" if st.st_uid != me else
               f"has mode {stat.S_IMODE(st.st_mode):04o}, not 0700" if st.st_mode & 0o077 else
               f"is in {parent}, which others can write and rename it out of"
               if up.st_mode & 0o022 and not up.st_mode & stat.S_ISVTX else "")
    if problem:
        raise OSError(errno.EPERM, f"fallback spool {path} {problem}: not used")
    return path


def stage(spool: Path, fallback: Path, key: str, node: str, http: bool) -> tuple[NodeBundle, list[str]]:
    """Create the staging directory: local temp dir for HTTP, else in the spool (else the fallback)."""
    notes: list[str] = []
    if http:
        return NodeBundle(Path(tempfile.mkdtemp(prefix="slurm-attrib-"))), notes
    try:
        return NodeBundle.create(spool / "nodes" / key, node), notes
    except OSError as exc:
        notes.append(f"spool {spool} not writable ({exc.strerror or exc}); using {fallback}")
        return NodeBundle.create(private_dir(fallback) / "nodes" / key, node), notes


def deliver(bundle: NodeBundle, spool: Path, fallback: Path, key: str, node: str, http_url: str = "",
            http_timeout: float = 3.0, poster: Optional[BundlePoster] = None, token: str = "") -> Delivery:
    """POST (when configured; with ``token`` as its bearer token), else or on failure rename into the
    spool, else into the fallback."""
    notes: list[str] = []
    if http_url:
        headers = {"Content-Type": "application/gzip", "X-Slurm-Attrib-Job-Key": key, "X-Slurm-Attrib-Node": node}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        try:
            status = (poster or UrllibPoster()).post(http_url, bundle.tar_gz(), headers, http_timeout)
            if 200 <= status < 300:
                bundle.discard()
                return Delivery("http", http_url, tuple(notes))
            notes.append(f"POST {http_url}: HTTP {status}")
        except (OSError, ValueError) as exc:  # urllib's URLError is an OSError
            notes.append(f"POST {http_url}: {exc}")
    if bundle.staging.parent == fallback / "nodes" / key:
        return Delivery("fallback", str(publish(bundle, private_dir(fallback) / "nodes" / key, node)), tuple(notes))
    try:
        return Delivery("spool", str(publish(bundle, spool / "nodes" / key, node)), tuple(notes))
    except OSError as exc:
        notes.append(f"spool {spool} not writable ({exc.strerror or exc}); using {fallback}")
    return Delivery("fallback", str(publish(bundle, private_dir(fallback) / "nodes" / key, node)), tuple(notes))
