"""The bundled rules' parsed YAML is kept in the cache between runs: a start that finds it builds the same rules
without parsing, a changed file or a corrupt entry means parsing again, and what JSON cannot hold is never stored."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from slurm_attrib import ruleset as ruleset_module
from slurm_attrib.diskcache import CACHE_ENV
from slurm_attrib.ruleset import bundled_rule_files, load_ruleset, parse_bundled, parse_rule_file

RULE = """id: kernel.example
version: 1
phase: extract
title: An example
description: a rule for the cache's tests
match: {source: kernel, anchors: ['boom'], regex: 'boom (?P<code>\\d+)'}
emit: {kind: example, role: candidate, category: gpu_hardware, responsible: infrastructure, strength: 70}
"""


class _Counting:
    """parse_rule_file, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, path: str, content: bytes) -> dict[str, Any]:
        self.calls += 1
        return parse_rule_file(path, content)


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> _Counting:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    parse = _Counting()
    monkeypatch.setattr(ruleset_module, "parse_rule_file", parse)
    return parse


def test_a_cached_parse_is_the_parse(counting: _Counting) -> None:
    files = bundled_rule_files()
    fresh = [parse_rule_file(path, content) for path, content in files]
    assert parse_bundled(files) == fresh and counting.calls == len(files)
    again = parse_bundled(files)
    assert again == fresh and counting.calls == len(files)  # read back, not parsed
    # the key positions come back as the loader made them: (line, column) tuples
    assert all(isinstance(where, tuple) for doc in again for where in doc["__keys__"].values())


def test_the_cached_rules_build_the_same_ruleset(counting: _Counting) -> None:
    first = load_ruleset(include_site=False)
    second = load_ruleset(include_site=False)
    assert counting.calls == len(bundled_rule_files())
    assert second.rules == first.rules and second.digest == first.digest


def test_a_changed_file_is_parsed_again(counting: _Counting) -> None:
    files = [("rules/kernel/example.yaml", RULE.encode())]
    assert parse_bundled(files)[0]["id"] == "kernel.example"
    changed = [("rules/kernel/example.yaml", RULE.replace("kernel.example", "kernel.renamed").encode())]
    assert parse_bundled(changed)[0]["id"] == "kernel.renamed" and counting.calls == 2


def test_a_corrupt_entry_is_parsed_again(counting: _Counting, tmp_path: Path) -> None:
    files = [("rules/kernel/example.yaml", RULE.encode())]
    expected = parse_bundled(files)
    (entry,) = (tmp_path / "cache").glob("*.rules.json")
    for broken in (b"{not json", b'{"a": 1}', b"[1, 2]", b"\xff\xfe"):
        entry.write_bytes(broken)
        assert parse_bundled(files) == expected
    assert counting.calls == 5


def test_an_entry_someone_else_could_write_is_not_read(counting: _Counting, tmp_path: Path) -> None:
    files = [("rules/kernel/example.yaml", RULE.encode())]
    parse_bundled(files)
    (entry,) = (tmp_path / "cache").glob("*.rules.json")
    entry.write_bytes(entry.read_bytes().replace(b"kernel.example", b"kernel.planted"))
    os.chmod(entry, 0o664)
    assert parse_bundled(files)[0]["id"] == "kernel.example" and counting.calls == 2


def test_what_json_cannot_hold_is_parsed_each_time(counting: _Counting, tmp_path: Path) -> None:
    files = [("rules/kernel/example.yaml", (RULE + "added: 2026-12-05\n").encode())]
    first = parse_bundled(files)
    assert str(first[0]["added"]) == "2026-12-05" and parse_bundled(files) == first
    assert counting.calls == 2 and not list((tmp_path / "cache").glob("*.rules.json"))


def test_off_writes_nothing(counting: _Counting, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(CACHE_ENV, "off")
    files = [("rules/kernel/example.yaml", RULE.encode())]
    assert parse_bundled(files) == parse_bundled(files) and counting.calls == 2
    assert not (tmp_path / "cache").exists()


def test_a_cached_parse_that_does_not_build_gives_way_to_the_files(counting: _Counting, tmp_path: Path) -> None:
    """An entry that reads back well formed but does not build (changed by hand, or written by a broken release)
    costs a parse, never the start."""
    expected = load_ruleset(include_site=False)
    (entry,) = (tmp_path / "cache").glob("*.rules.json")
    entry.write_bytes(entry.read_bytes().replace(b'"phase":"extract"', b'"phase":"bogus"', 1))
    assert load_ruleset(include_site=False).rules == expected.rules
