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
