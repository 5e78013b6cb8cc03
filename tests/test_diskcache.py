"""A parsed document kept in the cache comes back equal, types and all, or is not kept; an entry that reads back
as something the caller refuses is made again and replaced."""

from __future__ import annotations

import datetime
import os
import time
from pathlib import Path
from typing import Any

import pytest

from slurm_attrib import diskcache


class _Maker:
    def __init__(self, document: Any) -> None:
        self.document, self.calls = document, 0

    def __call__(self) -> Any:
        self.calls += 1
        return self.document


@pytest.fixture
def folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv(diskcache.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


DOCUMENTS = [
    {"xids": {13: {"name": "Graphics Engine Exception"}, 79: {"name": "fallen off the bus"}}},  # numbered entries
    {"__keys__": {"id": (1, 1), "match": (5, 1)}, "__line__": 1},  # a rule key's line and column
    {"\0pairs": "a key that looks like the tag", "n": [1, 1.5, True, None, "x"]},
    {True: "yes", 1.5: "a float key", None: "none", "s": ()},
    [{"\0tuple": [1, 2]}, {}, [], "", -0.0],
]


@pytest.mark.parametrize("document", DOCUMENTS)
def test_a_document_comes_back_as_it_was(folder: Path, document: Any) -> None:
    make = _Maker(document)
    first = diskcache.cached_document("shape", ".json", make, lambda _: True)
    second = diskcache.cached_document("shape", ".json", make, lambda _: True)
    assert first == document and second == document and make.calls == 1
    assert repr(second) == repr(document)  # the same types: a tuple stays a tuple, 1.5 a float, True a bool


@pytest.mark.parametrize("document", [{"retrieved": datetime.date(2026, 12, 5)}, {"s": {1, 2}}, [b"bytes"],
                                      {"nan": float("nan")}])
def test_what_json_cannot_give_back_is_not_kept(folder: Path, document: Any) -> None:
    make = _Maker(document)
    for _ in range(2):
        assert repr(diskcache.cached_document("shape", ".json", make, lambda _: True)) == repr(document)
    assert make.calls == 2 and not list(folder.glob("*.json"))


def test_an_entry_the_caller_refuses_is_made_again_and_replaced(folder: Path) -> None:
    make = _Maker({"a": 1})
    diskcache.cached_document("shape", ".json", make, lambda doc: isinstance(doc, dict))
    (entry,) = folder.glob("*.json")
    entry.write_bytes(b"[1, 2]")
    assert diskcache.cached_document("shape", ".json", make, lambda doc: isinstance(doc, dict)) == {"a": 1}
    assert make.calls == 2 and entry.read_bytes() == b'{"a":1}'
    assert diskcache.cached_document("shape", ".json", make, lambda doc: isinstance(doc, dict)) == {"a": 1}
    assert make.calls == 2


class _Dump:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, value: bytes) -> bytes:
        self.calls += 1
        return value


def _bytes(folder_env: str, monkeypatch: pytest.MonkeyPatch, make: _Maker, dump: _Dump) -> bytes:
    monkeypatch.setenv(diskcache.CACHE_ENV, folder_env)
    value: bytes = diskcache.cached("shape", ".bin", make, dump, lambda data: data)
    return value


