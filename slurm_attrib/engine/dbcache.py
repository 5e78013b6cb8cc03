"""Compiled Hyperscan databases kept on disk between runs.

Compiling the rules' patterns costs about 3 s (the line-start patterns' prefixes most), paid by every
``diagnose`` and every finalizer run, while the serialized database loads in a millisecond. A database
is stored under the hash of everything that shaped it (Hyperscan's version, mode, flags and patterns),
so a changed rule or library simply misses. The cache only ever saves time: a missing, unreadable or corrupt entry, or a
directory that cannot be written, means compiling as if it were absent.

The directory is $SLURM_ATTRIB_CACHE_DIR, else $XDG_CACHE_HOME/slurm-attrib, else
~/.cache/slurm-attrib; ``SLURM_ATTRIB_CACHE_DIR=off`` turns the cache off.

A database decides which lines the rules ever see, and Hyperscan does not defend itself against a
crafted one, so the cache is trusted only when nobody else could have written it: the directory (not
a symlink) and the entry (a regular file, opened without following links) belong to this process's
user and are writable by nobody else. Anything else is passed over, never read and never written.
"""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional

from ..safeio import open_regular

CACHE_ENV = "SLURM_ATTRIB_CACHE_DIR"
log = logging.getLogger("slurm_attrib.prefilter")


def cache_dir() -> Optional[Path]:
    """Where compiled databases live; None when the cache is off or no home is known."""
    configured = os.environ.get(CACHE_ENV, "")
    if configured == "off":
        return None
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or (str(Path.home() / ".cache") if "HOME" in os.environ else "")
    return Path(base) / "slurm-attrib" if base else None


def cached_database(hs: Any, shape: tuple[Any, ...], compile_db: Callable[[], Any]) -> Any:
    """The database ``compile_db`` makes, loaded from the cache when ``shape`` was compiled before."""
    folder = cache_dir()
    if folder is None:
        return compile_db()
    key = hashlib.sha256(repr((getattr(hs, "__version__", ""), hs.HS_MODE_BLOCK, shape)).encode()).hexdigest()
    path = folder / f"{key[:32]}.hsdb"
    db = _load(hs, path)
    if db is None:
        db = compile_db()
        _store(hs, path, db)
    return db


def _owned(info: os.stat_result) -> bool:
    """Ours alone: owned by this process's user and writable by no group or other."""
    return info.st_uid == os.geteuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _trusted_dir(folder: Path) -> bool:
    try:
        info = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and _owned(info)


def _load(hs: Any, path: Path) -> Any:
    if not _trusted_dir(path.parent):
        return None
    try:
        with open_regular(path) as handle:  # no link followed, regular files only
            if not _owned(os.fstat(handle.fileno())):
                log.debug("prefilter cache entry %s is not this user's alone; compiling", path)
                return None
            return hs.loadb(handle.read(), hs.HS_MODE_BLOCK)
    except FileNotFoundError:
        return None
    except (OSError, hs.error) as exc:
        log.debug("prefilter cache entry %s unusable (%s); compiling", path, exc)
        return None


def _store(hs: Any, path: Path, db: Any) -> None:
    """Write beside the entry and rename over it: a concurrent reader sees all of it or nothing."""
    tmp = ""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not _trusted_dir(path.parent):
            log.debug("prefilter cache %s is not this user's alone; not written", path.parent)
            return
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".tmp-", delete=False) as handle:
            tmp = handle.name
            handle.write(hs.dumpb(db))
        os.replace(tmp, path)
    except (OSError, hs.error) as exc:
        log.debug("prefilter cache %s not written (%s)", path.parent, exc)
        if tmp:
            Path(tmp).unlink(missing_ok=True)
