"""What a start would otherwise make again, kept on disk between runs: the compiled Hyperscan
database (:mod:`.engine.dbcache`, ~3 s to compile, a millisecond to load), the parsed bundled rule
files (:func:`.ruleset.load_ruleset`, ~50 ms of YAML per start, ~10 ms of JSON) and the parsed XID
catalog (:func:`.nvidia.catalog.load_catalog`, ~35 ms, 5 ms). An entry is stored under the hash of
everything that shaped it, so a changed input, library or release simply misses. The cache only ever
saves time: a missing, unreadable or corrupt entry, or a directory that cannot be written, means
making the value as if the cache were absent.

The directory is $SLURM_ATTRIB_CACHE_DIR, else $XDG_CACHE_HOME/slurm-attrib (an absolute one: the XDG
specification ignores a relative path), else ~/.cache/slurm-attrib of $HOME or, without one, of this
user's account; ``SLURM_ATTRIB_CACHE_DIR=off`` turns the cache off.

A parsed document (rules, the XID catalog) is kept as JSON (:func:`cached_document`), never as pickle: what a
cache file can make is data of the types a safe YAML loader gives, and only if it reads back equal.

An entry decides which lines the rules ever see (a database) or what the rules say (parsed rules), and
Hyperscan does not defend itself against a crafted database, so the cache is trusted only when nobody
else could have written it: the directory (opened without following a link, then the entry opened
inside that open directory, so neither can be swapped between the check and the use) and the entry
(a regular file with no other name: a hard link to someone's file is refused) belong to this
process's user and are writable by nobody else. Anything else is passed over, never read and never
written.

The cache keeps itself small: a start that reads an entry marks it used (its mtime, at most once a day), and a
start that stores one removes the entries no start has used for :data:`MAX_IDLE_S` (an upgrade's, an edited site
rule's), a writer's leftover ``.tmp-*`` older than an hour, and then the least recently used entries until all of
them take at most :data:`MAX_BYTES`. Only regular files of this user's, under names the cache gives, are removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import pwd
import re
import secrets
import stat
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Optional, TypeVar

from . import __version__

CACHE_ENV = "SLURM_ATTRIB_CACHE_DIR"
MAX_IDLE_S = 30 * 86400  # an entry no start has read for this long goes when the next entry is stored
MAX_BYTES = 256 << 20  # then the least recently used go until the entries take at most this (a database ~8 MB)
USED_EVERY_S = 86400  # a read marks its entry used when the mark is older than this: not a write per start
STALE_WRITE_S = 3600  # a '.tmp-*' this old is a killed writer's, not one still writing
_ENTRY_NAME = re.compile(r"[0-9a-f]{32}\.[a-z][a-z.]{0,15}")  # what cached() names an entry
_WRITE_NAME = re.compile(r"\.tmp-[0-9a-f]{16}")  # what _store names the file it writes first
log = logging.getLogger("slurm_attrib.cache")
T = TypeVar("T")


def cache_dir() -> Optional[Path]:
    """Where entries live; None when the cache is off or no home is known."""
    configured = os.environ.get(CACHE_ENV, "")
    if configured == "off":
        return None
    if configured:
        return Path(configured)
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):
        return Path(xdg) / "slurm-attrib"
    home = os.environ.get("HOME") or _account_home()
    return Path(home) / ".cache" / "slurm-attrib" if os.path.isabs(home) else None


def _account_home() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_dir
    except KeyError:
        return ""


def source_digest(*modules: ModuleType) -> str:
    """A digest of the modules' source files, for a key that must miss once the code that makes an entry changes;
    a module whose source cannot be read counts by its name (the release in the key then stands for it)."""
    digest = hashlib.sha256()
    for module in modules:
        try:
            digest.update(Path(str(module.__file__)).read_bytes())
        except (OSError, TypeError):
            digest.update(repr(getattr(module, "__name__", "")).encode())
    return digest.hexdigest()


def cached(shape: str, suffix: str, make: Callable[[], T], dump: Callable[[T], bytes],
           load: Callable[[bytes], T], unusable: tuple[type[BaseException], ...] = ()) -> T:
    """The value ``make`` returns, read back with ``load`` from the entry ``shape`` names when a run stored it
    before (``dump``, called only where the entry can be written); ``unusable``: what ``load`` and ``dump`` raise
    for an entry or value they cannot take, besides OSError and ValueError."""
    folder = cache_dir()
    if folder is None:
        return make()
    name = f"{hashlib.sha256(shape.encode()).hexdigest()[:32]}{suffix}"
    errors: tuple[type[BaseException], ...] = (OSError, ValueError, *unusable)
    data = _read(folder, name)
    if data is not None:
        try:
            return load(data)
        except errors as exc:
            log.debug("cache entry %s unusable (%s); making it again", folder / name, exc)
    value = make()
    try:
        _store(folder, name, lambda: dump(value))
    except errors as exc:
        log.debug("cache entry %s not written (%s)", folder / name, exc)
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

    keyed = repr((_DOCUMENT_FORMAT, __version__, shape))  # how it is written, and the release that wrote it
    return cached(keyed, suffix, make, dump, load, (TypeError, RecursionError))


# JSON's objects take string keys only and it has no tuples: a mapping with other keys (the catalog's numbered
# entries) is written as its pairs under _PAIRS, a tuple (a rule key's line and column) as its items under _TUPLE.
# A mapping with a key that starts with NUL is written as pairs too, so an object of one such key is always a tag.
_PAIRS, _TUPLE = "\0pairs", "\0tuple"
_DOCUMENT_FORMAT = "json-tagged/1"


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


_DIRECTORY = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
_ENTRY = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)


def _open_trusted(folder: Path) -> Optional[int]:
    """A descriptor of ``folder`` when it is a directory (not a link) that is ours alone, else None."""
    try:
        fd = os.open(folder, _DIRECTORY)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
    except OSError:
        os.close(fd)
        return None
    if stat.S_ISDIR(info.st_mode) and _owned(info):
        return fd
    os.close(fd)
    log.debug("cache %s is not this user's alone; not used", folder)
    return None


def _read(folder: Path, name: str) -> Optional[bytes]:
    directory = _open_trusted(folder)
    if directory is None:
        return None
    try:
        fd = os.open(name, _ENTRY, dir_fd=directory)  # no link followed, inside the directory checked
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.debug("cache entry %s unreadable (%s)", folder / name, exc)
        return None
    finally:
        os.close(directory)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not (stat.S_ISREG(info.st_mode) and _owned(info) and info.st_nlink == 1):
            log.debug("cache entry %s is not a file of this user's alone; not read", folder / name)
            return None
        if time.time() - info.st_mtime > USED_EVERY_S:
            with contextlib.suppress(OSError):  # a read-only cache (ProtectSystem=) is still read
                os.utime(fd)  # used: the next prune keeps it
        return handle.read()


def _store(folder: Path, name: str, dump: Callable[[], bytes]) -> None:
    """Write beside the entry and rename over it, both inside the directory checked: a concurrent reader sees
    all of it or nothing. ``dump`` is called only once the directory is known to be ours."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        log.debug("cache %s not made (%s)", folder, exc)
        return
    directory = _open_trusted(folder)
    if directory is None:
        return
    tmp = f".tmp-{secrets.token_hex(8)}"
    try:
        data = dump()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600,
                     dir_fd=directory)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, name, src_dir_fd=directory, dst_dir_fd=directory)
        except OSError:
            os.unlink(tmp, dir_fd=directory)
            raise
        try:
            prune(directory, name, time.time())
        except Exception as exc:  # the cache only ever saves time: a prune that fails never stops a start
            log.debug("cache %s not pruned (%s)", folder, exc)
    finally:
        os.close(directory)


