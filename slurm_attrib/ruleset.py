"""Rules as data: one YAML file per rule, loaded, validated and ordered deterministically.

A rule has an ``id`` (never reused), a ``version``, a ``phase`` and the keys of :mod:`.ruleschema`.
Extract rules are pure data (anchors, a regex, what to emit). Rules whose logic YAML cannot express
name a Python implementation registered under the same id (:mod:`.engine.registry`); they are
loaded, listed, linted and tested exactly like the others.

Bundled rules are part of the package: a broken one is a bug and stops the load. A site rule file
that cannot run (invalid YAML, a structural error, an id outside ``site.``, a duplicate id, a Python
part that is not registered) is quarantined instead: left out, logged at ERROR and recorded on the
RuleSet, so one bad drop-in never stops the finalizer while the bundled rules keep judging.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache, cached_property
from importlib import resources
from pathlib import Path
from typing import Any, Optional

import yaml

from . import diskcache
from .ruleschema import (
    PHASES,
    REFINE_STAGES,
    SITE_PREFIX,
    SOURCES,
    Positions,
    RuleFileError,
    RuleProblem,
    check_shape,
)
from .safeyaml import loader_version

SITE_RULES_DIR = "/etc/slurm-attrib/rules.d"
SITE_RULES_ENV = "SLURM_ATTRIB_RULES_D"
SITE_FIXTURES = "fixtures"
log = logging.getLogger("slurm_attrib.rules")


@dataclass(frozen=True)
class Match:
    """What an extract rule looks for: literal anchors (the prefilter) and the detailed regex.

    The regexes are compiled when first used: most rules never see a hit in a given bundle, and
    compiling all of them would cost every start of the command line. A site rule's are compiled
    when it is loaded, so one that does not compile is quarantined (bundled ones are tested)."""

    source: str
    anchors: tuple[str, ...]
    pattern: str
    exclude_pattern: str = ""
    programs: frozenset[str] = frozenset()  # kernel source: syslog tags whose own word the rule reads (unverified)
    # other sources whose files the rule reads too: an app rule for text a person may paste either as the job's
    # output or as a diagnostic (kubectl describe's pod status)
    also_in: tuple[str, ...] = ()

    @cached_property
    def regex(self) -> re.Pattern[str]:
        return re.compile(self.pattern)

    @property
    def ignores_case(self) -> bool:
        """Whether the regex ignores case ('(?i)'), read without compiling it: an engine's start compiles no
        rule's regex, only the first line a rule's prefilter pattern finds does."""
        return bool(leading_flags(self.pattern) & re.IGNORECASE)

    @cached_property
    def exclude(self) -> Optional[re.Pattern[str]]:
        return re.compile(self.exclude_pattern) if self.exclude_pattern else None


_GLOBAL_FLAGS = re.compile(r"\(\?([aiLmsux]+)\)")
_FLAG_BITS = {"a": re.ASCII, "i": re.IGNORECASE, "L": re.LOCALE, "m": re.MULTILINE, "s": re.DOTALL,
              "u": re.UNICODE, "x": re.VERBOSE}


def leading_flags(pattern: str) -> int:
    """The flags a pattern sets for its whole self: Python accepts '(?i)' and its kin only at its start
    (a scoped '(?i:...)' is not one)."""
    flags, at = 0, 0
    while (found := _GLOBAL_FLAGS.match(pattern, at)) is not None:
        for letter in found.group(1):
            flags |= _FLAG_BITS[letter]
        at = found.end()
    return flags


@dataclass(frozen=True)
class Rule:
    """One loaded rule. ``raw`` keeps the whole YAML mapping for linting and listing; ``positions``
    where each of its keys is in the file."""

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
    positions: Optional[Positions] = field(default=None, compare=False)

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    def position(self, key: str) -> tuple[int, int]:
        """(line, column) of a dotted key such as ``emit.strength``; the rule's line if unknown."""
        return self.positions.of(key) if self.positions else (self.line, 1)

    def sort_key(self) -> tuple[int, int, int, str]:
        stage = REFINE_STAGES.index(self.stage) if self.stage in REFINE_STAGES else 0
        return (PHASES.index(self.phase), stage, self.order, self.id)


@dataclass(frozen=True)
class RuleSet:
    """All rules in execution order, with a content hash that names this exact set (the rules that
    run, not the quarantined files)."""

    rules: tuple[Rule, ...]
    version: str
    digest: str
    quarantined: tuple[RuleProblem, ...] = ()

    def by_phase(self, phase: str) -> list[Rule]:
        return [r for r in self.rules if r.phase == phase]

    def get(self, rule_id: str) -> Optional[Rule]:
        for rule in self.rules:
            if rule.id == rule_id:
                return rule
        return None

    def describe(self) -> dict[str, Any]:
        return {"version": self.version, "hash": self.digest, "rules": len(self.rules)}


