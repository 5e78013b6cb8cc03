"""Scoring the engine on a labelled corpus (``corpus/``, see corpus/README.md).

Each case is an evidence bundle with a ``case.yaml`` label. :func:`evaluate` diagnoses every case and
compares the verdict with the label: right or wrong, and whether it is a *false accusation* (an
infrastructure verdict blaming a node or GPU that neither the label nor an accepted alternative blames),
the worst error this tool can make. The report is plain data; ordering is by case id.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import yaml

from .errors import AttribError
from .model import CATEGORIES, STATUSES, Diagnosis

CASE_FILE = "case.yaml"
UNATTRIBUTED = "(unattributed)"


class CaseError(AttribError):
    """A case.yaml that is missing keys or uses values outside the vocabulary."""


@dataclass(frozen=True)
class Label:
    """What a verdict must say to be right (one label or one accepted alternative)."""

    status: str
    category: Optional[str] = None
    culprit_nodes: Optional[frozenset[str]] = None
    culprit_gpu: Optional[str] = None
    candidates: frozenset[str] = frozenset()

    def matches(self, diag: Diagnosis) -> bool:
        if diag.status != self.status:
            return False
        if self.category is not None and self.status != "unattributed" and diag.category != self.category \
                and not (self.status == "ambiguous" and self.candidates):
            return False
        if self.status == "attributed" and self.culprit_nodes is not None \
                and frozenset(diag.culprit_nodes) != self.culprit_nodes:
            return False
        return self.candidates <= {c.category for c in diag.candidates}


@dataclass(frozen=True)
class Case:
    """One corpus case: its bundle directory, family and labels."""

    id: str
    path: Path
    family: str
    label: Label
    alternatives: tuple[Label, ...]
    misleading: bool
    confidence: str

    def blamed_nodes(self) -> frozenset[str]:
        nodes: set[str] = set()
        for label in (self.label, *self.alternatives):
            nodes |= label.culprit_nodes or frozenset()
        return frozenset(nodes)

    def blamed_gpus(self) -> frozenset[str]:
        return frozenset(g for g in (self.label.culprit_gpu, *(a.culprit_gpu for a in self.alternatives)) if g)


@dataclass(frozen=True)
class CaseResult:
    case: Case
    status: str
    category: str
    culprit_nodes: tuple[str, ...]
    culprit_gpu: Optional[str]
    right: bool
    false_accusation: bool
    summary: str

    def to_dict(self) -> dict[str, Any]:
        label = self.case.label
        return {
            "id": self.case.id,
            "family": self.case.family,
            "expected": {"status": label.status, "category": label.category,
                         "culprit_nodes": sorted(label.culprit_nodes or ())},
            "got": {"status": self.status, "category": self.category, "culprit_nodes": list(self.culprit_nodes),
                    "culprit_gpu": self.culprit_gpu},
            "right": self.right,
            "false_accusation": self.false_accusation,
            "summary": self.summary,
        }


@dataclass
class Report:
    results: list[CaseResult] = field(default_factory=list)

    @property
    def right(self) -> int:
        return sum(r.right for r in self.results)

    @property
    def accuracy(self) -> float:
        return self.right / len(self.results) if self.results else 0.0

    @property
    def false_accusations(self) -> list[CaseResult]:
        return [r for r in self.results if r.false_accusation]

    @property
    def unattributed_rate(self) -> float:
        if not self.results:
            return 0.0
        return sum(r.status == "unattributed" for r in self.results) / len(self.results)

    def by_family(self) -> dict[str, tuple[int, int]]:
        out: dict[str, tuple[int, int]] = {}
        for res in self.results:
            right, total = out.get(res.case.family, (0, 0))
            out[res.case.family] = (right + res.right, total + 1)
        return dict(sorted(out.items()))

    def confusion(self) -> dict[str, dict[str, int]]:
        """Expected category → verdict category → count (unattributed as its own column)."""
        counts: Counter[tuple[str, str]] = Counter()
        for res in self.results:
            expected = _column(res.case.label.status, res.case.label.category)
            counts[(expected, _column(res.status, res.category))] += 1
        out: dict[str, dict[str, int]] = {}
        for (expected, got), n in sorted(counts.items()):
            out.setdefault(expected, {})[got] = n
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "cases": len(self.results),
            "right": self.right,
            "accuracy": round(self.accuracy, 4),
            "false_accusations": [r.case.id for r in self.false_accusations],
            "unattributed_rate": round(self.unattributed_rate, 4),
            "by_family": {f: {"right": r, "total": t} for f, (r, t) in self.by_family().items()},
            "confusion": self.confusion(),
            "results": [r.to_dict() for r in self.results],
        }


def _column(status: str, category: Optional[str]) -> str:
    if status == "unattributed":
        return UNATTRIBUTED
    if status == "ambiguous":
        return f"ambiguous:{category or 'unknown'}"
    return category or "unknown"


def _label(data: Any, where: str, *, partial: bool = False) -> Label:
    if not isinstance(data, dict):
        raise CaseError(f"{where}: a label must be a mapping")
    status = data.get("status")
    if status not in STATUSES:
        raise CaseError(f"{where}: status must be one of {', '.join(STATUSES)}, not {status!r}")
    category = data.get("category")
    if category is not None and category not in CATEGORIES:
        raise CaseError(f"{where}: unknown category {category!r}")
    if status == "attributed" and category is None and not partial:
        raise CaseError(f"{where}: an attributed label needs a category")
    nodes = data.get("culprit_nodes")
    if nodes is not None and not isinstance(nodes, list):
        raise CaseError(f"{where}: culprit_nodes must be a list")
    candidates = data.get("candidates") or []
    unknown = [c for c in candidates if c not in CATEGORIES]
    if unknown:
        raise CaseError(f"{where}: unknown candidate categories {unknown}")
    gpu = data.get("culprit_gpu")
    return Label(status=status, category=category,
                 culprit_nodes=frozenset(str(n) for n in nodes) if nodes is not None
                 else (None if partial else frozenset()),
                 culprit_gpu=str(gpu).lower() if gpu else None, candidates=frozenset(candidates))


def load_case(path: Path) -> Case:
    """Read ``path/case.yaml``; raises CaseError with the file named when it is not a valid label."""
    where = str(path / CASE_FILE)
    try:
        data = yaml.safe_load((path / CASE_FILE).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise CaseError(f"{where}: {exc}") from exc
    if not isinstance(data, dict) or "label" not in data or "family" not in data:
        raise CaseError(f"{where}: needs 'family' and 'label'")
    alternatives = tuple(_label(alt, f"{where}: accepted_alternatives[{i}]", partial=True)
                         for i, alt in enumerate(data.get("accepted_alternatives") or []))
    return Case(id=path.name, path=path, family=str(data["family"]), label=_label(data["label"], where),
                alternatives=alternatives, misleading=bool(data.get("misleading", False)),
                confidence=str(data.get("confidence", "")))


def load_cases(root: Path) -> list[Case]:
    """Every case folder under ``root`` (a folder holding case.yaml), by name."""
    if not root.is_dir():
        raise CaseError(f"{root}: not a corpus directory")
    return [load_case(p) for p in sorted(root.iterdir(), key=lambda p: p.name)
            if p.is_dir() and (p / CASE_FILE).is_file()]


def score(case: Case, diag: Diagnosis) -> CaseResult:
    """Compare one verdict with its case's label and accepted alternatives."""
    right = any(label.matches(diag) for label in (case.label, *case.alternatives))
    gpu = diag.root_cause.gpu if diag.root_cause and diag.status == "attributed" else None
    accused = diag.responsible == "infrastructure" and (
        bool(set(diag.culprit_nodes) - case.blamed_nodes())
        or (gpu is not None and bool(case.blamed_gpus()) and gpu.lower() not in case.blamed_gpus()))
    return CaseResult(case=case, status=diag.status, category=diag.category,
                      culprit_nodes=tuple(diag.culprit_nodes), culprit_gpu=gpu, right=right,
                      false_accusation=accused, summary=diag.summary)


