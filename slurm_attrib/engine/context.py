"""The state one diagnosis run carries from phase to phase."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Optional

from ..bundle import Bundle
from ..model import Coverage, JobFacts, Symptom
from ..ruleset import RuleSet
from ..scan import ScanStats
from ..settings import EngineSettings
from .causal import CausalModel

__all__ = ["EngineContext", "EngineSettings", "Outcome"]


@lru_cache(maxsize=64)
def _seconds(seconds: float) -> timedelta:
    """The few tolerances a run uses, asked for once per symptom by the window and refine rules."""
    return timedelta(seconds=seconds)


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
    causal: CausalModel = field(default_factory=CausalModel)
    notes: list[str] = field(default_factory=list)  # engine notes for the diagnosis (e.g. window drops)
    scan: ScanStats = field(default_factory=ScanStats)  # what extraction read, all files together (not in the JSON)
    # when the job's stuck collectives began (the watchdog's stamp less its 'ran for'), and the margin around it
    # (filter.outlived_fault); None without a stamped watchdog line
    hang: Optional[tuple[datetime, timedelta]] = None
    # application logs filter.outside_job_window re-read in another zone: file (bundle-relative) -> zone name
    app_zones: dict[str, str] = field(default_factory=dict)
    _kept: Optional[list[Symptom]] = field(default=None, repr=False)  # active() once the filter phase is over

    @property
    def job(self) -> JobFacts:
        return self.bundle.job

    def active(self) -> list[Symptom]:
        """Symptoms the filter phase kept, in ``Symptom.sort_key`` order: the engine sorts them once
        after extraction, and no later phase adds a symptom or changes what the key is made of.
        Once the filter phase is over (:meth:`filtered`) no rule drops one either, so the list is
        taken once; each call still returns a list of its own."""
        if self._kept is not None:
            return list(self._kept)
        return [s for s in self.symptoms if s.dropped is None]

    def order(self) -> None:
        """Sort the symptoms by ``Symptom.sort_key`` and number them in that order (``s0001`` ...): after
        extraction, and again when the filter phase moved a file's symptoms to another reading of its clock."""
        self.symptoms.sort(key=Symptom.sort_key)
        for number, sym in enumerate(self.symptoms, start=1):
            sym.id = f"s{number:04d}"

    def filtered(self) -> None:
        """The filter phase is over: what :meth:`active` returns is fixed from now on."""
        self._kept = [s for s in self.symptoms if s.dropped is None]

    def tolerance(self, seconds: float) -> timedelta:
        return _seconds(seconds)

    def in_window(self, when: Optional[datetime]) -> Optional[bool]:
        """True/False against the job window with its tolerances; None when it cannot be told."""
        if when is None or (self.window_start is None and self.window_end is None):
            return None
        return not self.beyond_window(when)

    def beyond_window(self, when: datetime) -> timedelta:
        """How far ``when`` lies outside the job window and its tolerances (zero inside)."""
        if self.window_start and when < self.window_start - self.tolerance(self.settings.window_before_s):
            return self.window_start - self.tolerance(self.settings.window_before_s) - when
        if self.window_end and when > self.window_end + self.tolerance(self.settings.window_after_s):
            return when - self.window_end - self.tolerance(self.settings.window_after_s)
        return timedelta(0)

    def coverage_for(self, connector: str) -> Coverage:
        if connector not in self.coverage:
            self.coverage[connector] = Coverage(connector=connector, state="skipped")
        return self.coverage[connector]
