"""Rule fixtures: every rule ships positive and negative examples, run as ``rules test``.

A fixture is either a bundle directory or a YAML file with an inline bundle::

    job: {job_id: "1", nodes: [node-01], state: FAILED}
    files:
      syslog/node-01.log: |
        ... raw lines ...
    facts: {node-01: {driver_version: "550.54.15"}}
    settings:                    # optional engine settings, e.g. the store's node history
      node_history: {node-02: 2}
    expect:                      # optional, positive fixtures of extract rules
      fields: {code: 79}         # a symptom of this rule has these field values
      role: candidate            # also category, responsible, kind, node, gpu, rank, dropped, and
      time: "2026-11-20T10:00:05.000000Z"   # the symptom's time as the diagnosis writes it

A positive fixture passes when the rule fires, every symptom it made has a kind it declares
(``emit.kind``/``emit.kinds``) and a symptom meets ``expect``; a negative one passes when the rule
does not fire. ``expect.outcome`` is checked in both: a negative fixture says what the diagnosis is without
the rule's effect. Besides the diagnosis's own fields it takes ``candidate_categories``, the sorted categories
of an ambiguous verdict's candidates. Bundled fixtures live in ``tests/rules/<rule id>/``; a site's next to
its rules, in ``rules.d/fixtures/<rule id>/``.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional

import yaml

from .engine import Engine, EngineSettings
from .model import iso
from .ruleset import Rule


@dataclass(frozen=True)
class FixtureResult:
    rule_id: str
    kind: str  # positive | negative
    path: str
    passed: bool
    detail: str


def fixture_paths(root: Path, rule_id: str, kind: str) -> list[Path]:
    folder = root / rule_id / kind
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_dir() or p.suffix in (".yaml", ".yml"))


def materialise(fixture: Path, target: Path) -> Path:
    """Write an inline YAML fixture out as a bundle directory; a directory fixture is used as is."""
    if fixture.is_dir():
        return fixture
    spec = yaml.safe_load(fixture.read_text(encoding="utf-8")) or {}
    (target / "job.yaml").write_text(yaml.safe_dump(spec.get("job") or {}, sort_keys=True), encoding="utf-8")
    for rel, content in sorted((spec.get("files") or {}).items()):
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
        path.write_bytes(data)
    for node, facts in sorted((spec.get("facts") or {}).items()):
        (target / "facts").mkdir(exist_ok=True)
        (target / "facts" / f"{node}.yaml").write_text(yaml.safe_dump(facts, sort_keys=True), encoding="utf-8")
    return target


def fixture_settings(engine: Engine, fixture: Path) -> EngineSettings:
    """Engine settings a fixture asks for (``settings.node_history``), else the engine's own."""
    spec = {} if fixture.is_dir() else (yaml.safe_load(fixture.read_text(encoding="utf-8")) or {})
    wanted = spec.get("settings") or {}
    history = tuple(sorted((str(k), int(v)) for k, v in (wanted.get("node_history") or {}).items()))
    return replace(engine.settings, node_history=history) if history else engine.settings


def expectation(fixture: Path) -> dict[str, Any]:
    if fixture.is_dir():
        path = fixture / "expect.yaml"
        return dict(yaml.safe_load(path.read_text(encoding="utf-8")) or {}) if path.exists() else {}
    spec = yaml.safe_load(fixture.read_text(encoding="utf-8")) or {}
    return dict(spec.get("expect") or {})


def run_fixture(engine: Engine, rule: Rule, fixture: Path, kind: str) -> FixtureResult:
    with tempfile.TemporaryDirectory(prefix="slurm-attrib-fixture-") as tmp:
        bundle = materialise(fixture, Path(tmp))
        ctx = engine.run(bundle, fixture_settings(engine, fixture))
    fired = ctx.fired.get(rule.id, 0)
    if kind == "negative":
        problem = f"rule fired {fired} time(s)" if fired else _check_outcome(expectation(fixture), ctx)
        return FixtureResult(rule.id, kind, str(fixture), problem is None, problem or "")
    if not fired:
        return FixtureResult(rule.id, kind, str(fixture), False, "rule did not fire")
    symptoms = [s for s in ctx.symptoms if s.rule_id == rule.id]
    problem = _undeclared_kinds(rule, symptoms) or _check_expect(expectation(fixture), symptoms, ctx)
    return FixtureResult(rule.id, kind, str(fixture), problem is None, problem or "")


