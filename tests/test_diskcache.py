"""A parsed document kept in the cache comes back equal, types and all, or is not kept; an entry that reads back
as something the caller refuses is made again and replaced."""

from __future__ import annotations

import datetime
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
