"""One round of ``watch``: discover → collect → diagnose → sinks, for each workload not seen before.

Each workload gets a bundle in a temporary directory: job.yaml from the discovery's facts plus
``collection.sources`` (one coverage line per connector: state, reason, bytes, the query it ran, so
the diagnosis's coverage report names every connector), the connectors' files, and for each node
whose kernel log a connector shipped a ``collection/NODE.yaml`` saying so (origin ``shipped``:
such lines may explain a verdict, never drain a node). Connectors run one after the other, each
under its own budget and byte cap (:func:`~slurm_attrib.connectors.base.collect_bounded`): one that
hangs or raises is a coverage line. Two connectors writing the same bundle file (the files connector
and Loki both bringing a node's kernel log) are appended, in connector order.

A workload is marked seen once its verdict went through the sinks, so the next round does not
diagnose it again; one that failed (the engine refused its bundle) is marked too, with the error, so
a bad inventory entry does not repeat every round. One whose verdict a sink could not take (the service
down, the API refusing the annotation) is not: the next round diagnoses it again and retries every sink
(the store and the annotations take the same verdict twice as one), until it leaves the lookback.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Callable, Optional

import yaml

from ..bundle import shipped_kernel_record
from ..connectors.base import EvidenceSource, Limits, SourceCoverage, collect_bounded
from ..engine import Engine
from ..errors import AttribError
from ..slurm.ids import is_valid
from ..slurm.records import AcctRecord
from . import Discovery, Found
from .sinks import Sink
from .slurm import found_of

log = logging.getLogger("slurm_attrib.watch")

MAX_BYTES = 64 << 20  # what one connector may write into one workload's bundle

__all__ = ["MAX_BYTES", "AppendingBundle", "Orchestrator", "Outcome", "SeenState", "collect", "gatherer",
           "write_bundle"]


class AppendingBundle:
    """Bundle files in memory; a second write to one path appends (newline-separated)."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def write(self, rel: str, data: bytes) -> int:
        parts = Path(rel).parts
        if Path(rel).is_absolute() or ".." in parts or not parts:
            raise ValueError(f"{rel}: not a path inside the bundle")
        before = self.files.get(rel)
        if before is not None and rel.endswith(".gz"):
            raise FileExistsError(f"{rel}: a compressed file cannot be appended to")
        if before and not before.endswith(b"\n"):
            before += b"\n"
        self.files[rel] = (before or b"") + data
        return len(data)


@dataclass
class Outcome:
    """What became of one workload."""

    key: str
    job_id: str
    cluster: str
    coverage: list[SourceCoverage] = field(default_factory=list)
    diagnosis: Optional[dict[str, Any]] = None
    sinks: list[str] = field(default_factory=list)
    error: str = ""
    undelivered: bool = False  # a sink failed: the workload is not marked seen, so the next round retries it


