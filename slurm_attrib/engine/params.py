"""Validated readers of a Python rule's ``params``: the policy tables that live in the rule's YAML.

A table that decides a verdict (which Slurm state means which category, which kinds are the evidence
of a state) is data in the rule file, not a constant in Python; these readers fail with a RuleError
that names the rule file and line when the YAML does not hold what the rule needs.
"""

from __future__ import annotations

from ..errors import RuleError
from ..ruleset import Rule


def _required(rule_: Rule, key: str) -> object:
    if key not in rule_.params:
        raise RuleError(f"{rule_.where}: {rule_.id} needs params.{key}")
    return rule_.params[key]


def str_list(rule_: Rule, key: str) -> tuple[str, ...]:
    """``params.<key>``, a list of strings (Slurm states, categories, kinds)."""
    value = _required(rule_, key)
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise RuleError(f"{rule_.where}: params.{key} must be a list of non-empty strings")
    return tuple(value)


def str_map(rule_: Rule, key: str) -> dict[str, str]:
    """``params.<key>``, a mapping of strings to strings (category → kind, category → responsible)."""
    value = _required(rule_, key)
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) and v
                                              for k, v in value.items()):
        raise RuleError(f"{rule_.where}: params.{key} must map names to non-empty strings")
    return dict(value)


def record_map(rule_: Rule, key: str, fields: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """``params.<key>``, a mapping of names to records that hold exactly ``fields`` (strings), as
    tuples in the order of ``fields``: ``TIMEOUT: {category: job_limit, responsible: workload}``."""
    value = _required(rule_, key)
    if not isinstance(value, dict):
        raise RuleError(f"{rule_.where}: params.{key} must be a mapping")
    out: dict[str, tuple[str, ...]] = {}
    for name, record in value.items():
        if not isinstance(record, dict) or sorted(record) != sorted(fields) \
                or not all(isinstance(v, str) and v for v in record.values()):
            raise RuleError(f"{rule_.where}: params.{key}.{name} must hold {', '.join(fields)} (strings)")
        out[str(name)] = tuple(record[f] for f in fields)
    return out


def list_map(rule_: Rule, key: str) -> dict[str, tuple[str, ...]]:
    """``params.<key>``, a mapping of names to lists of strings (Slurm state → kinds)."""
    value = _required(rule_, key)
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, list) and all(isinstance(i, str) and i for i in v)
            for k, v in value.items()):
        raise RuleError(f"{rule_.where}: params.{key} must map names to lists of non-empty strings")
    return {k: tuple(v) for k, v in value.items()}


def int_list(rule_: Rule, key: str) -> tuple[int, ...]:
    """``params.<key>``, a list of integers (Xid codes)."""
    value = _required(rule_, key)
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise RuleError(f"{rule_.where}: params.{key} must be a list of integers")
    return tuple(value)


def seconds(rule_: Rule, key: str) -> float:
    """``params.<key>``, a non-negative number of seconds."""
    value = _required(rule_, key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise RuleError(f"{rule_.where}: params.{key} must be a non-negative number of seconds")
    return float(value)


def integer(rule_: Rule, key: str) -> int:
    """``params.<key>``, a non-negative whole number (a strength, a count)."""
    value = _required(rule_, key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RuleError(f"{rule_.where}: params.{key} must be a non-negative whole number")
    return value