def evaluate(engine: Any, root: Path) -> Report:
    """Diagnose every case under ``root`` with ``engine`` and score it."""
    report = Report()
    for case in load_cases(root):
        report.results.append(score(case, engine.diagnose(case.path)))
    return report


def render(report: Report, verbose: bool = False) -> str:
    """The text report: wrong cases (every case with ``verbose``), per family, confusion, totals."""
    lines: list[str] = []
    for res in report.results:
        if res.right and not verbose:
            continue
        mark = "ok   " if res.right else ("FALSE" if res.false_accusation else "WRONG")
        label = res.case.label
        want = _column(label.status, label.category) + _nodes(label.culprit_nodes or ())
        got = _column(res.status, res.category) + _nodes(res.culprit_nodes)
        lines.append(f"{mark} {res.case.id}: expected {want}, got {got}")
    if lines:
        lines.append("")
    lines.append("family                right/total")
    for family, (right, total) in report.by_family().items():
        lines.append(f"  {family:<20} {right:>3}/{total:<3} {100 * right / total:5.1f}%")
    lines += ["", "confusion (expected -> verdict):"]
    for expected, row in report.confusion().items():
        cells = ", ".join(f"{got} {n}" for got, n in row.items())
        lines.append(f"  {expected:<26} {cells}")
    lines += ["", f"cases {len(report.results)}, right {report.right} ({100 * report.accuracy:.1f}%), "
                  f"false accusations {len(report.false_accusations)}, "
                  f"unattributed rate {100 * report.unattributed_rate:.1f}%"]
    return "\n".join(lines) + "\n"


def _nodes(nodes: Any) -> str:
    return f" [{', '.join(sorted(nodes))}]" if nodes else ""
