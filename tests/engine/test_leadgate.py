"""A gated regex must find exactly what its pattern finds (same spans, same groups) wherever it searches: the
gate only lets ``re`` skip positions no match can begin at. Checked with every rule's regex and the engine's own
hot patterns on corpus lines, on each line's every suffix, and on case folds beyond ASCII. A screened one too: the
screen only passes over a text that holds none of the literals every match holds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from slurm_attrib.engine import extract
from slurm_attrib.engine.leadgate import Screened, gated, needed_literals
from slurm_attrib.ruleset import load_ruleset

ROOT = Path(__file__).resolve().parents[2]
ENGINE_PATTERNS = [v for v in vars(extract).values() if isinstance(v, re.Pattern) and isinstance(v.pattern, str)]


def _corpus_lines(limit: int = 4000) -> list[str]:
    lines: list[str] = []
    for path in sorted((ROOT / "corpus").glob("*/*/*.log"))[:400]:
        lines.extend(path.read_text(errors="replace").splitlines()[:20])
    return sorted(set(lines))[:limit]


LINES = [
    *_corpus_lines(),
    'Nov 20 08:05:00 node-001 kernel: [86700.0] audit: type=1400 audit(1795177954.850:367): comm="x"',
    "kernel: traps: python3[4242] general protection fault ip:7f",
    "K\u212aelvin \u0130stanbul \u017fegfault",  # letters that fold to ASCII under IGNORECASE
    "",
]


def _found(regex: re.Pattern[str], text: str) -> list[tuple[tuple[int, int], tuple[object, ...], dict[str, object]]]:
    return [(m.span(), m.groups(), m.groupdict()) for m in regex.finditer(text)]


@pytest.mark.parametrize("regex", [r.match.regex for r in load_ruleset(include_site=False).rules if r.match]
                         + ENGINE_PATTERNS, ids=lambda r: r.pattern[:40])
def test_gated_finds_what_the_pattern_finds(regex: re.Pattern[str]) -> None:
    gate = gated(regex)
    for line in LINES:
        assert _found(gate, line) == _found(regex, line), line
        assert bool(gate.match(line, 3)) == bool(regex.match(line, 3))


def test_gate_bounds_the_first_character_through_zero_width_items_and_optional_heads() -> None:
    assert gated(re.compile(r"\bcomm=|\baudit[:(]")).pattern.startswith("(?=[ac])")
    assert gated(re.compile(r"(?i)(?:\s+|x)?y\d")).pattern == r"(?=[\sxy])(?:(?:\s+|x)?y\d)"
    assert gated(re.compile(r"\d+ms", re.VERBOSE)).flags & re.VERBOSE


def test_a_verbose_pattern_with_a_trailing_comment_is_gated() -> None:
    regex = re.compile("abc  # a comment", re.VERBOSE)
    assert _found(gated(regex), "xxabcx") == _found(regex, "xxabcx") != []


@pytest.mark.parametrize("pattern", [r".x", r"[^a]b", r"a*", r"(?:x|)", r"\Bq|\Wz", r"(?i:error)", r"\b(?i:comm)="])
def test_a_pattern_no_class_bounds_is_given_back_unchanged(pattern: str) -> None:
    regex = re.compile(pattern)
    assert gated(regex) is regex


def test_the_gate_speeds_the_search_that_motivated_it() -> None:
    """The kernel-trust check's pattern (twenty-odd branches behind \\b) is gated where it is defined."""
    assert extract._COPIES_USER_TEXT.pattern.startswith("(?=[")


