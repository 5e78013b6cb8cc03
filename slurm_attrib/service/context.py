"""What one running service holds: its configuration, the store it reads (read-only connections kept
in a small pool) and writes (through :mod:`slurm_attrib.attribution`), a small pool of engines, the tokens,
the limits and the metrics. :mod:`.app` builds the HTTP side over it."""

from __future__ import annotations

import json
import os
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Optional

from ..attribution import Attribution, History, SqliteVerdictStore, attribute
from ..config import Config
from ..engine import Engine
from ..errors import BundleError
from ..settings import DEFAULT_HISTORY_DAYS
from ..store import Store, StoreError, StoreSettings
from ..store import history as store_history
from ..store.reports import Window
from ..store.rows import JobKey
from ..store.spool import resolve_spool_dir
from ..store.timespec import parse_when
from .guard import Network, RateLimiter, Tokens, networks
from .metrics import ServiceMetrics
from .tarsafe import Limits


class EnginePool:
    """At most ``size`` diagnoses at once, each on an engine of its own (the hyperscan prefilter keeps one
    ``Scratch`` per engine, which two scans at once must not share); engines are made on first need and kept."""

    def __init__(self, make: Callable[[], Engine], size: int) -> None:
        self._make, self._free = make, queue.SimpleQueue[Engine]()
        self._slots = threading.BoundedSemaphore(max(1, size))

    def warm(self) -> None:
        self._free.put(self._make())

    @contextmanager
    def engine(self) -> Iterator[Engine]:
        with self._slots:
            try:
                engine = self._free.get_nowait()
            except queue.Empty:
                engine = self._make()
            try:
                yield engine
            finally:
                self._free.put(engine)


class ReaderPool:
    """Open read-only stores waiting for the next request, each with the identity of its file."""

    def __init__(self, keep: int = 64) -> None:
        self.keep, self._idle = keep, queue.SimpleQueue[tuple[tuple[int, int], Store]]()

    @staticmethod
    def _identity(path: str) -> tuple[int, int]:
        info = os.stat(path)
        return info.st_dev, info.st_ino

    def take(self, path: str, open_store: Callable[[], Store]) -> Store:
        try:
            identity = self._identity(path)
        except OSError:
            identity = (-1, -1)
        while True:
            try:
                seen, store = self._idle.get_nowait()
            except queue.Empty:
                return open_store()
            if seen == identity:
                return store
            store.close()

    def give(self, store: Store) -> None:
        try:
            identity = self._identity(store.path)
        except OSError:
            store.close()
            return
        if self._idle.qsize() < self.keep:
            self._idle.put((identity, store))
        else:
            store.close()


