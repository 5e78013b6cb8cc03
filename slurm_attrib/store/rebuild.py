"""A stored Diagnosis JSON back into model objects, so ``show`` reuses the same text renderer."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Optional

from ..model import Coverage, Diagnosis, EvidenceRef, JobFacts, RuleFired, Step, Symptom
from ..timestamps import parse_iso


def _time(value: Any) -> Optional[datetime]:
    return parse_iso(str(value)) if value else None


def _evidence(raw: dict[str, Any]) -> EvidenceRef:
    return EvidenceRef(source=str(raw.get("source") or ""), node=raw.get("node"), file=str(raw.get("file") or ""),
                       line=int(raw.get("line") or 0), offset=int(raw.get("offset") or 0),
                       time=_time(raw.get("time")), raw=str(raw.get("raw") or ""))


def _symptom(raw: dict[str, Any]) -> Symptom:
    return Symptom(kind=str(raw.get("kind") or ""), rule_id=str(raw.get("rule") or ""), node=raw.get("node"),
                   time=_time(raw.get("time")), evidence=[_evidence(e) for e in raw.get("evidence") or []],
                   gpu=raw.get("gpu"), rank=raw.get("rank"), fields=dict(raw.get("fields") or {}),
                   role=str(raw.get("role") or "context"), category=str(raw.get("category") or "unknown"),
                   responsible=str(raw.get("responsible") or "unknown"), strength=int(raw.get("strength") or 0),
                   summary=str(raw.get("summary") or ""), id=str(raw.get("id") or ""), dropped=raw.get("dropped"),
                   supports=raw.get("supports"), notes=list(raw.get("notes") or []))


def _job(raw: dict[str, Any]) -> JobFacts:
    return JobFacts(job_id=str(raw.get("job_id") or "unknown"), cluster=str(raw.get("cluster") or ""),
                    user=str(raw.get("user") or ""), partition=str(raw.get("partition") or ""),
                    nodes=tuple(raw.get("nodes") or ()), start=_time(raw.get("start")), end=_time(raw.get("end")),
                    state=str(raw.get("state") or ""), exit_code=str(raw.get("exit_code") or "0:0"),
                    derived_exit_code=str(raw.get("derived_exit_code") or "0:0"),
                    steps=tuple(Step(id=str(s.get("id")), state=str(s.get("state")), exit_code=str(s.get("exit_code")),
                                     nodes=tuple(s.get("nodes") or ())) for s in raw.get("steps") or []),
                    restart_count=int(raw.get("restart_count") or 0),
                    array_job_id=str(raw.get("array_job_id") or ""), array_task_id=str(raw.get("array_task_id") or ""))


def _coverage(raw: dict[str, Any]) -> Coverage:
    return Coverage(connector=str(raw.get("connector")), state=str(raw.get("state")),
                    reason=str(raw.get("reason") or ""),
                    files=int(raw.get("files") or 0), lines=int(raw.get("lines") or 0),
                    bytes=int(raw.get("bytes") or 0), symptoms=int(raw.get("symptoms") or 0),
                    notes=list(raw.get("notes") or []))


def diagnosis_from_dict(raw: dict[str, Any]) -> Diagnosis:
    """The inverse of ``Diagnosis.to_dict`` for everything the renderer reads."""
    root = raw.get("root_cause")
    return Diagnosis(
        job=_job(raw.get("job") or {}), status=str(raw.get("status")), category=str(raw.get("category")),
        responsible=str(raw.get("responsible")), root_cause=_symptom(root) if root else None,
        culprit_nodes=list(raw.get("culprit_nodes") or []),
        supporting=[_symptom(s) for s in raw.get("supporting_symptoms") or []],
        candidates=[_symptom(s) for s in raw.get("candidates") or []],
        evidence=[_evidence(e) for e in raw.get("evidence") or []],
        rules_fired=[RuleFired(id=str(r.get("id")), version=int(r.get("version") or 0), phase=str(r.get("phase")),
                               count=int(r.get("count") or 0)) for r in raw.get("rules_fired") or []],
        coverage=[_coverage(c) for c in raw.get("coverage") or []],
        recommended_actions=list(raw.get("recommended_actions") or []), ruleset=dict(raw.get("ruleset") or {}),
        engine_version=str(raw.get("engine_version") or ""), summary=str(raw.get("summary") or ""),
        time_assumptions=list(raw.get("time_assumptions") or []), annotations=list(raw.get("annotations") or []))
