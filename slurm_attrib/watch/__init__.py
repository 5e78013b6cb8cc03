"""``slurm-attrib watch``: one orchestrator for every source of workloads.

discover (:mod:`.slurm` sacct, :mod:`.kueue` finished Kueue Workloads, :mod:`.static` an inventory
file) → collect through the configured connectors (:mod:`slurm_attrib.connectors`) into a bundle →
diagnose (the same engine and store as the finalizer) → sinks (:mod:`.sinks`: stdout, the SQLite
store, the AdminComment or Workload annotation, a POST to the service). :mod:`.orchestrate` runs
the rounds.

A discovery answers :class:`Found` items: the workload as the connectors see it, its window, and
the job facts that become job.yaml. ``key`` names the run for the seen-state, so a workload is
diagnosed once however many rounds see it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from ..connectors.base import Window, Workload

__all__ = ["Discovery", "Found"]


@dataclass(frozen=True)
class Found:
    """One finished workload: ``job`` holds the job.yaml keys (docs/bundle.md: job_id, cluster, nodes,
    start, end, state, exit_code, ...); ``key`` is unique per run (a requeued job's next run differs)."""

    key: str
    workload: Workload
    window: Window
    job: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


class Discovery(Protocol):
    """Where workloads come from. ``discover`` returns the workloads that finished in [since, until],
    sorted by end time then key (deterministic); a backend it cannot reach raises
    :class:`~slurm_attrib.errors.SlurmAttribError` with one line. ``annotate`` writes the verdict's
    short form back where the scheduler shows it (AdminComment, the Workload's annotation) and says
    what it did; a discovery without such a place returns ``""``."""

    @property
    def name(self) -> str: ...

    def discover(self, since: datetime, until: datetime) -> list[Found]: ...

    def annotate(self, found: Found, segment: str) -> str: ...
