"""Helpers for the engine's unit tests: a context over a job without files, and symptoms to put in it."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

from slurm_attrib.bundle import Bundle
from slurm_attrib.engine.context import EngineContext, EngineSettings
from slurm_attrib.model import EvidenceRef, JobFacts, Symptom
from slurm_attrib.ruleset import Rule, RuleSet, load_ruleset

T0 = datetime(2026, 11, 20, 10, 30, tzinfo=timezone.utc)
SHIPPED = load_ruleset(include_site=False)


def shipped(rule_id: str, **params: Any) -> Rule:
    """A shipped rule, with some of its params replaced."""
    rule = SHIPPED.get(rule_id)
    assert rule is not None
    return replace(rule, params={**rule.params, **params})


def make_context(job: JobFacts, *symptoms: Symptom, rules: tuple[Rule, ...] = SHIPPED.rules) -> EngineContext:
    """A context over ``job`` (no files) holding ``symptoms``, numbered as the engine numbers them."""
    ctx = EngineContext(bundle=Bundle(root=Path("."), job=job, files=[], node_facts={}),
                        ruleset=RuleSet(rules=rules, version="", digest=""), settings=EngineSettings())
    ctx.symptoms.extend(symptoms)
    for number, sym in enumerate(ctx.symptoms, start=1):
        sym.id = sym.id or f"s{number:04d}"
    return ctx


def make_symptom(kind: str, category: str = "unknown", responsible: str = "unknown", strength: int = 0,
                 node: str = "node-02", source: str = "", gpu: Optional[str] = None, role: str = "context",
                 time: datetime = T0, **fields: Any) -> Symptom:
    """A symptom; with ``source`` it carries one evidence line from that source."""
    evidence = [EvidenceRef(source=source, node=node, file=f"{source}/{node}.log", line=1, offset=0, time=time,
                            raw=kind)] if source else []
    return Symptom(kind=kind, rule_id="t", node=node, time=time, evidence=evidence, gpu=gpu, category=category,
                   responsible=responsible, strength=strength, summary=kind, role=role, fields=dict(fields))
