"""The causal model (rules/refine/causal_model.yaml): which symptom can cause which, at what scope.

It is data: classes of symptom kinds, edges ``cause → effect @ scope`` and the classes that count as
independent physical faults. The demote stage asks it two questions: does the leading root explain
this symptom, and are two faults independent (neither can cause the other), which makes the verdict
ambiguous when they fall inside the decision window.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from ..errors import RuleError
from ..model import Symptom

SCOPES = ("same_gpu", "same_node", "peer", "any_rank")


@dataclass(frozen=True)
class SymptomClass:
    """Kinds of a class, optionally narrowed to some categories (a CUDA error is a hardware error
    only when its text says so)."""

    name: str
    kinds: frozenset[str]
    categories: frozenset[str] = frozenset()

    def contains(self, sym: Symptom) -> bool:
        return sym.kind in self.kinds and (not self.categories or sym.category in self.categories)


@dataclass(frozen=True)
class Edge:
    cause: str
    effect: str
    scope: str


@dataclass(frozen=True)
class CausalModel:
    classes: tuple[SymptomClass, ...] = ()
    edges: tuple[Edge, ...] = ()
    independent: frozenset[str] = frozenset()
    decision_window_s: float = 0.0
    single_node: Optional[str] = None  # the job's only node: a symptom without a node happened there
    _classes_by_kind: dict[tuple[str, str, bool], frozenset[str]] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False)

    @classmethod
    def from_params(cls, params: dict[str, Any], where: str = "causal model") -> CausalModel:
        """Build the model from the rule's params; raises RuleError on an unknown class or scope."""
        classes = tuple(SymptomClass(name=str(name), kinds=frozenset(map(str, spec.get("kinds") or ())),
                                     categories=frozenset(map(str, spec.get("categories") or ())))
                        for name, spec in sorted((params.get("classes") or {}).items()) if name != "__line__")
        names = {c.name for c in classes}
        edges = tuple(Edge(str(e["cause"]), str(e["effect"]), str(e["scope"])) for e in params.get("edges") or ())
        for edge in edges:
            if edge.cause not in names or edge.effect not in names or edge.scope not in SCOPES:
                raise RuleError(f"{where}: edge {edge.cause} -> {edge.effect} @ {edge.scope}: unknown class or "
                                f"scope (scopes: {', '.join(SCOPES)})")
        independent = frozenset(map(str, params.get("independent") or ()))
        if independent - names:
            raise RuleError(f"{where}: independent names unknown classes {sorted(independent - names)}")
        return cls(classes=classes, edges=edges, independent=independent,
                   decision_window_s=float(params.get("decision_window_s", 0.0)))

    def classes_of(self, sym: Symptom) -> frozenset[str]:
        """The classes the symptom belongs to: a function of its kind and category (and whether it is an
        exception of the program's own code, ``fields.code_error``), so it is worked out once per pair (the
        refine phase asks it for every candidate cause of every symptom)."""
        key = (sym.kind, sym.category, sym.fields.get("code_error") is True)
        found = self._classes_by_kind.get(key)
        if found is None:
            found = frozenset(c.name for c in self.classes if c.contains(sym))
            if key[2]:  # an exception the program's own data or code raises: no fault of a device causes it
                found = found - {"app_error", "app_hw_error"}
            self._classes_by_kind[key] = found
        return found

    def explains(self, cause: Symptom, effect: Symptom) -> bool:
        """True when some edge lets ``cause`` produce ``effect`` at the edge's scope."""
        causes, effects = self.classes_of(cause), self.classes_of(effect)
        return any(e.cause in causes and e.effect in effects and self._in_scope(e.scope, cause, effect)
                   for e in self.edges)

    def program_error(self, sym: Symptom, classes: frozenset[str] = frozenset({"app_error"})) -> bool:
        """An error of the program's own making: an exception of its code (``fields.code_error``) or a workload
        error of one of ``classes`` (app_error: an illegal access of its kernel, an uncaught C++ exception, a
        heap it corrupted; with gpu_oom_error, its tensors filling the GPU)."""
        return bool(sym.fields.get("code_error")) or (sym.responsible == "workload"
                                                       and bool(self.classes_of(sym) & classes))

    def is_physical(self, sym: Symptom) -> bool:
        """A fault of an independent class: no fault on another node can cause it."""
        return bool(self.classes_of(sym) & self.independent)

    def independent_faults(self, a: Symptom, b: Symptom) -> bool:
        """Two physical faults on different nodes, neither explaining the other."""
        return (self.is_physical(a) and self.is_physical(b) and self._node(a) != self._node(b)
                and not self.explains(a, b) and not self.explains(b, a))

    def _node(self, sym: Symptom) -> Optional[str]:
        return sym.node or self.single_node

    def _in_scope(self, scope: str, cause: Symptom, effect: Symptom) -> bool:
        if scope == "any_rank":
            return True
        cause_node, effect_node = self._node(cause), self._node(effect)
        if scope == "peer":
            return cause_node is not None and cause_node in (effect_node, effect.fields.get("peer_node"))
        same_node = cause_node is not None and cause_node == effect_node
        if scope == "same_node":
            return same_node
        return same_node and (cause.gpu is None or effect.gpu is None or cause.gpu == effect.gpu)
