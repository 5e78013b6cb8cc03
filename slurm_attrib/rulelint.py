"""The rule linter: small validators, each ``validate(rule) -> issues``, run as ``rules lint``.

Issues carry ``path:line:col`` so editors can jump to them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .engine import registry
from .model import CATEGORIES, RESPONSIBLE, ROLES
from .ruleschema import PHASES, REFINE_STAGES
from .ruleset import Rule, RuleSet

ID_PATTERN = re.compile(r"^[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+$")
STATUSES = ("stable", "test", "experimental", "deprecated")
EXTRACT_PREFIXES = ("kernel.", "app.", "scheduler.", "metrics.", "diag.")


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

    def issue(self, rule: Rule, message: str, severity: str = "error") -> LintIssue:
        return LintIssue(rule.path, rule.line, 1, severity, rule.id, f"{message} ({self.name})")


class IdFormat(Validator):
    name = "id-format"

    def validate(self, rule: Rule) -> list[LintIssue]:
        out = []
        if not ID_PATTERN.match(rule.id):
            out.append(self.issue(rule, "id must be dotted lower-case words, e.g. kernel.nvidia_xid"))
        prefix = rule.id.split(".", 1)[0] + "."
        if rule.phase == "extract" and prefix not in EXTRACT_PREFIXES:
            out.append(self.issue(rule, f"extract rule ids start with one of {EXTRACT_PREFIXES}"))
        expected = {"filter": "filter.", "refine": "refine.", "final": "final.", "post_outcome": "post."}
        if rule.phase in expected and not rule.id.startswith(expected[rule.phase]):
            out.append(self.issue(rule, f"{rule.phase} rule ids start with '{expected[rule.phase]}'"))
        return out


class Metadata(Validator):
    name = "metadata"

    def validate(self, rule: Rule) -> list[LintIssue]:
        out = []
        if rule.status not in STATUSES:
            out.append(self.issue(rule, f"status must be one of {STATUSES}"))
        if len(rule.description) < 20:
            out.append(self.issue(rule, "description must say what the rule detects and why (20+ characters)"))
        if not isinstance(rule.raw.get("references", []), list):
            out.append(self.issue(rule, "references must be a list of URLs"))
        for ref in rule.references:
            if not ref.startswith(("https://", "http://")):
                out.append(self.issue(rule, f"reference is not a URL: {ref!r}"))
        if rule.phase == "extract" and not rule.references:
            out.append(self.issue(rule, "an extract rule cites the vendor or upstream source of its format",
                                  "warning"))
        if rule.phase == "refine" and rule.stage not in REFINE_STAGES:
            out.append(self.issue(rule, f"a refine rule names its stage, one of {REFINE_STAGES}"))
        if rule.phase not in PHASES:
            out.append(self.issue(rule, f"unknown phase {rule.phase}"))
        return out


class Vocabulary(Validator):
    name = "vocabulary"

    def validate(self, rule: Rule) -> list[LintIssue]:
        out = []
        checks = (("category", CATEGORIES), ("role", ROLES), ("responsible", RESPONSIBLE))
        for key, allowed in checks:
            value = rule.emit.get(key)
            if value is not None and value not in allowed:
                out.append(self.issue(rule, f"emit.{key} {value!r} is not one of {allowed}"))
        when = rule.raw.get("when") or {}
        for key, allowed in (("category", CATEGORIES), ("role", ROLES)):
            for value in when.get(key, []) if isinstance(when.get(key), list) else [when.get(key)]:
                if value is not None and value not in allowed:
                    out.append(self.issue(rule, f"when.{key} {value!r} is not one of {allowed}"))
        strength = rule.emit.get("strength")
        if strength is not None and not (isinstance(strength, int) and 0 <= strength <= 100):
            out.append(self.issue(rule, "emit.strength is an integer 0-100"))
        return out


class Anchors(Validator):
    """The prefilter only finds lines holding an anchor: an anchor the regex cannot match is dead."""

    name = "anchors"

    def validate(self, rule: Rule) -> list[LintIssue]:
        if rule.match is None:
            return []
        out = []
        source = rule.match.regex.pattern
        unescaped = re.sub(r"\\(.)", r"\1", source)
        if not any(a.strip() in unescaped or a.strip() in source for a in rule.match.anchors) and \
                rule.match.regex.pattern.startswith("^") is False:
            out.append(self.issue(rule, "no anchor appears in the regex; check the anchors match what it "
                                        "looks for", "warning"))
        for anchor in rule.match.anchors:
            if len(anchor.strip()) < 4:
                out.append(self.issue(rule, f"anchor {anchor!r} is too short to be a useful prefilter"))
        return out


class Implementation(Validator):
    name = "implementation"

    def validate(self, rule: Rule) -> list[LintIssue]:
        registry.load_all()
        out = []
        if rule.implementation == "python" and rule.id not in registry.RULES:
            out.append(self.issue(rule, "implementation: python but no registered implementation has this id"))
        decoder = rule.emit.get("decoder")
        if decoder and decoder not in registry.DECODERS:
            out.append(self.issue(rule, f"unknown decoder {decoder!r}"))
        if rule.phase in ("refine", "final") and rule.implementation != "python":
            out.append(self.issue(rule, f"{rule.phase} rules are Python rules"))
        return out


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


def default_validators(fixtures: Optional[Path]) -> list[Validator]:
    return [IdFormat(), Metadata(), Vocabulary(), Anchors(), Implementation(), Fixtures(fixtures)]


def lint(ruleset: RuleSet, fixtures: Optional[Path] = None) -> list[LintIssue]:
    issues: list[LintIssue] = []
    for rule in ruleset.rules:
        for validator in default_validators(fixtures):
            issues.extend(validator.validate(rule))
    registered = set(registry.RULES)
    known = {r.id for r in ruleset.rules}
    for orphan in sorted(registered - known):
        issues.append(LintIssue("slurm_attrib/engine", 1, 1, "error", orphan,
                                "a Python implementation is registered but no YAML rule has its id"))
    return sorted(issues)