class _LineLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """A safe loader (libyaml's when present: 100 rule files load in a tenth of the time) that
    remembers where every mapping and key is, for ``path:line`` messages."""


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> dict[str, Any]:
    mapping: dict[str, Any] = {str(k): v for k, v in loader.construct_mapping(node, deep=True).items()}
    mapping["__line__"] = node.start_mark.line + 1
    mapping["__keys__"] = {str(loader.construct_object(k)): (k.start_mark.line + 1, k.start_mark.column + 1)
                           for k, _ in node.value}
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


def site_rules_dir(directory: Optional[str] = None, configured: str = SITE_RULES_DIR) -> Path:
    """The site rules directory: the argument (``--rules-dir``), else $SLURM_ATTRIB_RULES_D, else the
    configuration's ``rules_dir`` (default /etc/slurm-attrib/rules.d)."""
    return Path(directory or os.environ.get(SITE_RULES_ENV) or configured)


def site_fixtures_dir(directory: Optional[str] = None) -> Path:
    """Site fixtures live next to the site rules: ``rules.d/fixtures/<rule id>/{positive,negative}/``."""
    return site_rules_dir(directory) / SITE_FIXTURES


def site_rule_files(directory: Optional[str] = None) -> list[tuple[str, bytes]]:
    """Site rules from the site rules directory, sorted by name; the fixtures folder and hidden or
    ``_``-prefixed folders hold no rules."""
    base = site_rules_dir(directory)
    if not base.is_dir():
        return []
    return [(str(p), p.read_bytes()) for p in sorted(base.rglob("*.y*ml"))
            if p.is_file() and not _skipped(p.relative_to(base).parts[:-1])]


def _skipped(folders: tuple[str, ...]) -> bool:
    return any(part == SITE_FIXTURES or part.startswith(("_", ".")) for part in folders)


def parse_rule_file(path: str, content: bytes) -> dict[str, Any]:
    """Parse one rule file; raise RuleFileError with ``path:line`` on invalid YAML."""
    try:
        data = yaml.load(content.decode("utf-8"), Loader=_LineLoader)
    except UnicodeDecodeError as exc:
        raise RuleFileError(RuleProblem(path, 1, f"not UTF-8 ({exc.reason})")) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = f"invalid YAML: {getattr(exc, 'problem', exc)}"
        raise RuleFileError(RuleProblem(path, line, problem, col)) from None
    if not isinstance(data, dict):
        raise RuleFileError(RuleProblem(path, 1, "a rule file holds one mapping"))
    return data


def parse_bundled(files: list[tuple[str, bytes]]) -> list[dict[str, Any]]:
    """:func:`parse_rule_file` of each bundled file, kept in the cache (:mod:`.diskcache`) as JSON between runs:
    parsing the YAML is most of what loading the rules costs. The entry is named by the files' paths and
    contents, the YAML loader's versions and this module's code; a document JSON cannot hold as parsed is not
    stored."""
    digest = hashlib.sha256()
    for path, content in files:
        digest.update(path.encode() + b"\0" + hashlib.sha256(content).digest())
    shape = repr(("rules/1", loader_version(_LineLoader.__bases__[0]), _loader_code(), digest.hexdigest()))
    parsed: list[dict[str, Any]] = diskcache.cached_document(
        shape, ".rules.json", lambda: [parse_rule_file(p, c) for p, c in files],
        lambda document: _parsed_files(document, len(files)))
    return parsed


@cache
def _loader_code() -> str:
    """A digest of this module's source: the loader that makes what the rules cache holds."""
    return diskcache.source_digest(sys.modules[__name__])


def _parsed_files(parsed: Any, count: int) -> bool:
    return isinstance(parsed, list) and len(parsed) == count and all(isinstance(d, dict) for d in parsed)


