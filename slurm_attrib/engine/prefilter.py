"""Choosing the multi-pattern prefilter: Hyperscan when it imports, else one ``re`` alternation.

Hyperscan holds one pattern per rule, a byte superset of the rule's own regex (:mod:`.bytepattern`),
so a noisy line that only shares an anchor word with a rule (``nfs: server storage01 OK``) never
reaches Python, and each hit names the rule it is for. The ``re`` fallback finds the literal
anchors and lets the line's anchors choose the rules. Either way the rules' anchors and regexes
decide on the hit line in Python (:class:`.extract.AnchorIndex`), so the choice changes speed, never
results. ``SLURM_ATTRIB_PREFILTER=re`` forces the fallback.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from ..diskcache import source_digest
from ..ruleset import Rule
from ..scan import Prefilter, RegexPrefilter, fold_bytes
from . import bytepattern, ranks
from .bytepattern import Untranslatable, translate
from .dbcache import cached_database

PREFILTER_ENV = "SLURM_ATTRIB_PREFILTER"
log = logging.getLogger("slurm_attrib.prefilter")


class HyperscanPrefilter:
    """One Hyperscan block database, pattern ``i`` for rule ``i``; a hit reports the last byte of a
    match (inside its line: no pattern matches a newline) and the rule's index."""

    def __init__(self, hs: Any, rules: Sequence[Rule]) -> None:
        self._db = _database(hs, rules)
        self._scratch = hs.Scratch(self._db)

    def hits(self, data: bytes, start: int, end: int) -> Iterator[tuple[int, int]]:
        found: list[tuple[int, int]] = []

        def on_match(rule: int, _from: int, to: int, _flags: int, _ctx: object) -> None:
            found.append((start + to - 1, rule))

        self._db.scan(memoryview(data)[start:end], match_event_handler=on_match, scratch=self._scratch)
        found.sort()
        yield from found


def rule_patterns(rule: Rule) -> tuple[bytes, bytes]:
    """The byte pattern that stands for ``rule`` in the database, and the one to fall back on: its
    regex's superset (its anchors when the translation cannot express the regex), then its anchors."""
    assert rule.match is not None
    anchors = anchor_pattern(rule)
    try:
        return translate(rule.match.regex, rank_prefixed=rule.match.source == "app"), anchors
    except Untranslatable as exc:
        log.debug("rule %s: prefilter on its anchors (%s)", rule.id, exc)
        return anchors, anchors


def anchor_pattern(rule: Rule) -> bytes:
    """Any of the rule's anchors, without the newline some end with (the anchor index asks for it), in any
    case where the rule's regex ignores case."""
    assert rule.match is not None
    anchors = sorted({a.rstrip("\n").encode() for a in rule.match.anchors})
    return fold_bytes(b"(?:" + b"|".join(_literal(a) for a in anchors) + b")", folds_case(rule))


def folds_case(rule: Rule) -> bool:
    """Whether the rule's regex ignores case ('(?i)'): then its anchors are found in any case too."""
    return bool(rule.match and rule.match.ignores_case)


def folded_anchors(rules: Sequence[Rule]) -> frozenset[str]:
    """The anchors (as written) of the rules that ignore case."""
    return frozenset(a for r in rules if r.match and folds_case(r) for a in r.match.anchors)


_DATABASES: dict[tuple[Any, ...], Any] = {}  # per process: (rule sources) -> database, oldest first
MAX_DATABASES = 16  # a long-lived process whose rules keep changing holds no more than this many


def _database(hs: Any, rules: Sequence[Rule]) -> Any:
    """Compiled once per process and set of rules, and kept on disk between runs (compiling costs
    about 3 s, see :mod:`.dbcache`). The cache key is what the patterns are made from (each
    rule's regex (its flags inline), source and anchors, and the code that translates them), so a start that finds
    its database also skips the translation (80 ms for the bundled rules)."""
    sources = tuple(_source(rule) for rule in rules)
    found = _DATABASES.get(sources)
    if found is None:
        flag = hs.HS_FLAG_MULTILINE | hs.HS_FLAG_PREFILTER

        def compile_db() -> Any:
            patterns = tuple(rule_patterns(rule) for rule in rules)
            return _compile_all(hs, patterns, [flag] * len(patterns))

        found = cached_database(hs, (flag, _translator(), sources), compile_db)
        if len(_DATABASES) >= MAX_DATABASES:
            del _DATABASES[next(iter(_DATABASES))]
        _DATABASES[sources] = found
    return found


def _source(rule: Rule) -> tuple[Any, ...]:
    assert rule.match is not None
    return (rule.match.pattern, rule.match.source, tuple(sorted(rule.match.anchors)),  # flags: in the pattern
            rule.match.also_in)


@functools.lru_cache(maxsize=1)
def _translator() -> str:
    """A digest of the code that turns rules into patterns: a changed translation misses the cache."""
    return source_digest(bytepattern, ranks, sys.modules[__name__])  # ranks: the prefixes a pattern may follow


def _compile_all(hs: Any, patterns: tuple[tuple[bytes, bytes], ...], flags: list[int]) -> Any:
    """A pattern Hyperscan refuses gives way to its rule's anchors, never losing a match."""
    try:
        return _compile(hs, [wanted for wanted, _ in patterns], flags)
    except hs.error:
        usable = [wanted if _compiles(hs, wanted, f) else anchors for (wanted, anchors), f in zip(patterns, flags)]
        return _compile(hs, usable, flags)


def _compile(hs: Any, patterns: list[bytes], flags: list[int]) -> Any:
    db = hs.Database(mode=hs.HS_MODE_BLOCK)
    db.compile(expressions=patterns, ids=list(range(len(patterns))), flags=flags)
    return db


def _compiles(hs: Any, pattern: bytes, flag: int) -> bool:
    try:
        _compile(hs, [pattern], [flag])
    except hs.error as exc:
        log.warning("prefilter pattern refused by Hyperscan (%s); its rule falls back on its anchors", exc)
        return False
    return True


def _literal(anchor: bytes) -> bytes:
    return b"".join(b"\\x%02x" % c for c in anchor)


def kind() -> str:
    """The prefilter :func:`build` chooses here: ``hyperscan`` when it imports and is not turned off
    (``$SLURM_ATTRIB_PREFILTER=re``), else ``re``. ``slurm-attrib --version`` prints it."""
    if os.environ.get(PREFILTER_ENV, "") == "re":
        return "re"
    try:
        import hyperscan  # noqa: F401
    except ImportError:
        return "re"
    return "hyperscan"


def build(rules: Sequence[Rule]) -> Prefilter:
    """The fastest prefilter available here for these rules (rule ``i`` is hit tag ``i``)."""
    if rules and kind() == "hyperscan":
        import hyperscan

        return HyperscanPrefilter(hyperscan, rules)
    return RegexPrefilter([a.encode() for r in rules if r.match for a in r.match.anchors],
                          folded=[a.encode() for a in folded_anchors(rules)])
