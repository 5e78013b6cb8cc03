"""Engine settings: the engine's tolerances, in a module that imports nothing heavy, so that the
configuration loader (and through it the node epilog's collector) does not load the engine."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_HISTORY_DAYS = 30  # how far back a verdict reads its nodes' culprit history in the store


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
    workers: int = 0  # processes extracting a big bundle's files (this one and helpers); 0: every CPU, 1: this one
    # Bounds on what one file can make the engine hold: symptoms of one rule per rank (per file without
    # rank prefixes), and of one rule per file; the lines past a cap are counted in the coverage, not kept.
    max_symptoms_per_rank: int = 50
    max_symptoms_per_rule: int = 10_000
    node_history: tuple[tuple[str, int], ...] = ()  # (node, past culprit count) from the store
    node_history_jobs: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (node, those earlier job ids)
    # (node, GPU, earlier job ids) whose verdict cited an application-class Xid (13, 31, 43) on that GPU
    gpu_xid_history: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