def build_rule(path: str, data: dict[str, Any], origin: str = "bundled") -> Rule:
    """Turn a parsed mapping into a Rule; structural errors raise RuleFileError at the offending key."""
    line = int(data.get("__line__", 1))
    at = Positions(path, key_positions(data), line)
    raw = _strip_lines(data)
    for key in ("id", "version", "phase", "title", "description"):
        if key not in raw:
            raise at.fail("", f"missing required key '{key}'")
    phase = str(raw["phase"])
    if phase not in PHASES:
        raise at.fail("phase", f"unknown phase '{phase}' (one of {PHASES})")
    version = raw["version"]
    if not isinstance(version, int) or isinstance(version, bool):
        raise at.fail("version", "version must be an integer")
    check_shape(raw, phase, at)
    match = _build_match(raw.get("match"), at, compile_now=origin != "bundled") if phase == "extract" else None
    impl = str(raw.get("implementation", ""))
    _check_logic(raw, phase, impl, match, at)
    return Rule(
        id=str(raw["id"]), version=version, phase=phase, title=str(raw["title"]),
        description=str(raw["description"]).strip(), path=path, line=line,
        status=str(raw.get("status", "stable")), stage=str(raw.get("stage", "")),
        order=int(raw.get("order", 100)), references=tuple(raw.get("references") or ()),
        falsepositives=tuple(raw.get("falsepositives") or ()), match=match,
        emit=dict(raw.get("emit") or {}), implementation=impl, params=dict(raw.get("params") or {}),
        raw=raw, origin=origin, positions=at,
    )


def _check_logic(raw: dict[str, Any], phase: str, impl: str, match: Optional[Match], at: Positions) -> None:
    """A rule needs something to run: a match (extract), a ``when`` (filter, post_outcome) or Python."""
    if impl not in ("", "python"):
        raise at.fail("implementation", "implementation must be 'python'")
    if phase == "extract" and match is None and not impl:
        raise at.fail("", "an extract rule needs a 'match' section or 'implementation: python'")
    if phase in ("filter", "post_outcome") and not impl and "when" not in raw:
        raise at.fail("", f"a {phase} rule needs 'implementation: python' or a 'when' section")
    if phase in ("refine", "final") and not impl:
        raise at.fail("", f"a {phase} rule needs 'implementation: python'")


def key_positions(data: dict[str, Any], prefix: str = "") -> dict[str, tuple[int, int]]:
    """(line, column) of every key of a parsed file by dotted path; list items by index."""
    table: dict[str, tuple[int, int]] = {}
    for key, where in (data.get("__keys__") or {}).items():
        table[prefix + key] = where
        table.update(_positions_in(data.get(key), f"{prefix}{key}."))
    return table


def _positions_in(value: Any, prefix: str) -> dict[str, tuple[int, int]]:
    if isinstance(value, dict):
        return key_positions(value, prefix)
    table: dict[str, tuple[int, int]] = {}
    if isinstance(value, list):
        for index, item in enumerate(value):
            table.update(_positions_in(item, f"{prefix}{index}."))
    return table


def _strip_lines(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_lines(v) for k, v in value.items() if k not in ("__line__", "__keys__")}
    if isinstance(value, list):
        return [_strip_lines(v) for v in value]
    return value


def _build_match(data: Any, at: Positions, compile_now: bool = True) -> Optional[Match]:
    if not isinstance(data, dict):
        return None
    source = str(data.get("source", ""))
    if source not in SOURCES:
        raise at.fail("match.source", f"match.source must be one of {SOURCES}")
    anchors = data.get("anchors") or []
    if not isinstance(anchors, list) or not anchors or not all(isinstance(a, str) and a for a in anchors):
        raise at.fail("match.anchors", "match.anchors must be a non-empty list of literal strings")
    exclude = _pattern(at, data.get("exclude"), "exclude", compile_now) if data.get("exclude") else ""
    programs = data.get("programs") or []
    if not isinstance(programs, list) or not all(isinstance(p, str) and re.fullmatch(r"[\w.@-]{1,64}", p)
                                                 for p in programs) or (programs and source != "kernel"):
        raise at.fail("match.programs", "match.programs must be a list of syslog program names, on a kernel rule")
    also = data.get("also_in") or []
    if not isinstance(also, list) or (also and (source != "app" or also != ["diag"])):
        # only the job's own words pasted as a diagnostic: a rule must never read the job's output as the kernel's
        raise at.fail("match.also_in", "match.also_in must be [diag], on an app rule")
    return Match(source=source, anchors=tuple(anchors), pattern=_pattern(at, data.get("regex"), "regex", compile_now),
                 exclude_pattern=exclude, programs=frozenset(programs), also_in=tuple(sorted(also)))


