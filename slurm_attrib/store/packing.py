"""The evidence bundle of a diagnosis as a gzip-compressed tar, size-capped, so any verdict can be re-run.

Packing never follows a symlink and takes regular files only (a bundle may hold planted links).
When the compressed tar exceeds the cap, the largest evidence files are left out (job.yaml and
facts/ always stay) and the result says which, so a replay knows it ran on less evidence.
"""

from __future__ import annotations

import gzip
import io
import os
import stat
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

import yaml

from .. import safeyaml
from ..safeio import open_regular, read_regular

ALWAYS_KEPT = ("job.yaml", "facts/")
FORMAT = "tar.gz"
MAX_MEMBER_BYTES = 256 * 1024 * 1024
COMPRESS_LEVEL = 6
CHUNK = 1 << 20
TAR_OVERHEAD = 160  # a member's 512-byte header and its padding, once compressed (measured: 60 to 140)
DEFLATE_MAX_RATIO = 1032  # deflate never shrinks more than this: a file larger than cap x 1032 is never read
TAR_END = 64  # the end-of-archive blocks (zeros) and the gzip header and trailer, once compressed


@dataclass(frozen=True)
class PackedBundle:
    data: bytes
    original_bytes: int
    files: int
    omitted: tuple[str, ...]
    names: tuple[str, ...] = ()  # the members, sorted; () when not known (a spooled verdict's bundle)

    @property
    def capped(self) -> bool:
        return bool(self.omitted)


def bundle_files(root: Path) -> list[tuple[str, Path, int]]:
    """(relative name, path, size) of every regular file under ``root``; symlinks are neither followed
    nor packed."""
    found = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(folder, d)))
        for name in sorted(files):
            path = Path(folder) / name
            info = os.lstat(path)
            if stat.S_ISREG(info.st_mode):
                found.append((path.relative_to(root).as_posix(), path, info.st_size))
    return found


def _tar(entries: list[tuple[str, Path, int]]) -> bytes:
    """The tar.gz of ``entries`` (name, path, size), each file streamed from disk in turn."""
    buffer = io.BytesIO()
    # the gzip header's mtime too (tarfile's "w:gz" writes the clock there): two packings of one bundle
    # a second apart gave different bytes
    with gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=COMPRESS_LEVEL, mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode="w") as tar:
        for name, path, size in entries:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = size, 0o640, 0  # mtime 0: same bundle, same bytes
            with open_regular(path) as handle:
                tar.addfile(info, handle)
    return buffer.getvalue()


def _compressed_size(path: Path) -> int:
    """About what ``path`` adds to the gzip stream (deflate with the tar's level, plus its compressed tar
    header and padding), read in chunks: one pass, constant memory."""
    deflate = zlib.compressobj(COMPRESS_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
    total = 0
    with open_regular(path) as handle:
        while chunk := handle.read(CHUNK):
            total += len(deflate.compress(chunk))
    return total + len(deflate.flush()) + TAR_OVERHEAD


def pack_bundle(root: Union[str, os.PathLike[str]], cap_bytes: int) -> PackedBundle:
    """Pack the bundle directory; leave out the largest evidence files until it fits ``cap_bytes``.

    Linear: each file's compressed size is measured once, streaming, the files to leave out are chosen
    from those sizes, and the archive is written once (again only if the estimate was short). Before,
    every file left out re-packed all the others: 60 files of 1 MB took 74 s."""
    files = bundle_files(Path(root))
    sizes = {rel: size for rel, _, size in files}
    kept = sorted(rel for rel, _, _ in files)
    omitted: list[str] = []
    droppable = sorted((r for r in kept if not r.startswith(ALWAYS_KEPT)), key=lambda r: (-sizes[r], r))
    estimate = {rel: size // DEFLATE_MAX_RATIO if size // DEFLATE_MAX_RATIO > cap_bytes else _compressed_size(path)
                for rel, path, size in files} if droppable else {}
    budget = sum(estimate.values()) + TAR_END
    while budget > cap_bytes and droppable:
        victim = droppable.pop(0)
        omitted.append(victim)
        budget -= estimate[victim]
    paths = {rel: (path, size) for rel, path, size in files}
    data = _tar([(rel, *paths[rel]) for rel in kept if rel not in omitted])
    while len(data) > cap_bytes and droppable:  # the estimate fell short: rare, and one file at a time
        omitted.append(droppable.pop(0))
        data = _tar([(rel, *paths[rel]) for rel in kept if rel not in omitted])
    return PackedBundle(data=data, original_bytes=sum(sizes.values()), files=len(kept) - len(omitted),
                        omitted=tuple(sorted(omitted)), names=tuple(r for r in kept if r not in omitted))


def member_names(data: bytes) -> list[str]:
    """The file names inside a stored bundle (our own packing: a tar.gz), sorted. Reading them means
    decompressing the whole archive (a quarter of a second for 16 MB): the store keeps them at record time."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            return sorted(m.name for m in tar.getmembers() if m.isreg())
    except (tarfile.TarError, OSError, EOFError):
        return []


def _safe_name(name: str) -> Optional[str]:
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts or name.startswith("/") or ".." in parts:
        return None
    return "/".join(parts)


def unpack_bundle(data: bytes, dest: Union[str, os.PathLike[str]]) -> int:
    """Write the regular files of a packed bundle under ``dest``; links, devices and names that would
    escape ``dest`` are skipped. Returns the number of files written."""
    written = 0
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar:
            name = _safe_name(member.name)
            if name is None or not member.isfile() or member.size > MAX_MEMBER_BYTES:
                continue
            source = tar.extractfile(member)
            if source is None:
                continue
            target = Path(dest) / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read())
            written += 1
    return written


def count_files(data: bytes) -> int:
    """How many regular files a packed bundle holds."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return sum(1 for m in tar if m.isfile())


def read_member(data: bytes, name: str) -> Optional[bytes]:
    """One file of a packed bundle, or None."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar:
            if member.isfile() and _safe_name(member.name) == name:
                source = tar.extractfile(member)
                return source.read() if source is not None else None
    return None


def gpus_per_node(job_yaml: Optional[bytes]) -> Optional[int]:
    """``gpus_per_node`` of a job.yaml, when it states one; never guessed."""
    if not job_yaml:
        return None
    try:
        raw = safeyaml.load(job_yaml.decode("utf-8", errors="replace"))
    except yaml.YAMLError:
        return None
    value = raw.get("gpus_per_node") if isinstance(raw, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def gpus_per_node_of(data: bytes) -> Optional[int]:
    """``gpus_per_node`` from the job.yaml inside a packed bundle."""
    return gpus_per_node(read_member(data, "job.yaml"))


def gpus_per_node_in_dir(root: Union[str, os.PathLike[str]]) -> Optional[int]:
    """``gpus_per_node`` from a bundle directory's job.yaml (not a symlink)."""
    path = Path(root) / "job.yaml"
    try:
        return gpus_per_node(read_regular(path)) if path.is_file() and not path.is_symlink() else None
    except OSError:
        return None