def prune(directory: int, stored: str, now: float) -> list[str]:
    """Remove, from the open cache ``directory``, the entries not used for :data:`MAX_IDLE_S` and the writers'
    leftovers older than :data:`STALE_WRITE_S`, then the least recently used entries (the oldest mark first, by
    name on a tie) until the entries take at most :data:`MAX_BYTES`; never ``stored``, the entry just written.
    Only regular files of this user's with a name the cache gives are looked at; no link is followed. The names
    removed, in the order they went."""
    removed: list[str] = []
    kept: list[tuple[float, str, int]] = []
    total = 0
    found: list[tuple[str, os.stat_result]] = []
    with os.scandir(directory) as listing:
        for item in listing:
            if _ENTRY_NAME.fullmatch(item.name) or _WRITE_NAME.fullmatch(item.name):
                with contextlib.suppress(FileNotFoundError):  # another start pruned it first
                    found.append((item.name, item.stat(follow_symlinks=False)))
    for name, info in sorted(found):
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            continue
        writing = name.startswith(".")
        if name != stored and now - info.st_mtime > (STALE_WRITE_S if writing else MAX_IDLE_S):
            _remove(directory, name, removed)
        elif not writing:
            total += info.st_size
            if name != stored:
                kept.append((info.st_mtime, name, info.st_size))
    for _, name, size in sorted(kept):
        if total <= MAX_BYTES:
            break
        if _remove(directory, name, removed):
            total -= size
    return removed


def _remove(directory: int, name: str, removed: list[str]) -> bool:
    try:
        os.unlink(name, dir_fd=directory)
    except FileNotFoundError:  # another start pruned it first
        return False
    removed.append(name)
    return True
