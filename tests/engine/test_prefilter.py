"""The two stages of extraction: the prefilter (engine/prefilter.py) picks the lines worth handing to
the rules (Hyperscan: lines a rule's regex superset matches; ``re``: lines holding any anchor), the
AnchorIndex (engine/extract.py) picks which rules such a line is tested against. A rule the index
leaves out never sees the line, so every anchor must select its own rules, wherever it sits in the
line and whatever other anchor it overlaps; and both prefilters must give the same diagnoses."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from slurm_attrib import canonical
from slurm_attrib.engine import Engine, prefilter
from slurm_attrib.engine.extract import AnchorIndex
from slurm_attrib.ruleset import Match, Rule, load_ruleset
from slurm_attrib.scan import RegexPrefilter, scan_bytes

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
CORPUS = ROOT / "corpus"


def _rule(rule_id: str, *anchors: str) -> Rule:
    return Rule(id=rule_id, version=1, phase="extract", title=rule_id, description="", path=f"{rule_id}.yaml",
                line=1, match=Match(source="app", anchors=anchors, pattern="."))


def _ids(index: AnchorIndex, text: str) -> list[str]:
    return [r.id for r in index.rules_for(text)]


def test_a_hit_selects_the_rules_that_own_its_anchor() -> None:
    index = AnchorIndex([_rule("xid", "NVRM: Xid"), _rule("nccl", "NCCL WARN"), _rule("also_xid", "NVRM: Xid")])
    assert _ids(index, "kernel: NVRM: Xid (PCI:0000:3b:00): 79") == ["xid", "also_xid"]
    assert _ids(index, "training step 100 loss 2.3") == []


def test_rules_come_back_in_rule_order_and_once() -> None:
    index = AnchorIndex([_rule("a", "Xid", "fell off"), _rule("b", "NCCL WARN")])
    assert _ids(index, "NCCL WARN after Xid 79, GPU fell off the bus, Xid again") == ["a", "b"]


def test_anchors_are_case_sensitive_like_the_prefilter() -> None:
    index = AnchorIndex([_rule("xid", "Xid")])
    assert _ids(index, "xid 79") == [] and list(RegexPrefilter([b"Xid"]).hits(b"xid 79", 0, 6)) == []
    assert _ids(index, "Xid 79") == ["xid"]


def test_a_rule_that_ignores_case_has_its_anchors_found_in_any_case() -> None:
    # the NGC banner upper-cases the first letter of CUDA's error string: '[[ System not yet initialized (error 802) ]]'
    folding = replace(_rule("cuda_text", "system not yet initialized"),
                      match=Match(source="app", anchors=("system not yet initialized",), pattern="(?i)system not"))
    index = AnchorIndex([folding, _rule("xid", "Xid")])
    line = "   [[ System not yet initialized (error 802) ]]"
    assert _ids(index, line) == ["cuda_text"] and _ids(index, "xid 79") == []
    hits = RegexPrefilter([b"system not yet initialized", b"Xid"], folded=[b"system not yet initialized"])
    assert len(list(hits.hits(line.encode(), 0, len(line)))) == 1 and not list(hits.hits(b"xid 79", 0, 6))


def test_a_case_folding_anchor_does_not_hide_an_exact_one_it_holds() -> None:
    # a site rule folding case on a longer anchor that starts where a bundled rule's exact one does
    folding = replace(_rule("site_xid", "NVRM: Xid (PCI:0000"),
                      match=Match(source="app", anchors=("NVRM: Xid (PCI:0000",), pattern="(?i)nvrm"))
    index = AnchorIndex([_rule("xid", "NVRM: Xid"), folding])
    assert _ids(index, "NVRM: Xid (PCI:0000:3b:00): 79") == ["xid", "site_xid"]
    assert _ids(index, "nvrm: xid (pci:0000:3b:00): 79") == ["site_xid"]


def test_an_anchor_inside_a_longer_one_selects_its_rules_too() -> None:
    index = AnchorIndex([_rule("nccl", "NCCL"), _rule("warn", "WARN"), _rule("nccl_warn", "NCCL WARN")])
    assert _ids(index, "node-03:1:2 [2] NCCL WARN Call to ibv_poll_cq failed") == ["nccl", "warn", "nccl_warn"]


def test_anchors_that_overlap_without_nesting_both_select_their_rules() -> None:
    # the end of one anchor is the start of the next: both rules must see the line
    index = AnchorIndex([_rule("ib", "NET/IB: Unable to"), _rule("nvml", "Unable to determine the device handle")])
    assert _ids(index, "NET/IB: Unable to determine the device handle for GPU 3") == ["ib", "nvml"]


def test_an_anchor_that_ends_a_line_is_found_without_its_newline() -> None:
    assert _ids(AnchorIndex([_rule("eol", "Killed\n")]), "srun: error: task 3: Killed") == ["eol"]


def test_the_order_of_anchors_does_not_change_the_selection() -> None:
    rules = [_rule("a", "Xid", "NCCL WARN"), _rule("b", "WARN", "Xid 79")]
    flipped = [_rule(r.id, *reversed(r.match.anchors)) for r in rules if r.match]
    text = "Xid 79 then NCCL WARN"
    assert _ids(AnchorIndex(rules), text) == _ids(AnchorIndex(flipped), text) == ["a", "b"]


def _shipped_anchors() -> dict[str, list[tuple[Rule, str]]]:
    by_source: dict[str, list[tuple[Rule, str]]] = defaultdict(list)
    for rule in load_ruleset(include_site=False).rules:
        if rule.match:
            by_source[rule.match.source].extend((rule, anchor) for anchor in rule.match.anchors)
    return dict(sorted(by_source.items()))


@pytest.mark.parametrize("source", sorted(_shipped_anchors()))
def test_every_shipped_anchor_selects_its_rule_even_after_an_overlapping_one(source: str) -> None:
    pairs = _shipped_anchors()[source]
    index = AnchorIndex(sorted({r.id: r for r, _ in pairs}.values(), key=lambda r: r.id))
    for rule, anchor in pairs:
        text = anchor.rstrip("\n")
        assert rule in index.rules_for(f"x {text} y"), (rule.id, anchor)
        for _, other in pairs:  # glued behind every other anchor that ends with its first letter
            other = other.rstrip("\n")
            if other and other[-1] == text[0]:
                assert rule in index.rules_for(other + text[1:]), (rule.id, other, anchor)


def test_the_fallback_is_forced_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_ATTRIB_PREFILTER", "re")
    assert isinstance(prefilter.build([_rule("xid", "Xid")]), RegexPrefilter)
    assert list(prefilter.build([]).hits(b"Xid\n", 0, 4)) == []


def test_hyperscan_names_the_rule_whose_regex_the_line_may_match() -> None:
    hyperscan = pytest.importorskip("hyperscan")
    rules = [_rule("ok", "nfs: server"), _rule("down", "nfs: server")]
    rules = [replace(rules[0], match=replace(rules[0].match, pattern=r"nfs: server \S+ OK")),
             replace(rules[1], match=replace(rules[1].match, pattern=r"nfs: server \S+ not responding"))]
    fast = prefilter.HyperscanPrefilter(hyperscan, rules)
    data = b"nfs: server a OK\nnfs: server b not responding\nnfs: server c\n"
    assert list(fast.hits(data, 0, len(data))) == [(15, 0), (44, 1)]


def test_a_start_that_finds_its_database_on_disk_translates_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    ) -> None:
    """The cache key is made of the rules' own text, so the 80 ms translation runs on a miss only; a
    changed regex misses."""
    hyperscan = pytest.importorskip("hyperscan")
    monkeypatch.setenv("SLURM_ATTRIB_CACHE_DIR", str(tmp_path / "cache"))
    rules = [_rule("down", "nfs: server")]
    rules = [replace(rules[0], match=replace(rules[0].match, pattern=r"nfs: server \S+ not responding"))]
    monkeypatch.setattr(prefilter, "_DATABASES", {})
    prefilter.HyperscanPrefilter(hyperscan, rules)  # compiles and stores
    translated: list[str] = []
    real = prefilter.rule_patterns
    monkeypatch.setattr(prefilter, "rule_patterns", lambda rule: translated.append(rule.id) or real(rule))
    monkeypatch.setattr(prefilter, "_DATABASES", {})  # a new process
    warm = prefilter.HyperscanPrefilter(hyperscan, rules)
    assert translated == [] and list(warm.hits(b"nfs: server b not responding\n", 0, 29)) == [(27, 0)]
    changed = [replace(rules[0], match=replace(rules[0].match, pattern=r"nfs: server \S+ not OK"))]
    prefilter.HyperscanPrefilter(hyperscan, changed)
    assert translated == ["down"]


def test_a_regex_bytes_cannot_express_falls_back_on_its_anchors() -> None:
    rule = _rule("empty", "Xid", "GPU lost\n")
    assert rule.match is not None
    rule = replace(rule, match=replace(rule.match, pattern=r"(?:x)?"))
    assert prefilter.rule_patterns(rule)[0] == prefilter.anchor_pattern(rule)


def test_a_rule_selected_by_an_anchor_that_ends_a_line_needs_that_line_end() -> None:
    """``Error\\n`` lets a rule try a line that ends with ``Error`` (or holds any other anchor), not
    one that merely holds the word: the Hyperscan path asks the line's bytes, as the anchors did. A line
    written with CRLF ends there too, and so does the file's last line when it lacks its newline (a log
    cut off, or pasted): the traceback's last line is the one that names the exception."""
    index = AnchorIndex([_rule("exc", "Error\n", "Error: ")])
    seen: list[list[str]] = []
    data = b"ValueError\nValueError\r\nmid Error word\nKeyError"
    scan_bytes(data, _Named(), lambda line: seen.append([r.id for r in index.candidates(line, line.text)]))
    assert seen == [["exc"], ["exc"], [], ["exc"]]


