"""The on-disk cache of compiled prefilter databases only ever saves time: a hit gives the same
database, a corrupt entry or an unwritable folder means compiling, ``off`` writes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from slurm_attrib import diskcache
from slurm_attrib.engine import dbcache

hyperscan = pytest.importorskip("hyperscan")
SHAPE = ((0,), ((b"nfs: server \\S+ not responding", b"nfs: server"),))


class _Compiler:
    """Compiles one pattern and counts how often it was asked to."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> Any:
        self.calls += 1
        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        db.compile(expressions=[SHAPE[1][0][0]], ids=[0], flags=[0])
        return db


def _matches(db: Any, data: bytes) -> list[int]:
    ends: list[int] = []
    db.scan(data, match_event_handler=lambda _i, _f, to, _fl, _c: ends.append(to), scratch=hyperscan.Scratch(db))
    return ends


def test_a_second_run_loads_what_the_first_compiled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(diskcache.CACHE_ENV, str(tmp_path))
    compiler = _Compiler()
    first = dbcache.cached_database(hyperscan, SHAPE, compiler)
    second = dbcache.cached_database(hyperscan, SHAPE, compiler)
    assert compiler.calls == 1 and len(list(tmp_path.glob("*.hsdb"))) == 1
    line = b"nfs: server s1 not responding\nnfs: server s1 OK\n"
    assert _matches(first, line) == _matches(second, line) == [29]


def test_another_shape_misses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(diskcache.CACHE_ENV, str(tmp_path))
    compiler = _Compiler()
    dbcache.cached_database(hyperscan, SHAPE, compiler)
    dbcache.cached_database(hyperscan, ((0,), ()), compiler)
    assert compiler.calls == 2


def test_a_corrupt_entry_is_compiled_again_and_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(diskcache.CACHE_ENV, str(tmp_path))
    dbcache.cached_database(hyperscan, SHAPE, _Compiler())
    entry = next(tmp_path.glob("*.hsdb"))
    entry.write_bytes(b"garbage")
    compiler = _Compiler()
    assert _matches(dbcache.cached_database(hyperscan, SHAPE, compiler), b"nfs: server a not responding") == [28]
    assert compiler.calls == 1 and entry.read_bytes() != b"garbage"


def test_an_unwritable_folder_only_costs_the_compile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv(diskcache.CACHE_ENV, str(blocker / "cache"))
    compiler = _Compiler()
    assert dbcache.cached_database(hyperscan, SHAPE, compiler) is not None and compiler.calls == 1


def test_off_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(diskcache.CACHE_ENV, "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    dbcache.cached_database(hyperscan, SHAPE, _Compiler())
    assert diskcache.cache_dir() is None and list(tmp_path.rglob("*")) == []


def test_the_folder_follows_xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(diskcache.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert diskcache.cache_dir() == tmp_path / "slurm-attrib"


def test_a_folder_others_can_write_is_neither_read_nor_written(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A database decides which lines the rules see: one another user could have planted is not used."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv(diskcache.CACHE_ENV, str(shared))
    compiler = _Compiler()
    dbcache.cached_database(hyperscan, SHAPE, compiler)
    dbcache.cached_database(hyperscan, SHAPE, compiler)
    assert compiler.calls == 2 and list(shared.iterdir()) == []


def test_an_entry_that_is_a_symlink_is_not_followed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv(diskcache.CACHE_ENV, str(cache))
    dbcache.cached_database(hyperscan, SHAPE, _Compiler())
    (entry,) = cache.glob("*.hsdb")
    planted = tmp_path / "planted.hsdb"
    entry.rename(planted)
    entry.symlink_to(planted)
    compiler = _Compiler()
    dbcache.cached_database(hyperscan, SHAPE, compiler)
    assert compiler.calls == 1
