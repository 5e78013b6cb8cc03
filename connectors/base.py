"""The evidence-source interface: what every connector is.

A connector is an evidence source: given the workload (which job, on which nodes) and the time window,
it gathers one kind of evidence, bounded in time and bytes, writes it into the bundle layout
(docs/bundle.md) and returns a :class:`SourceCoverage` saying what it got and why not more. Node-side
sources run in the Epilog collector (:mod:`slurm_attrib.collect`), controller-side ones in the
finalizer; both drive them through :func:`collect_all`, so a source that raises or hangs becomes a
coverage line, never an exception out of the collector. Tests inject :class:`FakeSource` (Meta GCM
style: a real implementation and a fake for every outside system).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Callable, Optional, Protocol, runtime_checkable

__all__ = [
    "STATES",
    "BundleWriter",
    "DisabledSource",
    "EvidenceSource",
    "FakeSource",
    "Limits",
    "MemoryBundle",
    "SourceCoverage",
    "Window",
    "Workload",
    "collect_all",
    "collect_bounded",
]

# The runner's states (ok/error/timeout/skipped) plus ``empty``: the source answered, with nothing in the window.
STATES = ("ok", "empty", "error", "timeout", "skipped")
WATCHDOG_GRACE_S = 0.5  # a source gets this long past its own timeout before the watchdog gives up on it


@dataclass(frozen=True)
class Workload:
    """The job a source gathers for. ``node`` is the node the collecting process runs on (node-side
    sources name their files after it); it is empty on the controller. ``kind`` says where it was
    discovered (``slurm``, ``kueue``, ``static``); a Kubernetes workload has its ``namespace``, its
    object ``name`` and its ``pods``. ``args`` holds per-workload arguments by connector name (a static
    inventory's ``sources``: ``{"files": {"app": [...]}, "loki": {}}``)."""

    cluster: str
    job_id: str
    nodes: tuple[str, ...] = ()
    node: str = ""
    user: str = ""
    uid: Optional[int] = None
    partition: str = ""
    job_name: str = ""
    work_dir: str = ""
    std_out: str = ""
    std_err: str = ""
    array_job_id: str = ""
    array_task_id: str = ""
    restart_count: int = 0
    kind: str = "slurm"
    namespace: str = ""
    name: str = ""
    pods: tuple[str, ...] = ()
    args: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class Window:
    """The job's span [start, end] and the margins read around it: sources read [since, until]."""

    start: datetime
    end: datetime
    before: timedelta = timedelta(0)
    after: timedelta = timedelta(0)

    @property
    def since(self) -> datetime:
        return self.start - self.before

    @property
    def until(self) -> datetime:
        return self.end + self.after


@dataclass(frozen=True)
class Limits:
    """What one source may spend: ``seconds`` of wall time and ``max_bytes`` written into the bundle."""

    seconds: float
    max_bytes: int


@dataclass(frozen=True)
class SourceCoverage:
    """What one source got: ``state`` is one of :data:`STATES`; ``reason`` says why (or what was cut);
    ``files`` the bundle paths written, ``bytes`` their size; ``query`` the command, query or path it
    read; ``size`` how large the evidence was at the source before the cap, when known; ``notes``
    problems worth a line of their own in the collection log; ``facts`` what the source learnt about the
    job or node that another step needs (the GPU list, the boot time, the nodes that went down)."""

    source: str
    state: str
    reason: str = ""
    files: tuple[str, ...] = ()
    bytes: int = 0
    seconds: float = 0.0
    query: str = ""
    size: int = 0
    truncated: bool = False
    notes: tuple[str, ...] = ()
    facts: dict[str, Any] = field(default_factory=dict, compare=False)
    origin: str = ""  # where the evidence came from, when that decides how far it is trusted (kernel log)

    def __post_init__(self) -> None:
        if self.state not in STATES:
            raise ValueError(f"{self.source}: coverage state {self.state!r} is not one of {', '.join(STATES)}")

    def entry(self) -> dict[str, Any]:
        """The line the node collector writes into collection.yaml ``sources``."""
        entry: dict[str, Any] = {"source": self.source, "state": self.state, "reason": self.reason,
                                 "bytes": self.bytes, "seconds": round(self.seconds, 3)}
        if self.origin:
            entry["origin"] = self.origin
        return entry

    def job_entry(self) -> dict[str, Any]:
        """The line ``watch`` and the finalizer's gap connectors write into job.yaml ``collection.sources``
        (the engine turns each into a coverage entry of the diagnosis)."""
        return {"source": self.source, "state": self.state, "reason": self.reason, "bytes": self.bytes,
                "query": self.query, "files": list(self.files)}


class BundleWriter(Protocol):
    """Where a source writes: ``rel`` is a path in the bundle layout; returns the bytes written."""

    def write(self, rel: str, data: bytes) -> int: ...


@runtime_checkable
class EvidenceSource(Protocol):
    """One kind of evidence. ``collect`` must stay within ``limits`` and report an outside failure
    (a missing tool, a refused query, a dead server) in the coverage rather than raise it."""

    @property
    def name(self) -> str:
        """The source's name in the coverage (collection.yaml ``sources``, job.yaml ``collection``)."""
        ...

    def collect(self, workload: Workload, window: Window, bundle: BundleWriter, limits: Limits) -> SourceCoverage:
        ...


@dataclass(frozen=True)
class DisabledSource:
    """A source turned off in the configuration: always ``skipped``, so the coverage still names it."""

    name: str
    reason: str = "disabled in the configuration"

    def collect(self, workload: Workload, window: Window, bundle: BundleWriter, limits: Limits) -> SourceCoverage:
        return SourceCoverage(self.name, "skipped", self.reason)


class MemoryBundle:
    """A :class:`BundleWriter` that keeps the files in memory: tests, the finalizer (which writes the
    job bundle in one step once every source ran) and the node facts (which write no file)."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def write(self, rel: str, data: bytes) -> int:
        if rel in self.files:
            raise FileExistsError(rel)
        self.files[rel] = data
        return len(data)


class _Gate:
    """Passes writes through until closed: a source abandoned by the watchdog cannot write into a
    bundle that has moved on without it."""

    def __init__(self, bundle: BundleWriter) -> None:
        self.bundle = bundle
        self.open = True
        self.lock = threading.Lock()

    def write(self, rel: str, data: bytes) -> int:
        with self.lock:
            if not self.open:
                raise TimeoutError(f"{rel}: written after the source's time was up")
            return self.bundle.write(rel, data)

    def close(self) -> None:
        with self.lock:
            self.open = False


def collect_bounded(source: EvidenceSource, workload: Workload, window: Window, bundle: BundleWriter,
                    limits: Limits) -> SourceCoverage:
    """Run one source under a watchdog. An exception becomes an ``error`` line; a source still running
    :data:`WATCHDOG_GRACE_S` after its time is left behind (a daemon thread) as ``timeout``. Only a
    ``BaseException`` that is not an ``Exception`` (the collector's SIGTERM exit) goes through."""
    began = time.monotonic()
    gate = _Gate(bundle)
    outcome: list[SourceCoverage] = []
    failure: list[BaseException] = []

    def work() -> None:
        try:
            outcome.append(source.collect(workload, window, gate, limits))
        except BaseException as exc:  # handed to the caller's thread below
            failure.append(exc)

    worker = threading.Thread(target=work, name=f"source-{source.name}", daemon=True)
    worker.start()
    try:
        worker.join(max(0.0, limits.seconds) + WATCHDOG_GRACE_S)
    finally:  # also when the collector's SIGTERM handler raises while we wait
        gate.close()
    seconds = time.monotonic() - began
    if worker.is_alive():
        return SourceCoverage(source.name, "timeout", f"no answer within {limits.seconds:.1f} s; abandoned",
                              seconds=seconds)
    if failure:
        if not isinstance(failure[0], Exception):
            raise failure[0]
        return SourceCoverage(source.name, "error", f"{type(failure[0]).__name__}: {failure[0]}", seconds=seconds)
    return outcome[0]


def collect_all(plan: Iterable[tuple[EvidenceSource, int]], workload: Workload, window: Window,
                bundle: BundleWriter, seconds: Callable[[], float]) -> Iterator[SourceCoverage]:
    """Every source of ``plan`` (a source and its byte cap) in order, each bounded on its own: one
    coverage line per source, yielded as it is done, so a caller stopped midway keeps the lines of
    the sources that ran. ``seconds()`` is asked as each source starts, so a shared budget shrinks."""
    for source, cap in plan:
        yield collect_bounded(source, workload, window, bundle, Limits(seconds(), cap))


@dataclass
class FakeSource:
    """A source for tests: writes ``files`` and reports ``state``; ``raises`` makes ``collect`` raise
    it, ``hang_s`` makes it sleep first (a source that ignores its timeout). Records its calls."""

    name: str
    state: str = "ok"
    files: dict[str, bytes] = field(default_factory=dict)
    reason: str = ""
    raises: Optional[BaseException] = None
    hang_s: float = 0.0
    calls: list[tuple[Workload, Window, Limits]] = field(default_factory=list)

    def collect(self, workload: Workload, window: Window, bundle: BundleWriter, limits: Limits) -> SourceCoverage:
        self.calls.append((workload, window, limits))
        if self.hang_s:
            time.sleep(self.hang_s)
        if self.raises is not None:
            raise self.raises
        written = sum(bundle.write(rel, data) for rel, data in sorted(self.files.items()))
        return SourceCoverage(self.name, self.state, self.reason, tuple(sorted(self.files)), written)
