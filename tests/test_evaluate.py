"""The scorer: what counts as right, what counts as a false accusation, bad labels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from slurm_attrib.evaluate import CaseError, Report, load_case, render, score
from slurm_attrib.model import Diagnosis, JobFacts, Symptom


def diag(status: str, category: str, responsible: str, culprits: list[str], gpu: Any = None,
         candidates: tuple[str, ...] = ()) -> Diagnosis:
    root = Symptom(kind="x", rule_id="t", node=culprits[0] if culprits else None, time=None, evidence=[], gpu=gpu,
                   category=category)
    cands = [Symptom(kind="x", rule_id="t", node=None, time=None, evidence=[], category=c) for c in candidates]
    return Diagnosis(job=JobFacts(job_id="1"), status=status, category=category, responsible=responsible,
                     root_cause=root if status == "attributed" else None, culprit_nodes=culprits, supporting=[],
                     candidates=cands, evidence=[], rules_fired=[], coverage=[], recommended_actions=[], ruleset={},
                     engine_version="t", summary="s")


def case(tmp_path: Path, text: str) -> Any:
    folder = tmp_path / "c1"
    folder.mkdir()
    (folder / "case.yaml").write_text(text)
    return load_case(folder)


GPU_CASE = """family: gpu_xid
label: {status: attributed, category: gpu_hardware, responsible: infrastructure, culprit_nodes: [n1],
        culprit_gpu: "0000:3B:00"}
"""


def test_right_needs_status_category_and_culprits(tmp_path: Path) -> None:
    c = case(tmp_path, GPU_CASE)
    assert score(c, diag("attributed", "gpu_hardware", "infrastructure", ["n1"], "0000:3b:00")).right
    assert not score(c, diag("attributed", "gpu_memory", "infrastructure", ["n1"])).right
    assert not score(c, diag("unattributed", "unknown", "unknown", [])).right


def test_blaming_another_node_or_gpu_is_a_false_accusation(tmp_path: Path) -> None:
    c = case(tmp_path, GPU_CASE)
    assert score(c, diag("attributed", "gpu_hardware", "infrastructure", ["n2"])).false_accusation
    assert score(c, diag("attributed", "gpu_hardware", "infrastructure", ["n1"], "0000:07:00")).false_accusation
    assert not score(c, diag("attributed", "application", "workload", [])).false_accusation


def test_workload_label_blames_nothing(tmp_path: Path) -> None:
    c = case(tmp_path, "family: gpu_oom\nlabel: {status: attributed, category: gpu_oom, responsible: workload}\n")
    assert score(c, diag("attributed", "gpu_oom", "workload", [])).right
    result = score(c, diag("attributed", "gpu_hardware", "infrastructure", ["n1"]))
    assert not result.right and result.false_accusation


def test_accepted_alternative_and_ambiguous_candidates(tmp_path: Path) -> None:
    c = case(tmp_path, """family: ambiguous
label: {status: ambiguous, candidates: [gpu_hardware, application]}
accepted_alternatives:
  - {status: attributed, category: gpu_hardware, culprit_nodes: [n1], why: the thread's finding}
""")
    assert score(c, diag("ambiguous", "unknown", "unknown", [], candidates=("application", "gpu_hardware"))).right
    assert not score(c, diag("ambiguous", "unknown", "unknown", [], candidates=("application",))).right
    alt = score(c, diag("attributed", "gpu_hardware", "infrastructure", ["n1"]))
    assert alt.right and not alt.false_accusation


def test_report_counts_and_renders(tmp_path: Path) -> None:
    c = case(tmp_path, GPU_CASE)
    report = Report([score(c, diag("unattributed", "unknown", "unknown", []))])
    assert report.accuracy == 0.0 and report.unattributed_rate == 1.0
    assert report.confusion() == {"gpu_hardware": {"(unattributed)": 1}}
    assert "WRONG c1" in render(report)


@pytest.mark.parametrize("text", ["family: x\n", "family: x\nlabel: {status: maybe}\n",
                                  "family: x\nlabel: {status: attributed}\n",
                                  "family: x\nlabel: {status: attributed, category: cosmic_rays}\n"])
def test_bad_labels_are_case_errors(tmp_path: Path, text: str) -> None:
    with pytest.raises(CaseError):
        case(tmp_path, text)
