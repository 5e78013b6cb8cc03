"""A gated regex must find exactly what its pattern finds (same spans, same groups) wherever it searches: the
gate only lets ``re`` skip positions no match can begin at. Checked with every rule's regex and the engine's own
hot patterns on corpus lines, on each line's every suffix, and on case folds beyond ASCII."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from slurm_attrib.engine import extract
from slurm_attrib.engine.leadgate import gated
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


def test_the_extractor_searches_with_each_rules_gated_regex(tmp_path: Path) -> None:
    """A rule's regex is searched behind its gate, compiled on the rule's first candidate line: app.cuda_error's
    twenty branches are otherwise tried at every position before a match at the end of a long line."""
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
    searcher = engine.extractor.searchers["app.cuda_error"]
    assert searcher.pattern.startswith("(?=[") and _found(searcher, line) == _found(rule.match.regex, line) != []
    assert any(s.rule_id == "app.cuda_error" and s.fields.get("error") == "an illegal memory access was encountered"
               for s in ctx.symptoms)
