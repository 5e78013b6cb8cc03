"""Text rendering of a Diagnosis for people: verdict line, root cause with file:line, supporting
symptoms grouped, coverage, next steps. Every line passes :func:`~.termsafe.for_terminal`."""

from __future__ import annotations

from collections import defaultdict

from .model import Diagnosis, Symptom, iso
from .termsafe import for_terminal


def _where(sym: Symptom) -> str:
    parts = [sym.node or "unknown node"]
    if sym.gpu:
        parts.append(f"gpu {sym.gpu}" + (f" ({sym.fields['uuid']})" if sym.fields.get("uuid") else ""))
    if sym.rank is not None:
        parts.append(f"rank {sym.rank}")
    return ", ".join(parts)


def _cite(sym: Symptom) -> str:
    if not sym.evidence:
        return ""
    ev = sym.evidence[0]
    return f"{ev.file}:{ev.line}"


def render_text(diag: Diagnosis) -> str:
    job = diag.job
    lines = [
        f"job {job.job_id} ({job.cluster or '?'}, user {job.user or '?'}, {job.state or '?'} exit {job.exit_code})",
        f"verdict: {diag.status.upper()}  category: {diag.category}  responsible: {diag.responsible}"
        + (f"  culprit: {', '.join(diag.culprit_nodes)}" if diag.culprit_nodes else "") + f"  scope: {diag.scope}",
        "",
    ]
    root = diag.root_cause
    if root is not None:
        lines += ["root cause:", f"  {root.summary}", f"  on {_where(root)} at {iso(root.time) or 'unknown time'}",
                  f"  {_cite(root)}: {root.evidence[0].raw.strip()[:240]}" if root.evidence else ""]
        for note in root.notes:
            lines.append(f"  note: {note}")
        lines.append("")
    if diag.candidates:
        lines.append("candidates (the evidence does not decide between them):")
        for cand in diag.candidates:
            lines.append(f"  - {cand.category}: {cand.summary} on {_where(cand)} at {iso(cand.time) or 'unknown time'}"
                         f"  [{_cite(cand)}]")
        lines.append("")
    lines += _supporting_lines(diag.supporting)
    if diag.annotations:
        lines += ["notes:", *(f"  - {a}" for a in diag.annotations), ""]
    lines.append("coverage:")
    for cov in diag.coverage:
        detail = cov.reason or f"{cov.files} file(s), {cov.lines} line(s), {cov.symptoms} symptom(s)"
        lines.append(f"  {cov.connector:<12} {cov.state:<8} {detail}")
        lines += [f"               {n}" for n in sorted(set(cov.notes))[:8]]
    if diag.recommended_actions:
        lines += ["", "what to do next:", *(f"  {i}. {a}" for i, a in enumerate(diag.recommended_actions, 1))]
    lines += ["", f"ruleset {diag.ruleset.get('version')} ({diag.ruleset.get('hash')}), engine {diag.engine_version}"]
    # one line per entry: a control character or newline inside one (a job name, a log line) is shown
    return "\n".join(for_terminal(line) for line in lines if line is not None) + "\n"


def _supporting_lines(supporting: list[Symptom]) -> list[str]:
    if not supporting:
        return []
    groups: dict[str, list[Symptom]] = defaultdict(list)
    for sym in supporting:
        groups[sym.kind].append(sym)
    out = [f"supporting symptoms ({len(supporting)}, downstream of the root cause):"]
    for kind in sorted(groups):
        members = groups[kind]
        out.append(f"  {kind} ({len(members)}):")
        for sym in members[:5]:
            more = sym.fields.get("similar_omitted")
            suffix = f" (+{more} similar)" if more else ""
            out.append(f"    - {sym.summary} [{_cite(sym)}]{suffix}")
        if len(members) > 5:
            out.append(f"    ... {len(members) - 5} more")
    out.append("")
    return out