@dataclass
class Service:
    """One service instance. ``clock`` gives the verdict time of recorded diagnoses."""

    config: Config
    store_path: str
    engines: EnginePool
    tokens: Tokens
    spool_dir: Path
    history_days: float = float(DEFAULT_HISTORY_DAYS)
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(timezone.utc))
    node_networks: tuple[Network, ...] = ()
    limits: Limits = field(default_factory=Limits)
    rate: RateLimiter = field(default_factory=lambda: RateLimiter(0.0, 1))
    metrics: ServiceMetrics = field(init=False)
    diagnose_limiter: Any = None  # the anyio CapacityLimiter of POST diagnoses, made when the app starts
    _readers: ReaderPool = field(init=False)

    def __post_init__(self) -> None:
        self._readers = ReaderPool()
        self.metrics = ServiceMetrics(self.reading, self.spool_dir, self.culprit_window)

    @classmethod
    def from_config(cls, config: Config, store_path: str, engine: Callable[[], Engine],
                    tokens: Optional[Tokens] = None) -> Service:
        svc = config.service
        return cls(config=config, store_path=store_path, engines=EnginePool(engine, svc.workers),
                   tokens=tokens if tokens is not None else Tokens.load(svc.token_file),
                   spool_dir=Path(config.spool.dir),
                   history_days=float(config.finalizer.history_days), node_networks=networks(svc.node_networks),
                   limits=Limits(svc.max_entries, svc.max_unpacked_bytes, svc.max_ratio),
                   rate=RateLimiter(svc.rate_per_s, svc.rate_burst))

    def culprit_window(self) -> Window:
        """The culprit-history window ending now: what repeat offenders are counted over."""
        return Window(since=self.clock() - timedelta(days=self.history_days))

    # -- reading ---------------------------------------------------------------------------------

    def prepare_store(self) -> str:
        """Create and migrate the store when there is none yet, so readers never meet a half-made one;
        a service that may not write it serves reads only. Why it could not, or ''."""
        if Path(self.store_path).exists():
            return ""
        try:
            Store.open(self.store_path, StoreSettings(busy_timeout_s=self.config.store.busy_timeout_s)).close()
        except StoreError as exc:
            return str(exc)
        return ""

    def has_store(self) -> bool:
        return Path(self.store_path).is_file()

    def read_store(self) -> Store:
        """The store, read-only (StoreError when there is none yet)."""
        return Store.open(self.store_path, StoreSettings(busy_timeout_s=self.config.store.busy_timeout_s),
                          readonly=True)

    @contextmanager
    def reading(self) -> Iterator[Store]:
        """A read-only store from a small pool: SQLite's page cache lives in the connection, so a kept
        connection answers from memory where a new one per request would read every page again. A
        connection whose file was replaced (another inode) is dropped; one that failed is not kept."""
        store = self._readers.take(self.store_path, self.read_store)
        kept = False
        try:
            yield store
            kept = True
        finally:
            if kept:
                self._readers.give(store)
            else:
                store.close()

    def job_verdict(self, cluster: str, job: str) -> Optional[dict[str, Any]]:
        """What ``slurm-attrib show --format json`` prints for the job, with the names of the evidence
        files stored with it; None when the store has no verdict for it."""
        if not self.has_store():
            return None
        with self.reading() as st:
            rows = st.find(job, cluster)
            if not rows:
                return None
            row = rows[0]
            previous = st.previous_verdicts(row)
            bundle = st.bundle_info(row["id"])
            diag = json.loads(row["json"])
            anchor = parse_when(row["job_time"], self.clock())
            evidence = store_history.offender_evidence(st, list(diag.get("culprit_nodes") or []), anchor,
                                                       self.history_days,
                                                       JobKey.of(diag))
        return {"diagnosis": diag, "verdict_id": row["verdict_id"], "verdict_time": row["verdict_time"],
                "gpu_hours": row["gpu_hours"], "bundle": bundle, "culprit_history": evidence,
                "previous_verdicts": previous}

    # -- judging ---------------------------------------------------------------------------------

    def diagnose(self, bundle_dir: Path, record: bool) -> Attribution:
        """The Diagnosis of an unpacked bundle: the CLI's ``diagnose`` (no store), or with ``record`` its
        ``diagnose --store`` (the store's history, then the verdict kept, or spooled)."""
        root = bundle_root(bundle_dir)
        with self.engines.engine() as engine:
            if not record:
                return Attribution(engine.diagnose(root), History(engine.settings))
            store = SqliteVerdictStore(replace(self.config.store, path=self.store_path),
                                       resolve_spool_dir(None, configured_root=str(self.spool_dir)))
            return attribute(engine, root, store, self.clock(), self.history_days)


def bundle_root(unpacked: Path) -> Path:
    """Where job.yaml is: the archive's top, or its one top-level directory (``tar czf b.tgz BUNDLE/``)."""
    if (unpacked / "job.yaml").is_file():
        return unpacked
    tops = [p for p in unpacked.iterdir() if p.is_dir() and not p.is_symlink()]
    if len(tops) == 1 and (tops[0] / "job.yaml").is_file():
        return tops[0]
    raise BundleError("no job.yaml at the top of the archive or of its one top-level directory")


__all__ = ["EnginePool", "Service", "StoreError", "bundle_root"]
