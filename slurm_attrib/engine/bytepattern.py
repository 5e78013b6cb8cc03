"""A rule's Python regex as a Hyperscan byte pattern that matches every line the regex can match.

The prefilter database holds one such pattern per rule, so a line reaches Python only when it very
likely yields a symptom. The translation may only widen, never narrow: Python matches decoded text
(one line, invalid UTF-8 and NUL turned into U+FFFD, an srun/PyTorch rank prefix stripped from
application lines, a JSON record's string unescaped), Hyperscan scans raw bytes. So every non-ASCII
character becomes a run of high bytes, a class that can match U+FFFD also takes NUL, every character
also takes its JSON escape, no atom crosses a newline, ``^`` may follow the rank prefixes, and what
bytes cannot express exactly is dropped (``$``, ``\\b``, lookarounds) or relaxed (a back-reference is
any text, a long bounded repeat is unbounded, the head before the longest literal of a pattern that
varies there is cut, and the tail after the pattern's first fixed part, so one line reports one end,
not one per byte). One narrowing is kept for Hyperscan's sake: a single character of a prefix that
``^`` may follow takes only the escapes of :data:`PREFIX_ESCAPED` (its runs take all). A regex the
translation cannot express raises :class:`Untranslatable`; its rule then falls back to its anchors.
"""

from __future__ import annotations

import functools
import re
import sys
from typing import Any

if sys.version_info >= (3, 11):  # the parser Python's own re compiles with: re._parser, sre_parse before
    from re import _constants as sre  # type: ignore[attr-defined]
    from re import _parser as sre_parse  # type: ignore[attr-defined]
else:  # pragma: no cover - Python 3.9 and 3.10
    import sre_constants as sre
    import sre_parse

from .ranks import (
    COLLECTED_HOST_PATTERN,
    JSON_WRAPPER_PATTERN,
    LOG_PREFIX_PATTERN,
    QUOTE_PREFIX_PATTERN,
    RANK_PREFIX_PATTERN,
    SHIPPED_STAMP_PATTERN,
)

# the ASCII letters that match a non-ASCII one when case is ignored (U+0130, U+0131, U+212A, U+017F)
CASE_FOLDS_BEYOND_ASCII = frozenset("IKSiks")
HIGH_RUN = rb"[\x80-\xff]+"  # one non-ASCII character: its UTF-8 bytes or the invalid bytes U+FFFD replaced
# A character as a JSON string spells it: '"', '\\' and '/' (json-c, rsyslog) after a backslash, Go's <, > and &
# as \\u003c, \\u003e, \\u0026, the usual control characters by letter (others \\u00XX), any non-ASCII one as
# \\uXXXX (an ASCII writer)
_JSON_LETTER = {0x22: 0x22, 0x5C: 0x5C, 0x2F: 0x2F, 0x09: ord("t"), 0x0D: ord("r"), 0x0C: ord("f"), 0x08: ord("b")}
_JSON_CODE = {0x3C: b"3[cC]", 0x3E: b"3[eE]", 0x26: b"26"}
JSON_ESCAPED = frozenset(_JSON_LETTER) | frozenset(_JSON_CODE) | frozenset(c for c in range(0x20) if c != 10)
ESCAPE_BYTES = frozenset(b"\\u0123456789abcdefABCDEFtrfb\"/")
PREFIX_ESCAPED = frozenset(b'<>&"\x1b')  # Open MPI's '[1,2]<stderr>:', an ANSI colour, a wrapper's quotes
MIN_START_LITERAL = 4  # a pattern starts at its longest literal run only when that run is this long
MAX_EXACT_REPEAT = 8  # a bounded repeat above this becomes unbounded: cheaper to compile, still a superset
_CATEGORIES = {sre.CATEGORY_DIGIT: r"\d", sre.CATEGORY_NOT_DIGIT: r"\D", sre.CATEGORY_SPACE: r"\s",
               sre.CATEGORY_NOT_SPACE: r"\S", sre.CATEGORY_WORD: r"\w", sre.CATEGORY_NOT_WORD: r"\W"}