def declared_kinds(rule: Rule) -> set[str]:
    """The kinds an extract rule says it produces: ``emit.kind`` (the id when a declarative rule has
    none) and ``emit.kinds``, what its decoder or Python implementation may produce instead."""
    main = rule.emit.get("kind", "" if rule.implementation else rule.id)
    return {str(k) for k in [main, *(rule.emit.get("kinds") or ())] if k}


def _undeclared_kinds(rule: Rule, symptoms: list[Any]) -> Optional[str]:
    """The kinds lint trusts the declarations: a fixture proves them."""
    extra = sorted({s.kind for s in symptoms} - declared_kinds(rule))
    return f"symptom kind(s) {extra} not declared in emit.kind or emit.kinds" if extra else None


_SYMPTOM_ATTRS = ("role", "category", "responsible", "kind", "node", "gpu", "rank", "dropped", "time")
_EXPECT_KEYS = frozenset({*_SYMPTOM_ATTRS, "fields", "outcome"})


def _check_outcome(expect: dict[str, Any], ctx: Any) -> Optional[str]:
    """How ``expect.outcome`` (positive and negative fixtures alike) differs from the diagnosis, or None."""
    outcome = expect.get("outcome")
    if outcome is not None and not isinstance(outcome, dict):
        return "expect.outcome must be a mapping of the diagnosis's fields"
    for key, wanted in (outcome or {}).items():
        got = sorted({c.category for c in ctx.outcome.candidates}) if key == "candidate_categories" \
            else getattr(ctx.outcome, key, None)
        if got != wanted:
            return f"outcome.{key}: expected {wanted!r}, got {got!r}"
    return None


def _check_expect(expect: dict[str, Any], symptoms: list[Any], ctx: Any) -> Optional[str]:
    unknown = sorted(set(expect) - _EXPECT_KEYS)
    if unknown:  # a key the check would not read would pass whatever the rule did
        return f"expect has key(s) {unknown} that are not checked: a symptom's fields go under 'fields:'"
    problem = _check_outcome(expect, ctx)
    if problem is not None:
        return problem
    wanted_fields = expect.get("fields") or {}
    attrs = {k: v for k, v in expect.items() if k in _SYMPTOM_ATTRS}
    if not wanted_fields and not attrs:
        return None
    for sym in symptoms:
        if all(sym.fields.get(k) == v for k, v in wanted_fields.items()) and all(
                _attr(sym, k) == v for k, v in attrs.items()):
            return None
    seen = [{"fields": {k: s.fields.get(k) for k in wanted_fields}, **{k: _attr(s, k) for k in attrs}}
            for s in symptoms[:3]]
    return f"no symptom of this rule matches {expect}; saw {seen}"


def _attr(sym: Any, key: str) -> Any:
    """A symptom attribute as a fixture writes it: ``dropped`` as a flag, ``time`` as canonical ISO text."""
    if key == "dropped":
        return bool(sym.dropped)
    if key == "time":
        return iso(sym.time)
    return getattr(sym, key)


def run_all(engine: Engine, root: Path, only: Optional[str] = None,
            origin: Optional[str] = None) -> list[FixtureResult]:
    """Run the fixtures of every rule (or of ``only``, or of one ``origin``) found under ``root``.
    Site fixtures live next to the site rules: :func:`.ruleset.site_fixtures_dir`."""
    results: list[FixtureResult] = []
    for rule in engine.ruleset.rules:
        if (only and rule.id != only) or (origin and rule.origin != origin):
            continue
        for kind in ("positive", "negative"):
            paths = fixture_paths(root, rule.id, kind)
            if not paths:
                results.append(FixtureResult(rule.id, kind, str(root / rule.id / kind), False, "missing fixture"))
            for path in paths:
                results.append(run_fixture(engine, rule, path, kind))
    return results
