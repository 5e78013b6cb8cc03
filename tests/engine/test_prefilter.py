"""The two anchor stages of extraction: the prefilter (engine/prefilter.py) picks the lines that hold
any anchor, the AnchorIndex (engine/extract.py) picks which rules such a line is tested against. A
rule the index leaves out never sees the line, so every anchor must select its own rules, wherever
it sits in the line and whatever other anchor it overlaps."""

from __future__ import annotations

import re
from collections import defaultdict

import pytest

from slurm_attrib.engine import prefilter
from slurm_attrib.engine.extract import AnchorIndex
from slurm_attrib.ruleset import Match, Rule, load_ruleset
from slurm_attrib.scan import Prefilter, RegexPrefilter


def _rule(rule_id: str, *anchors: str) -> Rule:
    return Rule(id=rule_id, version=1, phase="extract", title=rule_id, description="", path=f"{rule_id}.yaml",
                line=1, match=Match(source="app", anchors=anchors, regex=re.compile(".")))


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
    assert _ids(index, "xid 79") == [] and list(RegexPrefilter([b"Xid"]).positions(b"xid 79", 0, 6)) == []
    assert _ids(index, "Xid 79") == ["xid"]


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


def _hit_lines(chosen: Prefilter, data: bytes) -> set[int]:
    positions = list(chosen.positions(data, 0, len(data)))
    assert positions == sorted(positions)
    return {data.count(b"\n", 0, pos) for pos in positions}


def _sample(anchors: list[bytes]) -> bytes:
    """A line without an anchor, then one line around each anchor (an anchor ending in a newline ends
    its line), then every anchor glued together."""
    around = [b"ts " + (a[:-1] if a.endswith(b"\n") else a + b" tail") for a in anchors]
    lines = [b"training step 100 loss 2.3", *around, b"".join(a.rstrip(b"\n") for a in anchors)]
    return b"\n".join(lines) + b"\n"


def test_the_fallback_is_forced_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_ATTRIB_PREFILTER", "re")
    assert isinstance(prefilter.build([b"Xid"]), RegexPrefilter)
    assert list(prefilter.build([]).positions(b"Xid\n", 0, 4)) == []


@pytest.mark.parametrize("source", sorted(_shipped_anchors()))
def test_hyperscan_and_the_fallback_pick_the_same_lines(source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    hyperscan = pytest.importorskip("hyperscan")
    anchors = [a.encode() for _, a in _shipped_anchors()[source]]
    data = _sample(anchors)
    fast = prefilter.HyperscanPrefilter(hyperscan, anchors)
    monkeypatch.setenv("SLURM_ATTRIB_PREFILTER", "re")
    assert _hit_lines(fast, data) == _hit_lines(prefilter.build(anchors), data) == set(range(1, len(anchors) + 2))