def test_the_extractor_searches_with_each_rules_gated_regex_and_screened_exclude(tmp_path: Path) -> None:
    """A rule's regex is searched behind its gate and its exclude screened, both made on the rule's first candidate
    line: app.cuda_error's twenty branches are otherwise tried at every position before a match at the end of a
    long line."""
    from slurm_attrib.engine import Engine

    (tmp_path / "applog").mkdir()
    (tmp_path / "job.yaml").write_text("job_id: '77'\nnodes: [node-01]\nstate: FAILED\nexit_code: '1:0'\n"
                                       "start: 2026-11-20T10:00:00Z\nend: 2026-11-20T11:00:00Z\n")
    line = ("[rank3]:[E1120 10:30:03.003000 ProcessGroupNCCL.cpp:1485] [PG 0 Rank 3] Process group watchdog thread "
            "terminated with exception: CUDA error: an illegal memory access was encountered")
    (tmp_path / "applog" / "node-01.log").write_text(line + "\n")
    engine = Engine(load_ruleset(include_site=False))
    assert engine.extractor.searchers == {}  # nothing compiled at start
    ctx = engine.run(tmp_path)
    rule = engine.ruleset.get("app.cuda_error")
    assert rule is not None and rule.match is not None
    searcher, exclude = engine.extractor.searchers["app.cuda_error"]
    assert searcher.pattern.startswith("(?=[") and _found(searcher, line) == _found(rule.match.regex, line) != []
    assert exclude is not None and exclude.literals is not None  # its exclude is screened on its literals
    assert any(s.rule_id == "app.cuda_error" and s.fields.get("error") == "an illegal memory access was encountered"
               for s in ctx.symptoms)


EXCLUDES = [r.match.exclude for r in load_ruleset(include_site=False).rules if r.match and r.match.exclude]


def _negative_fixture_lines(limit: int = 6000) -> list[str]:
    """The lines of the rules' negative fixtures: where their excludes fire."""
    lines: set[str] = set()
    for path in sorted((ROOT / "tests" / "rules").glob("*/negative/*.yaml")):
        files = (yaml.safe_load(path.read_text()) or {}).get("files") or {}
        for text in files.values():
            lines.update(str(text).splitlines()[:40])
    return sorted(lines)[:limit]


EXCLUDED_LINES = _negative_fixture_lines()


@pytest.mark.parametrize("regex", [r.match.regex for r in load_ruleset(include_site=False).rules if r.match]
                         + EXCLUDES + ENGINE_PATTERNS, ids=lambda r: r.pattern[:40])
def test_screened_finds_what_the_pattern_finds(regex: re.Pattern[str]) -> None:
    """A screened search gives the pattern's own first match (span, groups), or None where the pattern finds none:
    on corpus lines, the rules' negative fixtures (where excludes fire) and lines made of each needed literal."""
    screen = Screened(regex)
    for line in LINES + EXCLUDED_LINES + [f"x {literal} y" for literal in screen.literals or ()]:
        mine, theirs = screen.search(line), regex.search(line)
        assert (mine and (mine.span(), mine.groups())) == (theirs and (theirs.span(), theirs.groups())), line


def test_most_rule_excludes_are_screened() -> None:
    """The screen applies where every alternative holds a literal of three characters or more (in a group it cannot
    skip too): the excludes are lists of words."""
    screened = [regex.pattern for regex in EXCLUDES if needed_literals(regex)]
    assert len(screened) >= 0.8 * len(EXCLUDES)


@pytest.mark.parametrize(("pattern", "literals"), [
    (r"\bUCX\b|[Mm]unge|cgroup\.procs", ("UCX", "cgroup.procs", "unge")),
    (r"\b(?:inotify|fsnotify)[^\n]{0,80}x", ("fsnotify", "inotify")),
    (r"(?:ab)+c|quux", None),  # '(?:ab)+c' holds no run of three
    (r"(?:abc)+d|qux", ("abc", "qux")),
    (r"(?i)error|fatal", None),  # a pattern that ignores case is not screened
    (r"(?i:error)|fatal", None),  # nor an alternative whose group folds case
    (r"x|", None),  # an empty alternative holds nothing
])
def test_needed_literals(pattern: str, literals: object) -> None:
    assert needed_literals(re.compile(pattern)) == literals


@pytest.mark.parametrize("pattern", [r"(?#c)(?i)\babc", "(?x) (?i) \\babc", "(?x)\n  (?i) \\bfoo  # note",
                                     r"(?#noise)(?i)\bscratch2"])