class SeenState:
    """The keys of workloads already diagnosed, in a JSON file written atomically (temp + rename);
    ``path`` empty keeps them in memory only (``--once`` runs by hand)."""

    def __init__(self, path: str = "", keep: int = 100_000) -> None:
        self.path = path
        self.keep = keep
        self.keys: dict[str, str] = {}
        self.unsaved = False  # the last write of the file failed (warned once per outage)
        if path and os.path.exists(path):
            try:
                with open(path, encoding="utf-8") as handle:
                    loaded = json.load(handle)
                if isinstance(loaded, dict):
                    self.keys = {str(k): str(v) for k, v in loaded.items()}
            except (OSError, ValueError) as exc:
                log.warning("%s: cannot read the seen workloads (%s); starting afresh", path, exc)

    def __contains__(self, key: str) -> bool:
        return key in self.keys

    def add(self, key: str, when: str) -> None:
        self.keys[key] = when
        if len(self.keys) > self.keep:  # the oldest entries go: their workloads are past any lookback
            for old in sorted(self.keys, key=lambda k: (self.keys[k], k))[: len(self.keys) - self.keep]:
                del self.keys[old]
        if not self.path:
            return
        try:
            self._save()
        except OSError as exc:  # the verdicts still go out; a restart may diagnose these workloads again
            if not self.unsaved:
                log.warning("%s: cannot keep the seen workloads (%s); remembering them in memory only",
                            self.path, exc)
            self.unsaved = True

    def _save(self) -> None:
        folder = os.path.dirname(os.path.abspath(self.path))
        fd, tmp = tempfile.mkstemp(prefix=".watch-seen-", dir=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(self.keys, handle, sort_keys=True)
            os.replace(tmp, self.path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        self.unsaved = False


@dataclass
class Orchestrator:
    """``connectors`` in the order they run; ``budget_s`` and ``max_bytes`` bound each one; ``now``
    gives the verdict time (the only clock read, passed in)."""

    discovery: Discovery
    connectors: Sequence[EvidenceSource]
    engine: Engine
    sinks: Sequence[Sink]
    seen: SeenState
    now: Callable[[], datetime]
    budget_s: float = 60.0
    max_bytes: int = MAX_BYTES
    diagnose: Optional[Callable[[Engine, Path, datetime], dict[str, Any]]] = None

    def round(self, since: datetime, until: datetime) -> list[Outcome]:
        outcomes = []
        for found in self.discovery.discover(since, until):
            if found.key in self.seen:
                continue
            outcome = self.one(found)
            outcomes.append(outcome)
            if not outcome.undelivered:  # a sink that failed (the service down) is tried again next round
                self.seen.add(found.key, found.window.end.isoformat())
        return outcomes

    def one(self, found: Found) -> Outcome:
        outcome = Outcome(found.key, found.workload.job_id, found.workload.cluster)
        bundle = AppendingBundle()
        outcome.coverage = collect(self.connectors, found, bundle, self.budget_s, self.max_bytes)
        verdict_time = self.now()
        with tempfile.TemporaryDirectory(prefix="slurm-attrib-watch-") as tmp:
            try:
                write_bundle(Path(tmp), found, bundle, outcome.coverage)
                diagnose = self.diagnose or _diagnose
                outcome.diagnosis = diagnose(self.engine, Path(tmp), verdict_time)
            except (AttribError, OSError, ValueError, yaml.YAMLError) as exc:
                outcome.error = f"{type(exc).__name__}: {exc}"
                log.warning("%s: no verdict: %s", found.key, outcome.error)
                return outcome
            for sink in self.sinks:
                try:
                    done = sink.deliver(found, outcome.diagnosis, Path(tmp), verdict_time, self.discovery)
                except Exception as exc:  # one sink's failure must not keep the verdict from the others
                    done = f"{sink.name}: failed: {type(exc).__name__}: {exc}"
                    outcome.undelivered = True
                    log.warning("%s: %s", found.key, done)
                if done:
                    outcome.sinks.append(done)
        return outcome


def collect(connectors: Sequence[EvidenceSource], found: Found, bundle: AppendingBundle, budget_s: float,
            max_bytes: int) -> list[SourceCoverage]:
    """Every connector in order, each bounded on its own; a workload that names its sources (a static
    inventory) is asked of those only, and one it names that is not configured is a ``skipped`` line."""
    named = found.workload.args
    coverage = []
    for source in connectors:
        if named and source.name not in named:
            coverage.append(SourceCoverage(source.name, "skipped", "not among the workload's sources"))
            continue
        coverage.append(collect_bounded(source, found.workload, found.window, bundle, Limits(budget_s, max_bytes)))
    for name in sorted(set(named) - {s.name for s in connectors}):
        coverage.append(SourceCoverage(name, "skipped", "no such connector configured"))
    return coverage


def gatherer(connectors: Sequence[EvidenceSource], before: timedelta, after: timedelta, budget_s: float,
             max_bytes: int) -> Callable[[AcctRecord, Path], str]:
    """For ``sweep``: fill a bundle for a job sacct knows from the connectors (Loki, Prometheus) when no
    node bundle of it was kept; returns the sources that brought evidence (``loki+prometheus``)."""

    def gather(job: AcctRecord, dest: Path) -> str:
        if job.end is None:
            return ""
        found = found_of(job, before, after)
        bundle = AppendingBundle()
        coverage = collect(connectors, found, bundle, budget_s, max_bytes)
        write_bundle(dest, found, bundle, coverage)
        return "+".join(c.source for c in coverage if c.state == "ok")

    return gather


def _diagnose(engine: Engine, bundle: Path, verdict_time: datetime) -> dict[str, Any]:
    return engine.diagnose(bundle).to_dict()


def write_bundle(root: Path, found: Found, bundle: AppendingBundle, coverage: Sequence[SourceCoverage]) -> None:
    """job.yaml (the discovery's facts and the connectors' coverage), the files, collection/NODE.yaml."""
    job = dict(found.job)
    collection = dict(job.get("collection") or {}) if isinstance(job.get("collection"), dict) else {}
    collection["sources"] = [c.job_entry() for c in coverage]
    notes = list(collection.get("notes") or [])
    notes.extend(f"{c.source}: {note}" for c in coverage for note in c.notes)
    collection["notes"] = notes
    job["collection"] = collection
    for key in ("start", "end"):
        if isinstance(job.get(key), datetime):
            job[key] = job[key].isoformat()
    (root / "job.yaml").write_text(yaml.safe_dump(job, sort_keys=True), encoding="utf-8")
    for rel, data in sorted(bundle.files.items()):
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    shipped = sorted({node for c in coverage for node in c.facts.get("kernel_nodes", ())
                      if isinstance(node, str) and is_valid("node", node)})  # one plain path component
    if shipped:
        (root / "collection").mkdir(exist_ok=True)
        for node in shipped:
            (root / "collection" / f"{node}.yaml").write_text(
                yaml.safe_dump(shipped_kernel_record(node), sort_keys=True), encoding="utf-8")


def window_of(now: datetime, lookback_s: float) -> tuple[datetime, datetime]:
    return now - timedelta(seconds=lookback_s), now
