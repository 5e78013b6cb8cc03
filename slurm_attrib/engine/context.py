"""The state one diagnosis run carries from phase to phase."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Optional

from ..bundle import Bundle
from ..model import Coverage, JobFacts, Symptom
from ..ruleset import RuleSet


@dataclass(frozen=True)
class EngineSettings:
    """Tolerances of the engine; every one is a documented, configurable number."""

    window_before_s: float = 120.0  # evidence this long before the job start still counts
    window_after_s: float = 120.0  # ... and this long after its end (teardown, log flush)
    skew_s: float = 2.0  # clock skew tolerated between nodes and between kernel and app logs
    ambiguity_s: float = 1.0  # unrelated root candidates closer than this make the verdict ambiguous
    supporting_per_group: int = 5  # supporting symptoms listed per (kind, node); the rest are counted
    supporting_max: int = 100  # supporting symptoms listed in all; the rest are counted per kind
    max_evidence: int = 200  # evidence lines listed in a diagnosis
    node_history: tuple[tuple[str, int], ...] = ()  # (node, past culprit count) from the store
    node_history_jobs: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (node, those earlier job ids)


@dataclass
class Outcome:
    """What FINAL decided."""

    status: str = "unattributed"
    category: str = "unknown"
    responsible: str = "unknown"
    root: Optional[Symptom] = None
    candidates: list[Symptom] = field(default_factory=list)
    culprit_nodes: list[str] = field(default_factory=list)
    summary: str = ""
    actions: list[str] = field(default_factory=list)
    annotations: list[str] = field(default_factory=list)
    decided_by: str = ""


@dataclass
class EngineContext:
    bundle: Bundle
    ruleset: RuleSet
    settings: EngineSettings
    symptoms: list[Symptom] = field(default_factory=list)
    coverage: dict[str, Coverage] = field(default_factory=dict)
    fired: Counter[str] = field(default_factory=Counter)
    assumptions: set[str] = field(default_factory=set)
    window_start: Optional[datetime] = None
    window_end: Optional[datetime] = None
    window_source: str = ""
    outcome: Outcome = field(default_factory=Outcome)
    leaders: list[Symptom] = field(default_factory=list)

    @property
    def job(self) -> JobFacts:
        return self.bundle.job

    def active(self) -> list[Symptom]:
        """Symptoms the filter phase kept, in stable order."""
        return [s for s in self.symptoms if s.dropped is None]

    def tolerance(self, seconds: float) -> timedelta:
        return timedelta(seconds=seconds)

    def in_window(self, when: Optional[datetime]) -> Optional[bool]:
        """True/False against the job window with its tolerances; None when it cannot be told."""
        if when is None or (self.window_start is None and self.window_end is None):
            return None
        if self.window_start and when < self.window_start - self.tolerance(self.settings.window_before_s):
            return False
        return not (self.window_end and when > self.window_end + self.tolerance(self.settings.window_after_s))

    def coverage_for(self, connector: str) -> Coverage:
        if connector not in self.coverage:
            self.coverage[connector] = Coverage(connector=connector, state="skipped")
        return self.coverage[connector]