def test_global_flags_after_a_comment_or_a_verbose_blank_keep_the_pattern(pattern: str) -> None:
    """Python takes global flags after a comment or verbose white space at a pattern's start, not inside the gate's
    group: such a pattern (a site rule may be written so) is searched as it is, never refused."""
    regex = re.compile(pattern)
    assert gated(regex) is regex
    text = "x ABC SCRATCH2 FOO"
    found, screened = regex.search(text), Screened(regex).search(text)
    assert found is not None and screened is not None and screened.span() == found.span()


@pytest.mark.parametrize(("pattern", "gate"), [
    (r"(?<=/)[^\s:]{0,200}: I/O error", r"(?<=[\U0000002f])"),
    (r"\b(?<=/)[^\s:]+x", r"(?<=[\U0000002f])"),  # among the leading zero-width items
    (r"abc|(?<=/)[^\s:]+x", r"(?=(?=[a])|(?<=[\U0000002f]))"),
    (r"(?<=ab|c[de])[^x]+", r"(?<=[bde])"),  # the last character of each of its alternatives
    (r"(?<=/)x?", r"(?<=[\U0000002f])"),  # even an empty match is after the slash
    (r"(?:(?<=/)[^a]+)?y", r"(?=(?=[y])|(?<=[\U0000002f]))"),  # the group may match nothing: then y begins it
    (r"(?<=/)abc", r"(?=[a])"),  # what it begins with bounds it already
    (r"(?i)(?<=k)[^x]+|s", r"(?=(?=[s])|(?<=[k]))"),  # folded alike: K, the Kelvin sign, long s
    ("(?x) (?<= / ) [^a]+  # a comment", r"(?<=[\U0000002f])"),
])
def test_a_look_behind_bounds_a_match_no_class_does(pattern: str, gate: str) -> None:
    regex = re.compile(pattern)
    gated_regex = gated(regex)
    assert gated_regex.pattern.startswith(gate + "(?:")
    for text in ("/abc: I/O error", "x/y/zz: I/O error", "a/bx cdx abx /", "/", "//x", "ab/ y /y xy", "abc/abc",
                 "\u212a\u017f k/K y", "\u017f/Kx"):
        for start in range(len(text) + 1):  # from ``start`` in the whole text: its look-behind sees what is before
            assert [(m.span(), m.groups()) for m in gated_regex.finditer(text, start)] \
                == [(m.span(), m.groups()) for m in regex.finditer(text, start)], (pattern, text, start)
            found, expected = gated_regex.match(text, start), regex.match(text, start)
            assert (found and (found.span(), found.groups())) == (expected and (expected.span(), expected.groups()))


def test_app_storage_errno_is_gated_on_its_slash_and_a_position_is_tried_once() -> None:
    """Its branch for a path's 'name: I/O error' begins with a negated class after a look-behind on '/': it used to
    leave the whole twenty-two-branch pattern ungated. Where the next character may begin a branch and the one
    before may end the look-behind, a pattern that then fails is not run a second time by backtracking into the
    gate: the two are one look-ahead."""
    rule = load_ruleset(include_site=False).get("app.storage_errno")
    assert rule is not None and rule.match is not None
    pattern = gated(rule.match.regex).pattern
    assert pattern.startswith("(?=(?=[") and "|(?<=[\\U0000002f]))(?:" in pattern


@pytest.mark.parametrize("pattern", [r"x?(?<=/)[^a]", r"(?<=[^a])[^b]", r"(?<=a\b)[^b]", r"(?<=(?i:a))[^b]",
                                     r"(?<!/)[^a]"])
def test_a_look_behind_that_bounds_nothing_leaves_the_pattern_ungated(pattern: str) -> None:
    """After a character the match may begin with, on a class that is no class of members, ending zero-width, with
    flags of its own, or negative: no gate."""
    regex = re.compile(pattern)
    assert gated(regex) is regex