def _pattern(at: Positions, pattern: Any, key: str, compile_now: bool) -> str:
    if not isinstance(pattern, str) or not pattern:
        raise at.fail(f"match.{key}", f"match.{key} must be a non-empty regular expression")
    if compile_now:
        try:
            re.compile(pattern)  # kept in re's own cache for the first use
        except re.error as exc:
            raise at.fail(f"match.{key}", f"match.{key} does not compile: {exc}") from None
    return pattern


def python_part_problem(rule: Rule) -> Optional[RuleProblem]:
    """The rule names a Python implementation or a decoder that is not registered: it cannot run."""
    from .engine import registry  # the engine imports this module: import it when first needed

    registry.load_all()
    if rule.implementation == "python" and rule.id not in registry.RULES:
        return _problem(rule, "implementation",
                        f"rule '{rule.id}' names a Python implementation that is not registered")
    decoder = rule.emit.get("decoder")
    if decoder and str(decoder) not in registry.DECODERS:
        return _problem(rule, "emit.decoder", f"unknown decoder '{decoder}'")
    return None


def _problem(rule: Rule, key: str, message: str) -> RuleProblem:
    line, col = rule.position(key)
    return RuleProblem(rule.path, line, message, col, rule.id)


def load_ruleset(site_dir: Optional[str] = None, include_site: bool = True,
                 extra: Iterable[tuple[str, bytes]] = ()) -> RuleSet:
    """Load bundled rules (and site rules unless disabled). A broken bundled rule stops the load;
    a site or extra file that cannot run is quarantined (see the module docstring)."""
    rules: dict[str, Rule] = {}
    contents: dict[str, bytes] = {}
    files = bundled_rule_files()
    try:
        _add_bundled(rules, contents, files, parse_bundled(files))
    except RuleFileError:  # a cached parse that does not build (changed by hand, or a broken release wrote it)
        rules.clear()
        contents.clear()
        _add_bundled(rules, contents, files, [parse_rule_file(path, content) for path, content in files])
    others = [(p, c, "site") for p, c in site_rule_files(site_dir)] if include_site else []
    quarantined: list[RuleProblem] = []
    for path, content, origin in [*others, *((p, c, "extra") for p, c in extra)]:
        try:
            _admit(rules, path, content, origin)
        except RuleFileError as exc:
            quarantined.append(exc.problem)
            log.error("site rule quarantined, left out of the ruleset: %s", exc.problem)
            continue
        contents[path] = content
    return _ruleset(rules, contents, tuple(quarantined))


def _add_bundled(rules: dict[str, Rule], contents: dict[str, bytes], files: list[tuple[str, bytes]],
                 parsed: list[dict[str, Any]]) -> None:
    for (path, content), data in zip(files, parsed):
        rule = build_rule(path, data, "bundled")
        _refuse_site_id(rule)
        _add(rules, rule)
        contents[path] = content


def _admit(rules: dict[str, Rule], path: str, content: bytes, origin: str) -> Rule:
    """Load one site (or extra) file and add its rule; RuleFileError when it cannot run."""
    rule = build_rule(path, parse_rule_file(path, content), origin)
    if not rule.id.startswith(SITE_PREFIX):
        raise _fail(rule, "id", f"a site rule id starts with '{SITE_PREFIX}' (got '{rule.id}'); that "
                                "namespace is never used by bundled rules, so an upgrade cannot collide")
    problem = python_part_problem(rule)
    if problem is not None:
        raise RuleFileError(problem)
    _add(rules, rule)
    return rule


def _refuse_site_id(rule: Rule) -> None:
    if rule.id.startswith(SITE_PREFIX):
        raise _fail(rule, "id", f"bundled rules never use the '{SITE_PREFIX}' id namespace")


def _add(rules: dict[str, Rule], rule: Rule) -> None:
    if rule.id in rules:
        raise _fail(rule, "id", f"duplicate rule id '{rule.id}' (first defined at {rules[rule.id].where})")
    rules[rule.id] = rule


def _fail(rule: Rule, key: str, message: str) -> RuleFileError:
    return RuleFileError(_problem(rule, key, message))


def _ruleset(rules: dict[str, Rule], contents: dict[str, bytes], quarantined: tuple[RuleProblem, ...]) -> RuleSet:
    """The RuleSet in execution order; its digest covers exactly the files that run."""
    from . import __version__

    hasher = hashlib.sha256()
    for rule in sorted(rules.values(), key=lambda r: r.id):
        hasher.update(rule.id.encode() + b"\0" + contents[rule.path] + b"\0")
    ordered = tuple(sorted(rules.values(), key=Rule.sort_key))
    return RuleSet(rules=ordered, version=__version__, digest=hasher.hexdigest()[:16], quarantined=quarantined)