_DROPPED_AT = {sre.AT_END, sre.AT_END_STRING, sre.AT_BOUNDARY, sre.AT_NON_BOUNDARY}
_CHAR_ATOMS = {sre.LITERAL, sre.NOT_LITERAL, sre.ANY, sre.IN}
REPEATS = {sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", sre.MAX_REPEAT)}  # the parser's repeat ops
ATOMIC_GROUP = getattr(sre, "ATOMIC_GROUP", None)  # (?>...), Python 3.11 on


class Untranslatable(ValueError):
    """The regex has no byte-pattern superset here (it could match an empty line, or needs a newline)."""


def translate(pattern: re.Pattern[str], rank_prefixed: bool = False) -> bytes:
    """The Hyperscan pattern (compile with HS_FLAG_MULTILINE) of ``pattern``; ``rank_prefixed`` when
    the text the regex sees had rank prefixes stripped from its start (application lines)."""
    parsed = sre_parse.parse(pattern.pattern, pattern.flags)
    items = _from_longest_literal(_trim_head(_trim_tail(list(parsed))))
    if max((_min_width(i) for i in items), default=0) == 0:
        raise Untranslatable(f"{pattern.pattern!r} can match an empty line")
    return _Emitter(parsed.state, parsed.state.flags, rank_prefixed).sequence(items)


def _trim_tail(items: list[Any]) -> list[Any]:
    """Cut what follows the last item that must match: a line that matches the whole also matches
    this prefix, and a fixed end reports one match per line instead of one per byte of a tail."""
    items = list(items)
    while items and _min_width(items[-1]) == 0:
        items.pop()
    if not items:
        return items
    op, av = items[-1]
    if op in REPEATS:
        low, _high, body = av
        items[-1] = (op, (low, low, body))
    elif op == sre.SUBPATTERN:
        group, add, delete, body = av
        items[-1] = (op, (group, add, delete, _trim_tail(list(body))))
    elif op == sre.BRANCH:
        items[-1] = (op, (av[0], [_trim_tail(list(alt)) for alt in av[1]]))
    return items


def _trim_head(items: list[Any]) -> list[Any]:
    """Cut what may match nothing before the first item that must match (a leading ``.*``): a line
    that matches the whole also matches the rest, and a leading ``.*`` costs the most to compile."""
    items = list(items)
    while items and items[0][0] != sre.AT and _min_width(items[0]) == 0:
        items.pop(0)
    if not items:
        return items
    op, av = items[0]
    if op == sre.BRANCH:
        items[0] = (op, (av[0], [_trim_head(list(alt)) for alt in av[1]]))
    elif op == sre.SUBPATTERN:
        group, add, delete, body = av
        items[0] = (op, (group, add, delete, _trim_head(list(body))))
    return items


def _from_longest_literal(items: list[Any]) -> list[Any]:
    """Start at the longest run of literal characters when what comes before it varies in width (a
    leading ``[^:]{1,200}: ``): an unanchored pattern's matches end where the rest's do, so the lines
    it finds are a superset, and Hyperscan no longer starts a match at every ``: `` of every line (one
    such head cost half the scan). A pattern anchored at the line start, or whose longest literal is
    shorter than MIN_START_LITERAL, keeps its head: there the head is what keeps hits rare."""
    if not items or items[0][0] == sre.AT:
        return items
    best_start, best_length, start = 0, 0, None
    for index, (op, _av) in enumerate([*items, (None, None)]):
        if op == sre.LITERAL:
            start = index if start is None else start
            continue
        if start is not None and index - start > best_length:
            best_start, best_length = start, index - start
        start = None
    if best_length < MIN_START_LITERAL or not any(_varies(item) for item in items[:best_start]):
        return items
    return items[best_start:]


def _varies(item: Any) -> bool:
    """Whether the item may match texts of different lengths."""
    op, av = item
    if op in REPEATS:
        return bool(av[0] != av[1] or any(_varies(inner) for inner in av[2]))
    if op == sre.SUBPATTERN:
        return any(_varies(inner) for inner in av[3])
    if op == sre.BRANCH:
        return len({_width(alt) for alt in av[1]}) > 1 or any(_varies(i) for alt in av[1] for i in alt)
    if op == ATOMIC_GROUP:
        return any(_varies(inner) for inner in av)
    return op in (sre.GROUPREF, sre.GROUPREF_EXISTS)


def _width(items: Any) -> int:
    """How many single characters the sequence's top level holds (a hint: only speed depends on it)."""
    return sum(1 if op in _CHAR_ATOMS else 0 for op, _av in items)


def _min_width(item: Any) -> int:
    op, av = item
    if op == sre.AT or op in (sre.ASSERT, sre.ASSERT_NOT):
        return 0
    if op in REPEATS:
        return 0 if av[0] == 0 else 1
    if op == sre.SUBPATTERN:
        return max((_min_width(i) for i in av[3]), default=0)
    if op == sre.BRANCH:
        return min((max((_min_width(i) for i in alt), default=0) for alt in av[1]), default=0)
    if op in (sre.GROUPREF, sre.GROUPREF_EXISTS):
        return 0
    if op == ATOMIC_GROUP:
        return max((_min_width(i) for i in av), default=0)
    return 1


class _Emitter:
    """Walks the parsed regex and writes the Hyperscan pattern."""

    def __init__(self, state: Any, flags: int, rank_prefixed: bool, escapes: bool = True) -> None:
        self.state, self.flags, self.rank_prefixed = state, flags, rank_prefixed
        # one character of a prefix the engine strips takes fewer spellings (:data:`PREFIX_ESCAPED`; a run takes
        # them all): kept small, Hyperscan keeps the line-start patterns exact
        self.escapes = escapes

    def sequence(self, items: Any) -> bytes:
        return b"".join(self.item(op, av) for op, av in items)

    def item(self, op: Any, av: Any) -> bytes:
        if op in _CHAR_ATOMS:
            return self.charset(op, av)
        if op == sre.AT:
            return self.at(av)
        if op in REPEATS:
            return self.repeat(*av)
        if op == sre.SUBPATTERN:
            return self.group(av)
        if op == sre.BRANCH:
            return b"(?:" + b"|".join(self.sequence(alt) for alt in av[1]) + b")"
        if op == ATOMIC_GROUP:
            return b"(?:" + self.sequence(av) + b")"
        if op == sre.GROUPREF_EXISTS:
            yes, no = av[1], av[2]
            return b"(?:" + self.sequence(yes) + b"|" + (self.sequence(no) if no else b"") + b")"
        if op == sre.GROUPREF:
            return rb"[^\n]*"  # the text the group matched: some text of the line
        if op in (sre.ASSERT, sre.ASSERT_NOT):
            return b""  # dropping a lookaround only widens
        raise Untranslatable(f"unsupported regex construct {op}")

    def at(self, where: Any) -> bytes:
        if where in _DROPPED_AT:
            return b""
        if where in (sre.AT_BEGINNING, sre.AT_BEGINNING_STRING):
            return line_start(self.rank_prefixed)
        raise Untranslatable(f"unsupported anchor {where}")

    def repeat(self, low: int, high: int, body: Any) -> bytes:
        unbounded = high == sre.MAXREPEAT or high > MAX_EXACT_REPEAT
        items = list(body)
        if unbounded and len(items) == 1 and items[0][0] in _CHAR_ATOMS:
            # a run of characters is a run of their bytes: one class, far cheaper to compile
            inner = _byte_class(self.byte_set(*items[0]))
        else:
            inner = b"(?:" + self.sequence(items) + b")"
        if unbounded:
            return inner + {0: b"*", 1: b"+"}.get(low, b"{%d,}" % low)
        return inner + (b"?" if (low, high) == (0, 1) else b"{%d,%d}" % (low, high))

    def group(self, av: Any) -> bytes:
        _group, add, delete, body = av
        saved = self.flags
        self.flags = (self.flags | add) & ~delete
        try:
            return b"(?:" + self.sequence(body) + b")"
        finally:
            self.flags = saved

    def charset(self, op: Any, av: Any) -> bytes:
        """One character of text: the ASCII bytes it may be, or a high-byte run when it may be a
        non-ASCII character."""
        ascii_bytes, wide = self.ascii_bytes(op, av)
        parts = [_byte_class(ascii_bytes)] if ascii_bytes else []
        parts.extend(_json_escapes(ascii_bytes if self.escapes else ascii_bytes & PREFIX_ESCAPED,
                                   wide and self.escapes))
        if wide:
            parts.append(HIGH_RUN)
        if not parts:
            raise Untranslatable("a character that only a newline can be")
        return parts[0] if len(parts) == 1 else b"(?:" + b"|".join(parts) + b")"

    def byte_set(self, op: Any, av: Any) -> set[int]:
        """Every byte a run of such characters may hold."""
        ascii_bytes, wide = self.ascii_bytes(op, av)
        if wide or ascii_bytes & JSON_ESCAPED:  # a run takes its escapes' bytes too: '\\u003c', '\\"', '\\t'
            ascii_bytes = ascii_bytes | ESCAPE_BYTES
        return ascii_bytes | set(range(128, 256)) if wide else ascii_bytes

    def ascii_bytes(self, op: Any, av: Any) -> tuple[set[int], bool]:
        """The ASCII bytes (never a newline) one character atom matches, and whether it may be a
        non-ASCII character; then NUL joins in, the decoder turns it into U+FFFD."""
        source, wide = _class_source(op, av)
        found = set(_ascii_members(source, self.flags & (re.IGNORECASE | re.ASCII)))
        caseless = bool(self.flags & re.IGNORECASE)
        wide = wide or (caseless and any(chr(c) in CASE_FOLDS_BEYOND_ASCII for c in found))
        return (found | {0} if wide else found), wide


@functools.lru_cache(maxsize=1024)
def _ascii_members(source: str, flags: int) -> frozenset[int]:
    """The ASCII characters but the newline that the one-character regex ``source`` matches."""
    probe = re.compile(source, flags)
    return frozenset(c for c in range(128) if c != 10 and probe.fullmatch(chr(c)))


def _class_source(op: Any, av: Any) -> tuple[str, bool]:
    """Python source of one character atom, and whether it may match a non-ASCII character (case
    folding aside: the caller adds that from the ASCII letters the atom matches)."""
    if op == sre.ANY:
        return "[^\n]", True
    if op == sre.LITERAL:
        return re.escape(chr(av)), av >= 128
    if op == sre.NOT_LITERAL:
        return "[^" + re.escape(chr(av)) + "]", True
    negate, wide, pieces = False, False, []
    for kind, value in av:
        if kind == sre.NEGATE:
            negate = wide = True
        elif kind == sre.LITERAL:
            pieces.append(re.escape(chr(value)))
            wide = wide or value >= 128
        elif kind == sre.RANGE:
            pieces.append(re.escape(chr(value[0])) + "-" + re.escape(chr(value[1])))
            wide = wide or value[1] >= 128
        elif kind == sre.CATEGORY and value in _CATEGORIES:
            pieces.append(_CATEGORIES[value])
            wide = True
        else:
            raise Untranslatable(f"unsupported class item {kind}")
    return "[" + ("^" if negate else "") + "".join(pieces) + "]", wide


def _json_escapes(values: set[int], wide: bool = False) -> list[bytes]:
    """How a JSON writer may spell one of these characters inside a string, as one alternative (none when no
    character needs it): Docker's json-file (Go escapes <, > and & too), journalctl -o json and a logging
    library's JSON lines are decoded before a rule reads them. ``wide``: any character, as \\uXXXX (an astral one
    as its surrogate pair)."""
    forms = []
    letters = {_JSON_LETTER[c] for c in values if c in _JSON_LETTER}
    if letters:
        forms.append(_byte_class(letters))
    if wide:
        forms.append(rb"u[0-9a-fA-F]{4}(?:\x5cu[0-9a-fA-F]{4})?")
    else:
        codes = [_JSON_CODE[c] for c in sorted(values) if c in _JSON_CODE]
        if any(c < 0x20 and c not in _JSON_LETTER for c in values):
            codes.append(rb"[01][0-9a-fA-F]")
        if codes:
            forms.append(b"u00(?:" + b"|".join(codes) + b")")
    return [b"\\x5c(?:" + b"|".join(forms) + b")"] if forms else []


def _byte_class(values: set[int]) -> bytes:
    if len(values) == 1:
        return b"\\x%02x" % next(iter(values))
    spans: list[list[int]] = []
    out = b"["
    for value in sorted(values):
        if spans and value == spans[-1][1] + 1:
            spans[-1][1] = value
        else:
            spans.append([value, value])
    for low, high in spans:
        out += b"\\x%02x" % low if low == high else b"\\x%02x-\\x%02x" % (low, high)
    return out + b"]"


def _prefix_bytes(pattern: str) -> bytes:
    """A prefix that :func:`.ranks.split_rank` strips, as one byte pattern."""
    parsed = sre_parse.parse(pattern, 0)
    return _Emitter(parsed.state, 0, False, escapes=False).sequence(parsed)


@functools.lru_cache(maxsize=2)
def line_start(rank_prefixed: bool) -> bytes:
    """Where a rule's '^' may stand in a line: after a quote marker, and in an application log after whatever
    :func:`.ranks.split_rank` and the log prefixes strip. Made when a pattern first needs it (a start whose
    database is in the cache translates nothing: the parsing here cost ~8 ms of every start at import)."""
    quote = _prefix_bytes(QUOTE_PREFIX_PATTERN)
    if not rank_prefixed:  # a kernel line is read after a quote marker too (extract's _judge)
        return b"^(?:" + quote + b")?"
    ranks = _prefix_bytes(RANK_PREFIX_PATTERN)
    return (b"^(?:\\xef\\xbb\\xbf)?(?:" + quote + b")?(?:" + _prefix_bytes(JSON_WRAPPER_PATTERN) + b")?(?:"
            + _prefix_bytes(SHIPPED_STAMP_PATTERN) + b")?(?:" + _prefix_bytes(COLLECTED_HOST_PATTERN) + b")?(?:"
            + ranks + b")*(?:" + _prefix_bytes(LOG_PREFIX_PATTERN) + b"(?:" + ranks + b")*)?")
