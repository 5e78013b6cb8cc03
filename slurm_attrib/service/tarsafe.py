"""Unpacking a bundle someone sent us: a gzip'd tar streamed into a fresh directory, refusing anything
that could write outside it (absolute names, ``..``, links, devices, FIFOs) and stopping at caps on the
number of members, the unpacked size and the unpacked-to-compressed ratio, so a gzip bomb ends with a
one-line reason instead of a full disk. The caps are counted on the decompressed stream itself (tar
headers and padding included), never on what a header claims."""

from __future__ import annotations

import gzip
import os
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Optional

from ..errors import AttribError

CHUNK = 1 << 16
DIR_MODE = 0o750
FILE_MODE = 0o640


class ArchiveRefused(AttribError):
    """The archive is not a bundle we unpack; ``status`` is the HTTP status that says why (400 or 413)."""

    exit_code = 2

    def __init__(self, reason: str, status: int = 400) -> None:
        super().__init__(reason)
        self.status = status


@dataclass(frozen=True)
class Limits:
    """How much one archive may unpack to."""

    max_entries: int = 10000
    max_unpacked_bytes: int = 512 << 20
    max_ratio: float = 200.0


class _Meter:
    """The decompressed stream, counted: past the cap it raises instead of reading on."""

    def __init__(self, raw: IO[bytes], compressed_bytes: int, limits: Limits) -> None:
        self._gzip = gzip.GzipFile(fileobj=raw, mode="rb")
        self.cap = min(limits.max_unpacked_bytes, int(max(compressed_bytes, 1) * limits.max_ratio))
        self.why = (f"{limits.max_ratio:g} times its compressed size" if self.cap < limits.max_unpacked_bytes
                    else f"{limits.max_unpacked_bytes} bytes")
        self.read_bytes = 0

    def read(self, size: int = -1) -> bytes:
        want = CHUNK if size is None or size < 0 else size
        try:
            data = self._gzip.read(min(want, self.cap - self.read_bytes + 1))
        except (OSError, EOFError, zlib.error) as exc:
            raise ArchiveRefused(f"not a gzip'd tar: {exc}") from None
        self.read_bytes += len(data)
        if self.read_bytes > self.cap:
            raise ArchiveRefused(f"archive refused: unpacks to more than {self.why}", 413)
        return data


def member_path(name: str) -> PurePosixPath:
    """The member's name as a relative path inside the bundle; ArchiveRefused for an absolute name, a
    ``..`` component or an empty one."""
    path = PurePosixPath(name)
    if path.is_absolute() or name.startswith(("/", "\\")) or "\\" in name:
        raise ArchiveRefused(f"archive refused: absolute or backslashed member name {name!r}")
    parts = [p for p in path.parts if p not in ("", ".")]
    if ".." in parts:
        raise ArchiveRefused(f"archive refused: member name with '..': {name!r}")
    if not parts:
        raise ArchiveRefused(f"archive refused: empty member name {name!r}")
    return PurePosixPath(*parts)


def extract(stream: IO[bytes], compressed_bytes: int, dest: Path, limits: Optional[Limits] = None) -> int:
    """Unpack the gzip'd tar of ``stream`` (``compressed_bytes`` long) into the empty directory ``dest``;
    the number of regular files written. Directories and regular files only; files are created, never
    overwritten, and never through a link."""
    limits = limits or Limits()
    meter = _Meter(stream, compressed_bytes, limits)
    files = entries = 0
    try:
        with tarfile.open(fileobj=meter, mode="r|") as tar:  # type: ignore[call-overload]
            for member in tar:
                entries += 1
                if entries > limits.max_entries:
                    raise ArchiveRefused(f"archive refused: more than {limits.max_entries} members", 413)
                files += _unpack_member(tar, member, dest)
    except tarfile.TarError as exc:
        raise ArchiveRefused(f"not a gzip'd tar: {exc}") from None
    return files


def _unpack_member(tar: tarfile.TarFile, member: tarfile.TarInfo, dest: Path) -> int:
    rel = member_path(member.name)
    if member.isdir():
        _mkdirs(dest, rel.parts)
        return 0
    if not member.isreg():
        kind = "link" if member.issym() or member.islnk() else "device, FIFO or other special file"
        raise ArchiveRefused(f"archive refused: {member.name!r} is a {kind}")
    parent = _mkdirs(dest, rel.parts[:-1])
    source = tar.extractfile(member)
    if source is None:  # pragma: no cover - a regular member always has data
        raise ArchiveRefused(f"archive refused: no data for {member.name!r}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(parent / rel.parts[-1], flags, FILE_MODE)
    except FileExistsError:
        raise ArchiveRefused(f"archive refused: {member.name!r} appears twice") from None
    with os.fdopen(fd, "wb") as out:
        while chunk := source.read(CHUNK):
            out.write(chunk)
    return 1


def _mkdirs(dest: Path, parts: tuple[str, ...]) -> Path:
    """``dest/parts...``, made one level at a time, each a real directory (never a link one of the
    archive's own members could have made; links are refused anyway)."""
    here = dest
    for part in parts:
        here = here / part
        try:
            os.mkdir(here, DIR_MODE)
        except FileExistsError:
            if here.is_symlink() or not here.is_dir():
                raise ArchiveRefused(f"archive refused: {part!r} is both a file and a directory") from None
    return here
