"""What a start would otherwise make again, kept on disk between runs: the compiled Hyperscan
database (:mod:`.engine.dbcache`, ~3 s to compile, a millisecond to load) and the parsed bundled rule
files (:func:`.ruleset.load_ruleset`, ~50 ms of YAML per start, 3 ms of JSON). An entry is stored
under the hash of everything that shaped it, so a changed input or library simply misses. The cache
only ever saves time: a missing, unreadable or corrupt entry, or a directory that cannot be written,
means making the value as if the cache were absent.

The directory is $SLURM_ATTRIB_CACHE_DIR, else $XDG_CACHE_HOME/slurm-attrib, else
~/.cache/slurm-attrib; ``SLURM_ATTRIB_CACHE_DIR=off`` turns the cache off.

A parsed document (rules, the XID catalog) is kept as JSON (:func:`cached_document`), never as pickle: what a
cache file can make is data of the types a safe YAML loader gives, and only if it reads back equal.

An entry decides which lines the rules ever see (a database) or what the rules say (parsed rules), and
Hyperscan does not defend itself against a crafted database, so the cache is trusted only when nobody
else could have written it: the directory (not a symlink) and the entry (a regular file, opened
without following links) belong to this process's user and are writable by nobody else. Anything
else is passed over, never read and never written.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional, TypeVar

from .safeio import open_regular

CACHE_ENV = "SLURM_ATTRIB_CACHE_DIR"
log = logging.getLogger("slurm_attrib.cache")
T = TypeVar("T")


def cache_dir() -> Optional[Path]:
    """Where entries live; None when the cache is off or no home is known."""
    configured = os.environ.get(CACHE_ENV, "")
    if configured == "off":
        return None
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or (str(Path.home() / ".cache") if "HOME" in os.environ else "")
    return Path(base) / "slurm-attrib" if base else None


def cached(shape: str, suffix: str, make: Callable[[], T], dump: Callable[[T], bytes],
           load: Callable[[bytes], T], unusable: tuple[type[BaseException], ...] = ()) -> T:
    """The value ``make`` returns, read back with ``load`` from the entry ``shape`` names when a run stored it
    before (``dump``); ``unusable``: what ``load`` and ``dump`` raise for an entry or value they cannot take,
    besides OSError and ValueError."""
    folder = cache_dir()
    if folder is None:
        return make()
    path = folder / f"{hashlib.sha256(shape.encode()).hexdigest()[:32]}{suffix}"
    errors: tuple[type[BaseException], ...] = (OSError, ValueError, *unusable)
    data = _read(path)
    if data is not None:
        try:
            return load(data)
        except errors as exc:
            log.debug("cache entry %s unusable (%s); making it again", path, exc)
    value = make()
    try:
        _store(path, dump(value))
    except errors as exc:
        log.debug("cache entry %s not written (%s)", path, exc)
    return value


def cached_document(shape: str, suffix: str, make: Callable[[], Any], valid: Callable[[Any], bool]) -> Any:
    """:func:`cached` for a parsed document (mappings, lists, tuples, strings, numbers, booleans, None), kept as
    JSON; an entry that reads back as something ``valid`` refuses is made again, and a document JSON would not give
    back equal (a YAML date, a set) is not stored."""

    def load(data: bytes) -> Any:
        document = json.loads(data, object_hook=_decoded)
        if not valid(document):
            raise ValueError("not the document this entry holds")
        return document

    def dump(document: Any) -> bytes:
        data = json.dumps(_encoded(document), ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
        if load(data) != document:
            raise TypeError("the document does not read back equal")
        return data

    return cached(shape, suffix, make, dump, load, (TypeError, RecursionError))


# JSON's objects take string keys only and it has no tuples: a mapping with other keys (the catalog's numbered
# entries) is written as its pairs under _PAIRS, a tuple (a rule key's line and column) as its items under _TUPLE.
# A mapping with a key that starts with NUL is written as pairs too, so an object of one such key is always a tag.
_PAIRS, _TUPLE = "\0pairs", "\0tuple"


def _encoded(value: Any) -> Any:
    if isinstance(value, dict):
        if all(type(key) is str and not key.startswith("\0") for key in value):
            return {key: _encoded(item) for key, item in value.items()}
        return {_PAIRS: [[_encoded(key), _encoded(item)] for key, item in value.items()]}
    if isinstance(value, list):
        return [_encoded(item) for item in value]
    if isinstance(value, tuple):
        return {_TUPLE: [_encoded(item) for item in value]}
    if value is None or type(value) in (str, int, float, bool):
        return value
    raise TypeError(f"a {type(value).__name__} is not kept in the cache")


def _decoded(mapping: dict[str, Any]) -> Any:
    if len(mapping) == 1:
        if isinstance(pairs := mapping.get(_PAIRS), list):
            return {key: item for key, item in pairs}
        if isinstance(items := mapping.get(_TUPLE), list):
            return tuple(items)
    return mapping


def _owned(info: os.stat_result) -> bool:
    """Ours alone: owned by this process's user and writable by no group or other."""
    return info.st_uid == os.geteuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _trusted_dir(folder: Path) -> bool:
    try:
        info = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and _owned(info)


def _read(path: Path) -> Optional[bytes]:
    if not _trusted_dir(path.parent):
        return None
    try:
        with open_regular(path) as handle:  # no link followed, regular files only
            if not _owned(os.fstat(handle.fileno())):
                log.debug("cache entry %s is not this user's alone; not read", path)
                return None
            return handle.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.debug("cache entry %s unreadable (%s)", path, exc)
        return None


def _store(path: Path, data: bytes) -> None:
    """Write beside the entry and rename over it: a concurrent reader sees all of it or nothing."""
    tmp = ""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not _trusted_dir(path.parent):
            log.debug("cache %s is not this user's alone; not written", path.parent)
            return
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".tmp-", delete=False) as handle:
            tmp = handle.name
            handle.write(data)
        os.replace(tmp, path)
    except OSError as exc:
        log.debug("cache %s not written (%s)", path.parent, exc)
        if tmp:
            Path(tmp).unlink(missing_ok=True)
