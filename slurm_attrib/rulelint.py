"""The rule linter: small validators, each ``validate(rule) -> issues``, run as ``rules lint``.

Issues carry the real ``path:line:col`` of the offending key so editors can jump to them. Besides
the per-rule validators, the linter reports quarantined site files, symptom kinds no rule emits,
and rules that turn the clean baseline into a finding.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from .baseline import baseline_matches
from .engine import Engine, registry
from .model import CATEGORIES, RESPONSIBLE, ROLES
from .ruleschema import SITE_PREFIX, RuleProblem
from .ruleset import Rule, RuleSet, python_part_problem

ID_PATTERN = re.compile(r"^[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+$")
STATUSES = ("stable", "test", "experimental", "deprecated")
EXTRACT_PREFIXES = ("kernel.", "app.", "scheduler.", "metrics.", "diag.")
PHASE_PREFIXES = {"filter": "filter.", "refine": "refine.", "final": "final.", "post_outcome": "post."}


@dataclass(frozen=True, order=True)
class LintIssue:
    path: str
    line: int
    col: int
    severity: str  # error | warning
    rule_id: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.severity}: [{self.rule_id}] {self.message}"


class Validator:
    """One check over one rule."""

    name = "validator"

    def validate(self, rule: Rule) -> list[LintIssue]:
        raise NotImplementedError

    def issue(self, rule: Rule, message: str, severity: str = "error", key: str = "") -> LintIssue:
        """An issue at the line of ``key`` (dotted, e.g. ``emit.role``), else at the rule's line."""
        line, col = rule.position(key)
        return LintIssue(rule.path, line, col, severity, rule.id, f"{message} ({self.name})")


class IdFormat(Validator):
    """Bundled ids start with their phase's prefix; site ids with ``site.`` (which bundled rules never
    use, so an upgrade cannot collide with a site's rule)."""

    name = "id-format"

    def validate(self, rule: Rule) -> list[LintIssue]:
        if not ID_PATTERN.match(rule.id):
            return [self.issue(rule, "id must be dotted lower-case words, e.g. kernel.nvidia_xid", key="id")]
        if rule.origin != "bundled":
            ok = rule.id.startswith(SITE_PREFIX)
            return [] if ok else [self.issue(rule, f"site rule ids start with '{SITE_PREFIX}'", key="id")]
        if rule.id.startswith(SITE_PREFIX):
            return [self.issue(rule, f"bundled rules never use the '{SITE_PREFIX}' namespace", key="id")]
        prefix = rule.id.split(".", 1)[0] + "."
        if rule.phase == "extract" and prefix not in EXTRACT_PREFIXES:
            return [self.issue(rule, f"extract rule ids start with one of {EXTRACT_PREFIXES}", key="id")]
        expected = PHASE_PREFIXES.get(rule.phase, prefix)
        if prefix != expected:
            return [self.issue(rule, f"{rule.phase} rule ids start with '{expected}'", key="id")]
        return []


class Metadata(Validator):
    """What a reader needs: a status, a description that says why, and the sources it rests on."""

    name = "metadata"

    def validate(self, rule: Rule) -> list[LintIssue]:
        out = []
        if rule.status not in STATUSES:
            out.append(self.issue(rule, f"status must be one of {STATUSES}", key="status"))
        if len(rule.description) < 20:
            out.append(self.issue(rule, "description must say what the rule detects and why (20+ characters)",
                                  key="description"))
        for index, ref in enumerate(rule.references):
            if not ref.startswith(("https://", "http://")):
                out.append(self.issue(rule, f"reference is not a URL: {ref!r}", key=f"references.{index}"))
        if rule.phase == "extract" and not rule.references:
            out.append(self.issue(rule, "an extract rule cites the vendor or upstream source of its format",
                                  "warning", key="references"))
        return out