class _Named:
    """A prefilter that names rule 0 on every line, as Hyperscan does when a rule's regex may match."""

    def hits(self, data: bytes, start: int, end: int) -> Iterator[tuple[int, int]]:
        pos = start
        while pos < end:
            yield pos, 0
            nl = data.find(b"\n", pos, end)
            pos = end if nl < 0 else nl + 1


def _bundles() -> list[Path]:
    golden = sorted(p / "bundle" for p in GOLDEN.iterdir() if (p / "bundle" / "job.yaml").is_file())
    return golden + sorted(p for p in CORPUS.iterdir() if (p / "job.yaml").is_file())


def test_both_prefilters_give_byte_identical_diagnoses(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every golden bundle and every corpus case: the same JSON with Hyperscan and with ``re``."""
    pytest.importorskip("hyperscan")
    fast = Engine(load_ruleset(include_site=False))
    monkeypatch.setenv("SLURM_ATTRIB_PREFILTER", "re")
    slow = Engine(load_ruleset(include_site=False))
    assert not isinstance(fast.extractor.prefilters["app"], RegexPrefilter)
    assert isinstance(slow.extractor.prefilters["app"], RegexPrefilter)
    bundles = _bundles()
    assert len(bundles) > 150
    for bundle in bundles:
        assert canonical.dumps(fast.diagnose(bundle).to_dict()) == canonical.dumps(slow.diagnose(bundle).to_dict()), \
            bundle


def test_the_run_counts_hits_and_symptoms_for_the_benchmarks(engine: Engine) -> None:
    """``Engine.run(bundle).scan``: lines handed to the rules and symptoms made of them (not in the JSON)."""
    ctx = engine.run(GOLDEN / "02_xid79_fallen_off_bus" / "bundle")
    assert ctx.scan.symptoms == sum(c.symptoms for c in ctx.coverage.values()) >= ctx.scan.symptom_lines > 0
    assert ctx.scan.hits >= ctx.scan.symptom_lines
    assert ctx.scan.lines == sum(c.lines for c in ctx.coverage.values())
