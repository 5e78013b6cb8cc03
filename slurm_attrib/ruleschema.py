"""The shape of a rule file: which keys each phase accepts and which values would break the engine.

The key tables are data, not code paths: the loader enforces them (an unknown key is an error, so a
typo never silently turns a rule off) and ``docs/rules.md`` is tested against them, so the author's
reference can neither miss a key nor document one the loader refuses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .errors import RuleError

PHASES = ("extract", "filter", "refine", "final", "post_outcome")
REFINE_STAGES = ("correlate", "classify", "demote")
SOURCES = ("kernel", "app", "scheduler", "metrics", "diag")
ORIGINS = ("bundled", "site", "extra")
SITE_PREFIX = "site."

COMMON_KEYS = ("id", "version", "phase", "title", "description", "status", "references", "falsepositives",
               "implementation", "order", "params")
PHASE_KEYS: dict[str, tuple[str, ...]] = {
    "extract": (*COMMON_KEYS, "match", "emit"),
    "filter": (*COMMON_KEYS, "when", "reason"),
    "refine": (*COMMON_KEYS, "stage"),
    "final": COMMON_KEYS,
    "post_outcome": (*COMMON_KEYS, "when", "actions", "annotation"),
}
MATCH_KEYS = ("source", "anchors", "regex", "exclude", "programs", "also_in")
EMIT_KEYS = ("kind", "kinds", "role", "category", "responsible", "strength", "summary", "actions", "decoder",
             "finding")
SYMPTOM_WHEN_KEYS = ("kind", "role", "category", "source", "fields", "regex")
WHEN_KEYS: dict[str, tuple[str, ...]] = {
    "filter": SYMPTOM_WHEN_KEYS,
    "post_outcome": ("status", "category", "responsible", "culprit", "root"),
}


@dataclass(frozen=True, order=True)
class RuleProblem:
    """Why one rule file was refused, at the line (and column) the problem is on."""

    path: str
    line: int
    message: str
    col: int = 1
    rule_id: str = ""

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


class RuleFileError(RuleError):
    """A rule file the loader refuses; carries the problem so a site file can be quarantined."""

    def __init__(self, problem: RuleProblem) -> None:
        super().__init__(str(problem))
        self.problem = problem


class Positions:
    """Where each key of a parsed rule file is, by dotted path (``emit.strength``), for messages."""

    def __init__(self, path: str, table: dict[str, tuple[int, int]], default: int = 1) -> None:
        self.path, self.table, self.default = path, table, default

    def of(self, key: str) -> tuple[int, int]:
        """The key's (line, column); a key that is not there reports its closest parent."""
        while key:
            if key in self.table:
                return self.table[key]
            key = key.rpartition(".")[0]
        return (self.default, 1)

    def fail(self, key: str, message: str) -> RuleFileError:
        line, col = self.of(key)
        return RuleFileError(RuleProblem(self.path, line, message, col))


def check_shape(raw: dict[str, Any], phase: str, at: Positions) -> None:
    """Refuse unknown keys and values the engine would crash on at diagnosis time."""
    _only(raw, PHASE_KEYS[phase], "", f"a {phase} rule", at)
    for key in ("params", "emit", "match", "when"):
        if key in raw and not isinstance(raw[key], dict):
            raise at.fail(key, f"'{key}' must be a mapping")
    for key in ("references", "falsepositives", "actions"):
        if key in raw and not _strings(raw[key]):
            raise at.fail(key, f"'{key}' must be a list of strings")
    if "order" in raw and not _integer(raw["order"]):
        raise at.fail("order", "order must be an integer")
    if phase == "refine" and raw.get("stage") not in REFINE_STAGES:
        raise at.fail("stage", f"a refine rule names its stage, one of {REFINE_STAGES}")
    _only(raw.get("match") or {}, MATCH_KEYS, "match.", "match", at)
    _check_emit(raw.get("emit") or {}, at)
    if "when" in raw:
        _check_when(raw["when"], WHEN_KEYS[phase], "when", at)


def _check_emit(emit: dict[str, Any], at: Positions) -> None:
    _only(emit, EMIT_KEYS, "emit.", "emit", at)
    strength = emit.get("strength", 0)
    if not _integer(strength) or not 0 <= strength <= 100:
        raise at.fail("emit.strength", "emit.strength is an integer 0-100")
    if "kinds" in emit and not _strings(emit["kinds"]):
        raise at.fail("emit.kinds", "emit.kinds must be a list of symptom kinds")
    if "actions" in emit and not _strings(emit["actions"]):
        raise at.fail("emit.actions", "emit.actions must be a list of strings")


def _check_when(when: dict[str, Any], allowed: tuple[str, ...], prefix: str, at: Positions) -> None:
    _only(when, allowed, f"{prefix}.", prefix, at)
    for key in ("fields", "regex", "root"):
        if key in when and not isinstance(when[key], dict):
            raise at.fail(f"{prefix}.{key}", f"{prefix}.{key} must be a mapping")
    for name, pattern in sorted((when.get("regex") or {}).items()):
        try:
            re.compile(str(pattern))
        except re.error as exc:
            raise at.fail(f"{prefix}.regex.{name}", f"{prefix}.regex.{name} does not compile: {exc}") from None
    if "root" in when:
        _check_when(when["root"], SYMPTOM_WHEN_KEYS, f"{prefix}.root", at)


def _only(section: dict[str, Any], allowed: tuple[str, ...], prefix: str, what: str, at: Positions) -> None:
    for key in sorted(section):
        if key not in allowed:
            raise at.fail(prefix + key, f"unknown key '{prefix}{key}' in {what} (allowed: {', '.join(allowed)})")


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def accepted_keys() -> dict[str, tuple[str, ...]]:
    """Every key the loader accepts, dotted (``emit.kind``, ``when.root.kind``), with the phases that
    accept it: the list ``docs/rules.md`` must document, no more and no less."""
    found: dict[str, list[str]] = {}
    for phase in PHASES:
        keys = list(PHASE_KEYS[phase])
        for section, allowed in (("match", MATCH_KEYS), ("emit", EMIT_KEYS), ("when", WHEN_KEYS.get(phase, ()))):
            keys += [f"{section}.{key}" for key in allowed if section in PHASE_KEYS[phase]]
        if "root" in WHEN_KEYS.get(phase, ()):
            keys += [f"when.root.{key}" for key in SYMPTOM_WHEN_KEYS]
        for key in keys:
            found.setdefault(key, []).append(phase)
    return {key: tuple(phases) for key, phases in sorted(found.items())}
