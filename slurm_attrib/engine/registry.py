"""Registries of the Python parts of rules: rule implementations and line decoders.

A Python rule is registered under the id of its YAML file; the loader refuses a YAML rule that
names a missing implementation, and the linter flags an implementation without a YAML file.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any, Callable, TypeVar

if TYPE_CHECKING:
    from ..model import Symptom
    from ..ruleset import Rule
    from ..scan import Line
    from .context import EngineContext

RuleImpl = Callable[["EngineContext", "Rule"], int]
Decoder = Callable[["EngineContext", "Symptom", "Line", dict[str, Any]], bool]

RULES: dict[str, RuleImpl] = {}
DECODERS: dict[str, Decoder] = {}

F = TypeVar("F", bound=Callable[..., Any])


def rule(rule_id: str) -> Callable[[F], F]:
    """Register the implementation of the YAML rule ``rule_id``. It returns how many symptoms
    it changed (0 means it did not fire)."""

    def wrap(func: F) -> F:
        if rule_id in RULES:
            raise ValueError(f"rule implementation '{rule_id}' registered twice")
        RULES[rule_id] = func
        return func

    return wrap


def decoder(name: str) -> Callable[[F], F]:
    """Register a line decoder that refines a freshly extracted symptom; returning False drops it. Its
    ``extra`` holds the line's ``text`` (rank prefix stripped), the ``rule``, the rank ``stream`` and
    ``memo``, a dict that lives as long as the scan of one file (what a decoder works out once per file
    or per block; never module state, which diagnoses in the service's threads would share)."""

    def wrap(func: F) -> F:
        if name in DECODERS:
            raise ValueError(f"decoder '{name}' registered twice")
        DECODERS[name] = func
        return func

    return wrap


@cache
def load_all() -> None:
    """Import the modules that register implementations and decoders (once: the rule loader asks for
    every rule it checks, and listing the families' folder each time cost ~30 ms a start)."""
    import importlib
    import pkgutil

    from . import decoders, families, filters, outcome, refine  # noqa: F401

    for module in sorted(m.name for m in pkgutil.iter_modules(families.__path__)):
        importlib.import_module(f"{families.__name__}.{module}")
