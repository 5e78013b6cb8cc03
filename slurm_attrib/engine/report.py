"""Phase 4, report: assemble the Diagnosis from the decided outcome, in a stable order."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Optional

from ..model import COVERAGE_STATES, Coverage, Diagnosis, EvidenceRef, RuleFired, Symptom
from .context import EngineContext

CONNECTORS = ("kernel_log", "app_log", "gpu_metrics", "sacct", "job_facts")


def build_diagnosis(ctx: EngineContext, engine_version: str) -> Diagnosis:
    outcome = ctx.outcome
    root = outcome.root
    supporting = _supporting(ctx, root)
    evidence = _evidence_chain(root, outcome.candidates, supporting, ctx.settings.max_evidence)
    return Diagnosis(
        job=ctx.job,
        status=outcome.status,
        category=outcome.category,
        responsible=outcome.responsible,
        root_cause=root,
        culprit_nodes=sorted(outcome.culprit_nodes),
        supporting=supporting,
        candidates=sorted(outcome.candidates, key=Symptom.sort_key),
        evidence=evidence,
        rules_fired=_fired(ctx),
        coverage=_coverage(ctx),
        recommended_actions=list(outcome.actions),
        ruleset=ctx.ruleset.describe(),
        engine_version=engine_version,
        summary=f"{outcome.status}: {outcome.category}: {outcome.summary}",
        time_assumptions=sorted(ctx.assumptions),
        annotations=list(dict.fromkeys([*outcome.annotations, *ctx.notes])),
        scope=verdict_scope(outcome.status, root, outcome.culprit_nodes),
    )


def verdict_scope(status: str, root: Optional[Symptom], culprits: list[str]) -> str:
    """What an attributed verdict is about: a GPU, a link (HCA port, NIC), a node, a shared file system,
    one rank of the workload, or the workload as a whole (also every ambiguous/unattributed verdict)."""
    if status != "attributed" or root is None:
        return "workload"
    if root.category == "storage" and root.responsible == "infrastructure":
        return "filesystem"
    if culprits:
        if root.gpu:
            return "gpu"
        return "link" if root.category == "network" else "node"
    return "rank" if root.rank is not None else "workload"


def _supporting(ctx: EngineContext, root: Optional[Symptom]) -> list[Symptom]:
    """Symptoms that support the root (directly or through a chain), at most N per (kind, node);
    the count of the rest goes into the first one's ``fields.similar_omitted``."""
    if root is None:
        return []
    by_id = {s.id: s for s in ctx.symptoms}
    chosen: list[Symptom] = []
    groups: dict[tuple[str, str], list[Symptom]] = defaultdict(list)
    for sym in ctx.active():
        if sym is not root and _supports(sym, root, by_id):
            groups[(sym.kind, sym.node or "")].append(sym)
    limit = ctx.settings.supporting_per_group
    for members in groups.values():
        kept = members[:limit]
        if len(members) > limit:
            kept[0].fields["similar_omitted"] = len(members) - limit
        chosen.extend(kept)
    chosen.sort(key=Symptom.sort_key)
    return _cap_total(ctx, chosen, sum(len(m) for m in groups.values()))


def _cap_total(ctx: EngineContext, chosen: list[Symptom], total: int) -> list[Symptom]:
    """At most ``supporting_max`` listed, earliest first; an annotation counts what is left out by kind."""
    cap = ctx.settings.supporting_max
    if len(chosen) <= cap:
        return chosen
    left = Counter(s.kind for s in chosen[cap:])
    kinds = ", ".join(f"{count} {kind}" for kind, count in sorted(left.items()))
    ctx.outcome.annotations.append(f"{total} supporting symptoms in all; {len(chosen) - cap} more not listed "
                                   f"({kinds})")
    return chosen[:cap]


def _supports(sym: Symptom, root: Symptom, by_id: dict[str, Symptom]) -> bool:
    seen = set()
    current: Optional[Symptom] = sym
    while current is not None and current.supports and current.supports not in seen:
        if current.supports == root.id:
            return True
        seen.add(current.supports)
        current = by_id.get(current.supports)
    return False


def _evidence_chain(root: Optional[Symptom], candidates: list[Symptom], supporting: list[Symptom],
                    limit: int) -> list[EvidenceRef]:
    ordered: list[EvidenceRef] = []
    for sym in ([root] if root else []) + sorted(candidates, key=Symptom.sort_key) + supporting:
        ordered.extend(sym.evidence)
    unique = list(dict.fromkeys(ordered))
    head = unique[:1]
    rest = sorted(unique[1:], key=lambda e: (e.time is None, e.time.timestamp() if e.time else 0.0, e.file,
                                             e.line))
    return (head + rest)[:limit]


def _fired(ctx: EngineContext) -> list[RuleFired]:
    out = []
    for rule in ctx.ruleset.rules:
        if ctx.fired.get(rule.id):
            out.append(RuleFired(id=rule.id, version=rule.version, phase=rule.phase, count=ctx.fired[rule.id]))
    return out


def _coverage(ctx: EngineContext) -> list[Coverage]:
    for name in CONNECTORS:
        ctx.coverage_for(name)
    for name, state, reason, size, query in ctx.job.collection_sources:  # what `watch`'s connectors got
        key = name if name not in CONNECTORS else f"collect:{name}"
        ctx.coverage[key] = Coverage(connector=key, state=state if state in COVERAGE_STATES else "error",
                                     reason=reason, bytes=size, notes=[f"query: {query[:500]}"] if query else [])
    out = []
    for name in sorted(ctx.coverage):
        cov = ctx.coverage[name]
        if cov.state == "skipped" and cov.files and not cov.reason:
            cov.state = "ok" if cov.lines else "empty"
            if any("cannot read" in n or "read stopped" in n for n in cov.notes):
                cov.state = "error" if not cov.lines else "ok"
        if cov.state == "skipped" and not cov.reason:
            cov.reason = "no files of this kind in the bundle"
        out.append(cov)
    return out
