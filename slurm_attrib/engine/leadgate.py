"""Searching a regex faster with the same results: a gate on its first characters, a screen on its literals.

:func:`gated`: a regex with a look-ahead on the characters its matches can begin with, so Python's ``re`` skips
ahead.

``re`` finds where a search can start by itself only when every branch of the pattern begins with a literal
or a class. A pattern whose branches begin with ``\\b`` or another zero-width item ('\\bcomm=|\\baudit[:(]')
is tried at every position of the line, every branch each time: 15 µs for a 50-character kernel line that the
gated pattern rejects in 1.5 µs. The gate is computed from the parsed pattern (never written by hand, so a new
branch cannot slip past it) and is a superset: a lone character class of every character a match can begin
with, compiled with the pattern's own flags (so case folding agrees). A branch that begins with a look-behind
and then a class that bounds nothing (app.storage_errno's ``(?<=/)[^\\s:]{0,200}: I/O error``) is bounded by the
character its look-behind wants before it: the gate then also lets through a position after one of those. A
pattern whose start cannot be bounded either way (it can match empty text, or begin with ``.``, a negated class,
a back-reference or a group with flags of its own) is given back unchanged.

:class:`Screened`: a regex searched only in a text that holds one of the literals every match holds
(:func:`needed_literals`), found by ``str.__contains__`` in C. A rule's exclude, an alternation of thirty-odd
words behind ``\\b``, costs 40-50 µs on each 150-character line its rule matched, ~5 µs screened; a job that logs
one such error a million times pays that a million times.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple, Optional

from .bytepattern import ATOMIC_GROUP, REPEATS, sre, sre_parse  # type: ignore[attr-defined]  # (re._parser, or sre_parse before 3.11)

_GLOBAL_FLAGS = re.compile(r"\(\?[aiLmsux]+\)")


def gated(regex: re.Pattern[str]) -> re.Pattern[str]:
    """``regex`` behind a look-ahead on its possible first characters (or a look-behind on the character its look-behind
    wants before them); the same matches, spans and groups."""
    firsts = _first_chars(list(sre_parse.parse(regex.pattern, regex.flags)))
    if firsts is None or firsts.empty:
        return regex
    source = regex.pattern
    while (lead := _GLOBAL_FLAGS.match(source)) is not None:  # carried by regex.flags instead
        source = source[lead.end():]
    close = "\n)" if regex.flags & re.VERBOSE else ")"  # a verbose pattern's trailing comment ends at a newline
    gates = [*(["(?=[" + "".join(sorted(firsts.members)) + "])"] if firsts.members else []),
             *(["(?<=[" + "".join(sorted(firsts.behind)) + "])"] if firsts.behind else [])]
    # both as one look-ahead: a position that passes both, where the pattern then fails, is not tried twice
    gate = gates[0] if len(gates) == 1 else "(?=" + "|".join(gates) + ")"
    try:
        return re.compile(gate + "(?:" + source + close, regex.flags)
    except re.error:  # global flags after a comment or a verbose blank ('(?#c)(?i)x'): valid only at the start
        return regex


class _Firsts(NamedTuple):
    """Where a match of a part of the pattern can begin: before one of ``members`` (class members), or after one of
    ``behind`` (the part's look-behind asks for it there); ``empty``: it can also match nothing here, so what follows
    it may supply the first character."""

    members: frozenset[str]
    empty: bool
    behind: frozenset[str] = frozenset()


_ZERO_WIDTH = (sre.AT, sre.ASSERT, sre.ASSERT_NOT)


def _first_chars(items: list[Any]) -> Optional[_Firsts]:
    """What a match of the sequence ``items`` can begin with, or None when no class bounds it. A look-behind among its
    leading zero-width items bounds where it begins by itself (one character before it, where the look-behind's last
    character is a class): the bound of a sequence no class bounds ('(?<=/)[^\\s:]{0,200}: I/O error')."""
    members: set[str] = set()
    behind: set[str] = set()
    before: Optional[_Firsts] = None  # what the leading look-behind asks for, were nothing else to bound the start
    for index, (op, av) in enumerate(items):
        if op == sre.ASSERT and av[0] < 0 and before is None and all(o in _ZERO_WIDTH for o, _ in items[:index]):
            last = _last_chars(list(av[1]))
            before = None if last is None else _Firsts(frozenset(), False, frozenset(last))
        found = _first_of(op, av)
        if found is None:
            return before
        members |= found.members
        behind |= found.behind
        if not found.empty:
            return _Firsts(frozenset(members), False, frozenset(behind))
    return before or _Firsts(frozenset(members), True, frozenset(behind))


def _last_chars(items: list[Any]) -> Optional[set[str]]:
    """The class members the last character of a (fixed-width) look-behind's match can be, or None."""
    if not items:
        return None
    op, av = items[-1]
    if op == sre.LITERAL:
        return {_escaped(av)}
    if op == sre.IN:
        found = _class_members(av)
        return None if found is None else set(found.members)
    if op == sre.SUBPATTERN and not av[1] and not av[2]:
        return _last_chars(list(av[3]))
    if op == sre.BRANCH:
        members: set[str] = set()
        for alternative in av[1]:
            last = _last_chars(list(alternative))
            if last is None:
                return None
            members |= last
        return members
    if op in REPEATS and av[0] >= 1:
        return _last_chars(list(av[2]))
    return None


def _first_of(op: Any, av: Any) -> Optional[_Firsts]:
    if op in _ZERO_WIDTH:
        return _Firsts(frozenset(), True)  # zero-width: the next item consumes the first character
    if op == sre.LITERAL:
        return _Firsts(frozenset({_escaped(av)}), False)
    if op == sre.IN:
        return _class_members(av)
    if op == sre.SUBPATTERN:
        if av[1] or av[2]:
            return None  # a scoped flag ('(?i:error)'): the gate, compiled with the pattern's own flags, would differ
        return _first_chars(list(av[3]))
    if op == ATOMIC_GROUP:
        return _first_chars(list(av))
    if op == sre.BRANCH:
        members: set[str] = set()
        behind: set[str] = set()
        empty = False
        for alternative in av[1]:
            found = _first_chars(list(alternative))
            if found is None:
                return None
            members |= found.members
            behind |= found.behind
            empty = empty or found.empty
        return _Firsts(frozenset(members), empty, frozenset(behind))
    if op in REPEATS:
        found = _first_chars(list(av[2]))
        if found is None:
            return None
        return found._replace(empty=found.empty or av[0] == 0)
    return None  # ANY, NOT_LITERAL, a back-reference, a conditional group: no class bounds it


def _class_members(items: Any) -> Optional[_Firsts]:
    members: set[str] = set()
    for op, av in items:
        if op == sre.LITERAL:
            members.add(_escaped(av))
        elif op == sre.RANGE:
            members.add(_escaped(av[0]) + "-" + _escaped(av[1]))
        elif op == sre.CATEGORY and av in _CATEGORIES:
            members.add(_CATEGORIES[av])
        else:
            return None  # a negated class, a negated category
    return _Firsts(frozenset(members), False)


_CATEGORIES = {sre.CATEGORY_DIGIT: r"\d", sre.CATEGORY_SPACE: r"\s", sre.CATEGORY_WORD: r"\w"}


def _escaped(code: int) -> str:
    """A character as a class member that means itself under every flag (VERBOSE included)."""
    char = chr(code)
    if char.isascii() and char.isalnum():
        return char
    return f"\\U{code:08x}"


MIN_LITERAL = 3  # a shorter literal is held by too many lines to screen them


class Screened:
    """``regex`` behind its gate, searched only in a text that holds one of :func:`needed_literals`: the same
    matches as ``regex.search``."""

    __slots__ = ("literals", "regex")

    def __init__(self, regex: re.Pattern[str]) -> None:
        self.literals = needed_literals(regex)
        self.regex = gated(regex)

    def search(self, text: str) -> Optional[re.Match[str]]:
        if self.literals is not None and not any(map(text.__contains__, self.literals)):
            return None
        return self.regex.search(text)


def needed_literals(regex: re.Pattern[str]) -> Optional[tuple[str, ...]]:
    """Literals of which every match of ``regex`` holds at least one (each alternative's longest run of literal
    characters, else those of the first group it cannot skip that has some), sorted; None when an alternative has
    none of :data:`MIN_LITERAL` characters or more, or the pattern ignores case."""
    if regex.flags & re.IGNORECASE:
        return None
    found = _needed(list(sre_parse.parse(regex.pattern, regex.flags)))
    return tuple(sorted(found)) if found else None


def _needed(items: list[Any]) -> Optional[set[str]]:
    """Literals one of which every match of the sequence ``items`` holds, or None."""
    runs: list[str] = []
    run: list[str] = []
    for op, av in items:
        if op == sre.LITERAL:
            run.append(chr(av))
            continue
        runs.append("".join(run))
        run = []
    runs.append("".join(run))
    longest = max(runs, key=len)
    if len(longest) >= MIN_LITERAL:
        return {longest}  # consecutive literal items match consecutive characters: the text holds the run
    for op, av in items:
        found: Optional[set[str]] = None
        if op == sre.BRANCH:
            found = set()
            for alternative in av[1]:
                inner = _needed(list(alternative))
                if inner is None:
                    found = None
                    break
                found |= inner
        elif op == sre.SUBPATTERN and not av[1] and not av[2]:  # a group with flags of its own may fold case
            found = _needed(list(av[3]))
        elif op in REPEATS and av[0] >= 1:
            found = _needed(list(av[2]))
        elif op == ATOMIC_GROUP:
            found = _needed(list(av))
        if found:
            return found
    return None