def test_a_folder_not_ours_costs_no_dump(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where nothing can be stored, the value is not serialised for nothing (a read-only or shared folder)."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    blocker = tmp_path / "file"
    blocker.write_text("")
    make, dump = _Maker(b"value"), _Dump()
    for folder in (shared, blocker / "cache"):
        assert _bytes(str(folder), monkeypatch, make, dump) == b"value"
    assert make.calls == 2 and dump.calls == 0 and list(shared.iterdir()) == []


def test_a_hard_link_or_a_linked_folder_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry with another name (a hard link someone made to a file of ours), or a cache folder that is a
    symbolic link, is passed over: the entry is made again and stored under a name of its own."""
    cache = tmp_path / "cache"
    make, dump = _Maker(b"value"), _Dump()
    _bytes(str(cache), monkeypatch, make, dump)
    (entry,) = cache.glob("*.bin")
    (tmp_path / "other-name").hardlink_to(entry)
    assert _bytes(str(cache), monkeypatch, make, dump) == b"value" and make.calls == 2
    assert entry.stat().st_nlink == 1  # replaced by a file of its own, which the next start reads
    assert _bytes(str(cache), monkeypatch, make, dump) == b"value" and make.calls == 2
    linked = tmp_path / "linked"
    linked.symlink_to(cache, target_is_directory=True)
    assert _bytes(str(linked), monkeypatch, make, dump) == b"value" and make.calls == 3


def test_the_folder_without_a_cache_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """$XDG_CACHE_HOME when absolute (the XDG specification ignores a relative one), else $HOME's .cache, else the
    account's home's (a service started without HOME)."""
    monkeypatch.delenv(diskcache.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert diskcache.cache_dir() == tmp_path / "xdg" / "slurm-attrib"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert diskcache.cache_dir() == tmp_path / "home" / ".cache" / "slurm-attrib"
    monkeypatch.delenv("HOME")
    monkeypatch.setattr(diskcache, "_account_home", lambda: str(tmp_path / "account"))
    assert diskcache.cache_dir() == tmp_path / "account" / ".cache" / "slurm-attrib"
    monkeypatch.setattr(diskcache, "_account_home", lambda: "")
    assert diskcache.cache_dir() is None


NOW = 1_800_000_000.0  # the time the prune tests run at


def _file(folder: Path, name: str, age_s: float, size: int = 10, now: float = NOW) -> Path:
    path = folder / name
    path.write_bytes(b"x" * size)
    os.utime(path, (now - age_s, now - age_s))
    return path


def _names(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


def test_storing_an_entry_removes_what_no_start_used(folder: Path, tmp_path: Path) -> None:
    """An entry nobody read for longer than MAX_IDLE_S (the database of the rules before an upgrade) and a killed
    writer's '.tmp-*' go when a start stores an entry; a recent entry, a write still under way, a file the cache did
    not name, and a link named like an entry (its target least of all) stay."""
    folder.mkdir(mode=0o700)
    now = time.time()
    _file(folder, "a" * 32 + ".hsdb", diskcache.MAX_IDLE_S + 60, now=now)
    _file(folder, "b" * 32 + ".hsdb", diskcache.MAX_IDLE_S - 3600, now=now)
    _file(folder, ".tmp-" + "c" * 16, diskcache.STALE_WRITE_S + 60, now=now)
    _file(folder, ".tmp-" + "d" * 16, 60, now=now)
    _file(folder, "notes.txt", diskcache.MAX_IDLE_S * 2, now=now)
    outside = _file(tmp_path, "outside", diskcache.MAX_IDLE_S * 2, now=now)
    link = folder / ("e" * 32 + ".hsdb")
    link.symlink_to(outside)
    os.utime(link, (now - diskcache.MAX_IDLE_S * 2,) * 2, follow_symlinks=False)  # the link itself long unused
    make, dump = _Maker(b"value"), _Dump()
    assert diskcache.cached("shape", ".bin", make, dump, lambda data: data) == b"value"
    (stored,) = folder.glob("*.bin")
    assert _names(folder) == sorted([".tmp-" + "d" * 16, "b" * 32 + ".hsdb", "e" * 32 + ".hsdb", "notes.txt",
                                     stored.name])
    assert outside.read_bytes() == b"x" * 10


def test_the_least_recently_used_go_until_the_entries_fit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over MAX_BYTES, the entries with the oldest mark go first (by name on a tie), never the one just stored,
    however big; a writer's file does not count."""
    monkeypatch.setattr(diskcache, "MAX_BYTES", 100)
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    for name, age_s in (("1", 300), ("2", 500), ("3", 500), ("4", 100)):
        _file(folder, name * 32 + ".hsdb", age_s, size=40)
    _file(folder, ".tmp-" + "f" * 16, 60, size=1000)
    _file(folder, "5" * 32 + ".hsdb", 900, size=20)  # the entry just stored: an old mark, and kept
    directory = os.open(folder, os.O_RDONLY)
    try:
        removed = diskcache.prune(directory, "5" * 32 + ".hsdb", NOW)
    finally:
        os.close(directory)
    assert removed == ["2" * 32 + ".hsdb", "3" * 32 + ".hsdb"]  # 180 bytes, then 140, then 100: they fit
    assert _names(folder) == sorted([".tmp-" + "f" * 16, "1" * 32 + ".hsdb", "4" * 32 + ".hsdb", "5" * 32 + ".hsdb"])
    monkeypatch.setattr(diskcache, "MAX_BYTES", 10)
    directory = os.open(folder, os.O_RDONLY)
    try:
        assert diskcache.prune(directory, "5" * 32 + ".hsdb", NOW) == ["1" * 32 + ".hsdb", "4" * 32 + ".hsdb"]
    finally:
        os.close(directory)
    assert _names(folder) == sorted([".tmp-" + "f" * 16, "5" * 32 + ".hsdb"])
    directory = os.open(folder, os.O_RDONLY)
    try:  # a month later: the writer's leftover goes, the entry just stored stays whatever its mark
        assert diskcache.prune(directory, "5" * 32 + ".hsdb", NOW + 2 * diskcache.MAX_IDLE_S) == [".tmp-" + "f" * 16]
    finally:
        os.close(directory)
    assert _names(folder) == ["5" * 32 + ".hsdb"]


def test_a_read_marks_its_entry_used_once_a_day(folder: Path) -> None:
    """A start that reads an entry marks it used (so the next prune keeps it), but only when the mark is older than
    a day: a start does not write to the cache for every entry it reads."""
    make, dump = _Maker(b"value"), _Dump()
    diskcache.cached("shape", ".bin", make, dump, lambda data: data)
    (entry,) = folder.glob("*.bin")
    now = time.time()
    for age_s, marked in ((2 * diskcache.USED_EVERY_S, True), (3600, False)):
        os.utime(entry, (now - age_s, now - age_s))
        assert diskcache.cached("shape", ".bin", make, dump, lambda data: data) == b"value" and make.calls == 1
        assert (abs(entry.stat().st_mtime - time.time()) < 600) is marked


def test_a_prune_that_fails_costs_nothing_but_the_prune(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever pruning raises, the value is returned and stored: the cache never stops a start."""

    def broken(directory: int, stored: str, now: float) -> list[str]:
        raise RuntimeError("a prune that fails")

    monkeypatch.setattr(diskcache, "prune", broken)
    make, dump = _Maker(b"value"), _Dump()
    assert diskcache.cached("shape", ".bin", make, dump, lambda data: data) == b"value"
    assert len(list(folder.glob("*.bin"))) == 1