class Vocabulary(Validator):
    """Roles, categories and parties come from the Diagnosis vocabulary (DESIGN.md §5)."""

    name = "vocabulary"

    def validate(self, rule: Rule) -> list[LintIssue]:
        out = []
        checks = (("category", CATEGORIES), ("role", ROLES), ("responsible", RESPONSIBLE))
        for key, allowed in checks:
            value = rule.emit.get(key)
            if value is not None and value not in allowed:
                out.append(self.issue(rule, f"emit.{key} {value!r} is not one of {allowed}", key=f"emit.{key}"))
        when = rule.raw.get("when") or {}
        for key, allowed in (("category", CATEGORIES), ("role", ROLES)):
            for value in when.get(key, []) if isinstance(when.get(key), list) else [when.get(key)]:
                if value is not None and value not in allowed:
                    out.append(self.issue(rule, f"when.{key} {value!r} is not one of {allowed}",
                                          key=f"when.{key}"))
        return out


class Anchors(Validator):
    """The prefilter only finds lines holding an anchor: an anchor the regex cannot match is dead.
    The anchors are looked for in the regex's literal text, with escapes resolved and grouping
    (``(?P<name>``, ``(?:``, parentheses) removed, each alternative kept apart."""

    name = "anchors"

    def validate(self, rule: Rule) -> list[LintIssue]:
        if rule.match is None:
            return []
        out = []
        text = literal_text(rule.match.regex.pattern)
        if not rule.match.regex.pattern.startswith("^") and not any(a.strip() in text for a in rule.match.anchors):
            out.append(self.issue(rule, "no anchor appears in the regex; check the anchors match what it "
                                        "looks for", "warning", key="match.anchors"))
        for anchor in rule.match.anchors:
            if len(anchor.strip()) < 4:
                out.append(self.issue(rule, f"anchor {anchor!r} is too short to be a useful prefilter",
                                      key="match.anchors"))
        return out


_REGEX_TOKEN = re.compile(r"\\(.)|(\(\?P<\w+>|\(\?<?[:=!]|[()])|(\|)|(.)", re.S)


def literal_text(pattern: str) -> str:
    """A regex as the text it spells: escapes resolved, groups dropped, alternatives on their own line."""
    return "".join(esc or ("\n" if bar else "" if group else char)
                   for esc, group, bar, char in _REGEX_TOKEN.findall(pattern))


class Implementation(Validator):
    """The Python parts a rule names exist; refine and final rules are Python rules."""

    name = "implementation"

    def validate(self, rule: Rule) -> list[LintIssue]:
        problem = python_part_problem(rule)
        out = [] if problem is None else [LintIssue(rule.path, problem.line, problem.col, "error", rule.id,
                                                    f"{problem.message} ({self.name})")]
        if rule.phase in ("refine", "final") and rule.implementation != "python":
            out.append(self.issue(rule, f"{rule.phase} rules are Python rules", key="implementation"))
        return out


class KnownKinds(Validator):
    """A rule that names a symptom kind (in ``when``, or a params key ending in ``kind``/``kinds``)
    names one that some extract rule emits (``emit.kind`` or ``emit.kinds``): a typo would otherwise
    make the rule silently never apply."""

    name = "kinds"

    def __init__(self, emitted: set[str]) -> None:
        self.emitted = emitted

    def validate(self, rule: Rule) -> list[LintIssue]:
        if rule.phase == "extract":
            return []
        return [self.issue(rule, f"symptom kind {kind!r} is emitted by no extract rule", key=key)
                for key, kind in kinds_named(rule) if kind not in self.emitted]


def emitted_kinds(ruleset: RuleSet) -> set[str]:
    """Every symptom kind an extract rule of the set declares it can produce."""
    kinds: set[str] = set()
    for rule in ruleset.by_phase("extract"):
        kinds.update(str(k) for k in [rule.emit.get("kind"), *(rule.emit.get("kinds") or ())] if k)
    return kinds


def kinds_named(rule: Rule) -> list[tuple[str, str]]:
    """(dotted key, kind) for every kind a rule's ``when`` or ``params`` refers to."""
    return sorted(_kinds_in(rule.raw.get("when"), "when") + _kinds_in(rule.params, "params"))


