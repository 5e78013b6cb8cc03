"""Rules as data: one YAML file per rule, loaded, validated and ordered deterministically.

A rule has an ``id`` (never reused), a ``version``, a ``phase`` and the fields of DESIGN.md §6.
Extract rules are pure data (anchors, a regex, what to emit). Rules whose logic YAML cannot express
name a Python implementation registered under the same id (:mod:`.engine.registry`); they are
loaded, listed, linted and tested exactly like the others.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Optional

import yaml

from .errors import RuleError

PHASES = ("extract", "filter", "refine", "final", "post_outcome")
REFINE_STAGES = ("correlate", "classify", "demote")
SOURCES = ("kernel", "app", "scheduler", "metrics", "diag")
BLOCKS = ("python_traceback", "continuation", "torchrun_summary")
SITE_RULES_DIR = "/etc/slurm-attrib/rules.d"
SITE_RULES_ENV = "SLURM_ATTRIB_RULES_D"


@dataclass(frozen=True)
class Match:
    """What an extract rule looks for: literal anchors (the prefilter) and the detailed regex."""

    source: str
    anchors: tuple[str, ...]
    regex: re.Pattern[str]
    block: Optional[str] = None
    exclude: Optional[re.Pattern[str]] = None


@dataclass(frozen=True)
class Rule:
    """One loaded rule. ``raw`` keeps the whole YAML mapping for linting and listing."""

    id: str
    version: int
    phase: str
    title: str
    description: str
    path: str
    line: int
    status: str = "stable"
    stage: str = ""
    order: int = 100
    references: tuple[str, ...] = ()
    falsepositives: tuple[str, ...] = ()
    match: Optional[Match] = None
    emit: dict[str, Any] = field(default_factory=dict)
    implementation: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict, compare=False)
    origin: str = "bundled"

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    def sort_key(self) -> tuple[int, int, int, str]:
        stage = REFINE_STAGES.index(self.stage) if self.stage in REFINE_STAGES else 0
        return (PHASES.index(self.phase), stage, self.order, self.id)


@dataclass(frozen=True)
class RuleSet:
    """All rules in execution order, with a content hash that names this exact set."""

    rules: tuple[Rule, ...]
    version: str
    digest: str

    def by_phase(self, phase: str) -> list[Rule]:
        return [r for r in self.rules if r.phase == phase]

    def get(self, rule_id: str) -> Optional[Rule]:
        for rule in self.rules:
            if rule.id == rule_id:
                return rule
        return None

    def describe(self) -> dict[str, Any]:
        return {"version": self.version, "hash": self.digest, "rules": len(self.rules)}


class _LineLoader(yaml.SafeLoader):
    """A SafeLoader that remembers the line of every mapping, for ``path:line`` messages."""


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> dict[str, Any]:
    mapping: dict[str, Any] = {str(k): v for k, v in loader.construct_mapping(node, deep=True).items()}
    mapping["__line__"] = node.start_mark.line + 1
    return mapping


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def bundled_rule_files() -> list[tuple[str, bytes]]:
    """(display path, content) of every bundled rule, sorted by path."""
    root = resources.files("slurm_attrib.rulepacks")
    found: list[tuple[str, bytes]] = []
    _walk(root, "rules", found)
    return sorted(found)


def _walk(node: Any, prefix: str, found: list[tuple[str, bytes]]) -> None:
    for child in node.iterdir():
        name = f"{prefix}/{child.name}"
        if child.is_dir():
            if not child.name.startswith(("_", ".")):
                _walk(child, name, found)
        elif child.name.endswith((".yaml", ".yml")):
            found.append((name, child.read_bytes()))


def site_rule_files(directory: Optional[str] = None) -> list[tuple[str, bytes]]:
    """Site rules from /etc/slurm-attrib/rules.d (or $SLURM_ATTRIB_RULES_D), sorted by name."""
    base = Path(directory or os.environ.get(SITE_RULES_ENV, SITE_RULES_DIR))
    if not base.is_dir():
        return []
    return [(str(p), p.read_bytes()) for p in sorted(base.rglob("*.y*ml")) if p.is_file()]


def parse_rule_file(path: str, content: bytes) -> dict[str, Any]:
    """Parse one rule file; raise RuleError with ``path:line`` on invalid YAML."""
    try:
        data = yaml.load(content.decode("utf-8"), Loader=_LineLoader)
    except UnicodeDecodeError as exc:
        raise RuleError(f"{path}:1: not UTF-8 ({exc.reason})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else 1
        raise RuleError(f"{path}:{line}: invalid YAML: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(data, dict):
        raise RuleError(f"{path}:1: a rule file holds one mapping")
    return data


def build_rule(path: str, data: dict[str, Any], origin: str = "bundled") -> Rule:
    """Turn a parsed mapping into a Rule; structural errors raise RuleError with ``path:line``."""
    line = int(data.get("__line__", 1))
    raw = _strip_lines(data)
    for key in ("id", "version", "phase", "title", "description"):
        if key not in raw:
            raise RuleError(f"{path}:{line}: missing required key '{key}'")
    phase = str(raw["phase"])
    if phase not in PHASES:
        raise RuleError(f"{path}:{_line_of(data, 'phase', line)}: unknown phase '{phase}' (one of {PHASES})")
    try:
        version = int(raw["version"])
    except (TypeError, ValueError):
        raise RuleError(f"{path}:{_line_of(data, 'version', line)}: version must be an integer") from None
    match = _build_match(path, data.get("match"), line) if phase == "extract" else None
    impl = str(raw.get("implementation", ""))
    if impl not in ("", "python"):
        raise RuleError(f"{path}:{_line_of(data, 'implementation', line)}: implementation must be 'python'")
    if phase == "extract" and match is None and not impl:
        raise RuleError(f"{path}:{line}: an extract rule needs a 'match' section or 'implementation: python'")
    if phase != "extract" and not impl and "when" not in raw:
        raise RuleError(f"{path}:{line}: a {phase} rule needs 'implementation: python' or a 'when' section")
    return Rule(
        id=str(raw["id"]), version=version, phase=phase, title=str(raw["title"]),
        description=str(raw["description"]).strip(), path=path, line=line,
        status=str(raw.get("status", "stable")), stage=str(raw.get("stage", "")),
        order=int(raw.get("order", 100)), references=tuple(str(r) for r in raw.get("references") or ()),
        falsepositives=tuple(str(r) for r in raw.get("falsepositives") or ()), match=match,
        emit=dict(raw.get("emit") or {}), implementation=impl, params=dict(raw.get("params") or {}),
        raw=raw, origin=origin,
    )


def _line_of(data: dict[str, Any], key: str, default: int) -> int:
    value = data.get(key)
    return int(value["__line__"]) if isinstance(value, dict) and "__line__" in value else default


def _strip_lines(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_lines(v) for k, v in value.items() if k != "__line__"}
    if isinstance(value, list):
        return [_strip_lines(v) for v in value]
    return value


def _build_match(path: str, data: Any, line: int) -> Optional[Match]:
    if not isinstance(data, dict):
        return None
    where = f"{path}:{data.get('__line__', line)}"
    source = str(data.get("source", ""))
    if source not in SOURCES:
        raise RuleError(f"{where}: match.source must be one of {SOURCES}")
    anchors = data.get("anchors") or []
    if not isinstance(anchors, list) or not anchors or not all(isinstance(a, str) and a for a in anchors):
        raise RuleError(f"{where}: match.anchors must be a non-empty list of literal strings")
    block = data.get("block")
    if block is not None and block not in BLOCKS:
        raise RuleError(f"{where}: match.block must be one of {BLOCKS}")
    return Match(source=source, anchors=tuple(anchors), regex=_compile(where, data.get("regex"), "regex"),
                 block=block, exclude=_compile(where, data.get("exclude"), "exclude") if data.get("exclude")
                 else None)


def _compile(where: str, pattern: Any, key: str) -> re.Pattern[str]:
    if not isinstance(pattern, str) or not pattern:
        raise RuleError(f"{where}: match.{key} must be a non-empty regular expression")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise RuleError(f"{where}: match.{key} does not compile: {exc}") from None


def load_ruleset(site_dir: Optional[str] = None, include_site: bool = True,
                 extra: Iterable[tuple[str, bytes]] = ()) -> RuleSet:
    """Load bundled rules (and site rules unless disabled). Duplicate ids are an error that names
    both places; a site rule cannot shadow a bundled id."""
    files = [(p, c, "bundled") for p, c in bundled_rule_files()]
    if include_site:
        files += [(p, c, "site") for p, c in site_rule_files(site_dir)]
    files += [(p, c, "extra") for p, c in extra]
    rules: dict[str, Rule] = {}
    hasher = hashlib.sha256()
    for path, content, origin in files:
        rule = build_rule(path, parse_rule_file(path, content), origin)
        if rule.id in rules:
            first = rules[rule.id]
            raise RuleError(f"{rule.where}: duplicate rule id '{rule.id}' (first defined at {first.where})")
        rules[rule.id] = rule
    for rule in sorted(rules.values(), key=lambda r: r.id):
        hasher.update(rule.id.encode() + b"\0" + _content_of(files, rule.path) + b"\0")
    ordered = tuple(sorted(rules.values(), key=Rule.sort_key))
    from . import __version__

    return RuleSet(rules=ordered, version=__version__, digest=hasher.hexdigest()[:16])


def _content_of(files: list[tuple[str, bytes, str]], path: str) -> bytes:
    for p, content, _ in files:
        if p == path:
            return content
    return b""
