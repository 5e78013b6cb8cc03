"""History feeds the verdict: how often each node of a job was already the culprit, for the
POST_OUTCOME rule ``post.repeat_offender`` (which sees the counts through EngineSettings.node_history)."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Optional

from ..engine import EngineSettings
from ..settings import DEFAULT_HISTORY_DAYS
from .db import Store
from .rows import JobKey

# Xids NVIDIA's investigatory workflows judge by repetition on the same GPU (application unless it repeats)
GPU_WORKFLOW_XIDS = (13, 31, 43)


def settings_with_history(engine_settings: EngineSettings, store: Store, nodes: list[str], now: datetime,
                          days: float = DEFAULT_HISTORY_DAYS, exclude: Optional[JobKey] = None) -> EngineSettings:
    """``engine_settings`` with ``node_history`` = jobs each node was the culprit of in the ``days`` before
    ``now`` (the job being diagnosed, ``exclude``, not counted), counted as distinct faults: jobs that
    met one Xid are one event, not a pattern."""
    counts = store.culprit_events(sorted(set(nodes)), now - timedelta(days=days), now, exclude)
    history = tuple((node, count) for node, count in sorted(counts.items()) if count)
    jobs = offender_evidence(store, nodes, now, days, exclude)
    gpu_jobs = store.gpu_xid_jobs(sorted(set(nodes)), GPU_WORKFLOW_XIDS, now - timedelta(days=days), now, exclude)
    return dataclasses.replace(engine_settings, node_history=history,
                               node_history_jobs=tuple((node, tuple(ids)) for node, ids in sorted(jobs.items())),
                               gpu_xid_history=tuple((node, gpu, tuple(ids))
                                                     for (node, gpu), ids in sorted(gpu_jobs.items())))


def offender_evidence(store: Store, nodes: list[str], now: datetime, days: float = DEFAULT_HISTORY_DAYS,
                      exclude: Optional[JobKey] = None) -> dict[str, list[str]]:
    """The earlier job ids behind each node's count (the evidence a repeat-offender flag rests on)."""
    jobs = store.culprit_jobs(sorted(set(nodes)), now - timedelta(days=days), now, exclude)
    return {node: ids for node, ids in jobs.items() if ids}
