"""``GET /metrics`` in the Prometheus exposition format. What the store knows (verdicts by status and
category, lost GPU-hours by category, culprit counts per node) and the finalizer's queue depth are read
at scrape time through the store's report functions; the diagnosis latency is observed by the service."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Callable, Optional

from prometheus_client import CollectorRegistry, Histogram, generate_latest, multiprocess
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..store import Store, StoreError
from ..store.reports import Window, node_offenders, verdict_totals

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class StoreCollector(Collector):
    """Gauges computed from the store on each scrape (``open_store`` gives a read-only store, or raises
    StoreError: then ``slurm_attrib_store_up`` is 0 and the store's gauges are left out)."""

    def __init__(self, open_store: Callable[[], AbstractContextManager[Store]], spool_dir: Optional[Path],
                 culprit_window: Callable[[], Window] = Window) -> None:
        self.open_store, self.spool_dir, self.culprit_window = open_store, spool_dir, culprit_window

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("slurm_attrib_store_up", "1 when the store could be read for this scrape")
        try:
            with self.open_store() as store:
                families = list(_store_families(store, self.culprit_window()))
            up.add_metric([], 1.0)
        except StoreError:
            families = []
            up.add_metric([], 0.0)
        yield up
        yield from families
        queue = self.queue_depth()
        if queue is not None:
            depth = GaugeMetricFamily("slurm_attrib_finalizer_queue_depth",
                                      "jobs waiting in the finalizer's queue (spool queue/)")
            depth.add_metric([], float(queue))
            yield depth

    def queue_depth(self) -> Optional[int]:
        if self.spool_dir is None or not (self.spool_dir / "queue").is_dir():
            return None
        from ..finalizer.queue import scan_queue

        pending, _ = scan_queue(self.spool_dir)
        return len(pending)


def _store_families(store: Store, culprit_window: Window) -> Iterator[Metric]:
    """All-time totals of the store's verdicts; the rows of ``slurm-attrib nodes`` in the culprit-history
    window (all time would cost 1.4 s a scrape on 1,000,000 verdicts, the window 0.1 s)."""
    verdicts = GaugeMetricFamily("slurm_attrib_verdicts", "stored verdicts (one per job restart)",
                                 labels=["status", "category"])
    hours: dict[str, float] = defaultdict(float)
    for (status, category), (jobs, gpu_hours) in verdict_totals(store).items():
        verdicts.add_metric([status, category], float(jobs))
        hours[category] += gpu_hours
    lost = GaugeMetricFamily("slurm_attrib_lost_gpu_hours", "GPU-hours of the failed jobs, by verdict category",
                             labels=["category"])
    for category, value in sorted(hours.items()):
        lost.add_metric([category], round(value, 4))
    culprits = GaugeMetricFamily("slurm_attrib_culprit_jobs", "jobs a node was the culprit of in the culprit-history "
                                 "window (finalizer.history_days)", labels=["cluster", "node"])
    for row in node_offenders(store, culprit_window):
        culprits.add_metric([row["cluster"], row["node"]], float(row["jobs"]))
    yield from (verdicts, lost, culprits)


class ServiceMetrics:
    """The service's registry: the store collector and the diagnosis latency histogram."""

    def __init__(self, open_store: Callable[[], AbstractContextManager[Store]], spool_dir: Optional[Path],
                 culprit_window: Callable[[], Window] = Window) -> None:
        self.store = StoreCollector(open_store, spool_dir, culprit_window)
        # With several server processes (service.processes), $PROMETHEUS_MULTIPROC_DIR is set before any of
        # them starts: each one's histogram lives in files there, and a scrape, whichever process answers
        # it, sums them all (prometheus_client's multiprocess mode).
        self.multiprocess = bool(os.environ.get(MULTIPROC_ENV))
        self.registry = CollectorRegistry()
        self.registry.register(self.store)
        self.latency = Histogram("slurm_attrib_diagnosis_seconds", "time to diagnose one posted bundle "
                                 "(unpack, engine, store)", buckets=LATENCY_BUCKETS,
                                 registry=None if self.multiprocess else self.registry)

    def exposition(self) -> bytes:
        if not self.multiprocess:
            return generate_latest(self.registry)
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        registry.register(self.store)
        return generate_latest(registry)