def _kinds_in(value: Any, key: str) -> list[tuple[str, str]]:
    if isinstance(value, dict):
        return [found for name, item in value.items() for found in _kinds_in(item, f"{key}.{name}")]
    if isinstance(value, list):
        return [found for index, item in enumerate(value) for found in _kinds_in(item, f"{key}.{index}")]
    names_kinds = key.rsplit(".", 1)[-1].endswith(("kind", "kinds")) or _in_kinds_list(key)
    return [(key, str(value))] if names_kinds and value is not None else []


def _in_kinds_list(key: str) -> bool:
    """``params.classes.x.kinds.3`` (an item of a list held under a kinds key) or
    ``params.evidence_kinds.job_limit`` (a value of a mapping held under one)."""
    parent = key.rpartition(".")[0]
    return parent.rsplit(".", 1)[-1].endswith(("kind", "kinds"))


class Fixtures(Validator):
    """Every rule has positive and negative fixtures under ``<fixtures>/<rule_id>/``."""

    name = "fixtures"

    def __init__(self, root: Optional[Path]) -> None:
        self.root = root

    def validate(self, rule: Rule) -> list[LintIssue]:
        if self.root is None:
            return []
        out = []
        for kind in ("positive", "negative"):
            folder = self.root / rule.id / kind
            if not folder.is_dir() or not any(folder.iterdir()):
                out.append(self.issue(rule, f"no {kind} fixture in {folder}"))
        return out


def default_validators(fixtures: Optional[Path], emitted: set[str]) -> list[Validator]:
    return [IdFormat(), Metadata(), Vocabulary(), Anchors(), Implementation(), KnownKinds(emitted),
            Fixtures(fixtures)]


def lint(ruleset: RuleSet, fixtures: Optional[Path] = None, origin: Optional[str] = None,
         baseline: bool = True) -> list[LintIssue]:
    """Lint the rules of one origin (``bundled`` or ``site``; all when None), the quarantined site
    files, and (``baseline``) what the rules make of the clean baseline. Errors fail ``rules lint``."""
    chosen = [r for r in ruleset.rules if origin is None or r.origin == origin]
    validators = default_validators(fixtures, emitted_kinds(ruleset))
    issues = [issue for rule in chosen for validator in validators for issue in validator.validate(rule)]
    if origin != "bundled":
        issues.extend(quarantine_issues(ruleset.quarantined))
    if origin in (None, "bundled"):
        issues.extend(orphan_issues(ruleset))
    if baseline:
        issues.extend(baseline_issues(ruleset, {r.id for r in chosen}))
    return sorted(issues)


def quarantine_issues(problems: tuple[RuleProblem, ...]) -> list[LintIssue]:
    """A quarantined site file is an error at its real line: it is not running."""
    return [LintIssue(p.path, p.line, p.col, "error", p.rule_id or "-", f"quarantined, not running: {p.message}")
            for p in problems]


def orphan_issues(ruleset: RuleSet) -> list[LintIssue]:
    """A registered Python implementation with no YAML rule is dead code."""
    registry.load_all()
    known = {r.id for r in ruleset.rules}
    return [LintIssue("slurm_attrib/engine", 1, 1, "error", orphan,
                      "a Python implementation is registered but no YAML rule has its id")
            for orphan in sorted(set(registry.RULES) - known)]


def baseline_issues(ruleset: RuleSet, rule_ids: set[str]) -> list[LintIssue]:
    """A rule that finds anything but context in the clean baseline is a false positive waiting to
    happen. Rules whose Python parts are missing cannot run: Implementation reports them instead."""
    if any(python_part_problem(r) for r in ruleset.rules):
        return []
    issues = []
    for log, sym in baseline_matches(Engine(ruleset)):
        rule = ruleset.get(sym.rule_id)
        if rule is None or rule.id not in rule_ids or sym.role == "context":
            continue
        line, col = rule.position("match")
        raw = sym.evidence[0].raw if sym.evidence else ""
        issues.append(LintIssue(rule.path, line, col, "error", rule.id,
                                f"a {sym.role} symptom from the clean baseline {log.name}: {raw[:120]!r} (baseline)"))
    return sorted(set(issues))
