"""The golden cases of the core issue: each bundle under tests/golden/<case>/ must get the verdict
its expect.yaml states. Every case carries its own bundle: a case without one fails, it does not
borrow another bundle."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from slurm_attrib.data import demo_bundle
from slurm_attrib.engine import Engine

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
CASES = sorted(p.name for p in GOLDEN.iterdir() if (p / "expect.yaml").exists()) if GOLDEN.is_dir() else []


def _bundle(case: str) -> Path:
    path = GOLDEN / case / "bundle"
    assert (path / "job.yaml").is_file(), f"{case}: no bundle/job.yaml next to expect.yaml"
    return path


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_there_are_golden_cases() -> None:
    assert len(CASES) >= 13


def test_every_case_has_its_own_bundle() -> None:
    assert [c for c in CASES if not (GOLDEN / c / "bundle" / "job.yaml").is_file()] == []


def test_the_demo_is_golden_case_01() -> None:
    """``slurm-attrib demo`` shows case 01: the shipped copy must not drift from the tested one."""
    assert _files(demo_bundle()) == _files(GOLDEN / "01_nvlink_xid149" / "bundle")


@pytest.mark.parametrize("case", CASES)
def test_golden_verdict(engine: Engine, case: str) -> None:
    expect: dict[str, Any] = yaml.safe_load((GOLDEN / case / "expect.yaml").read_text())
    diag = engine.diagnose(_bundle(case))
    got = diag.to_dict()
    assert diag.status == expect["status"], diag.summary
    assert diag.category == expect["category"], diag.summary
    assert diag.responsible == expect["responsible"], diag.summary
    assert sorted(diag.culprit_nodes) == sorted(expect["culprit_nodes"]), diag.summary
    root = diag.root_cause
    if "root_kind" in expect:
        assert root is not None and root.kind == expect["root_kind"], diag.summary
    if "root_node" in expect:
        assert root is not None and root.node == expect["root_node"]
    if "root_gpu" in expect:
        assert root is not None and root.gpu == expect["root_gpu"]
    if "root_rank" in expect:
        assert root is not None and root.rank == expect["root_rank"]
    if "supporting_min" in expect:
        assert len(diag.supporting) >= expect["supporting_min"], [s.summary for s in diag.supporting]
    if "candidate_nodes" in expect:
        assert sorted({c.node for c in diag.candidates}) == sorted(expect["candidate_nodes"])
    if root is not None:
        assert root.evidence and root.evidence[0].raw, "a verdict cites its raw line"
        assert got["evidence"][0]["raw"] == root.evidence[0].raw


@pytest.mark.parametrize("case", CASES)
def test_no_rule_after_the_filter_phase_drops_a_symptom(engine: Engine, case: str) -> None:
    """``active()`` is taken once when the filter phase ends (EngineContext.filtered): a later rule that
    dropped a symptom would go unseen, so none may."""
    ctx = engine.run(_bundle(case))
    assert [id(s) for s in ctx.active()] == [id(s) for s in ctx.symptoms if s.dropped is None]
