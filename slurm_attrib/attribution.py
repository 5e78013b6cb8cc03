"""One job, one verdict: diagnose a bundle with the store's history, then record the verdict (or spool it).

This is the library function behind ``slurm-attrib diagnose --store``, the finalizer and the REST
service, so the three make the same verdict from the same bundle and store. The store is reached
through :class:`VerdictStore`; :class:`SqliteVerdictStore` is the real one, tests pass a fake. The
function never reads the clock: ``now`` is the verdict time and the history anchor of last resort.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Optional, Protocol, Union

from .bundle import load_bundle
from .config import StoreConfig
from .engine import Engine, EngineSettings
from .model import Diagnosis, JobFacts
from .outage import Outage

log = logging.getLogger("slurm_attrib.attribution")
IMPORT_BATCH = 50  # spooled verdicts loaded per finalizer step: a backlog never holds the loop (or SIGTERM) long


@dataclass(frozen=True)
class History:
    """What the store knows about a job's nodes before it, as the engine settings that carry it, and
    why there is none when the store could not be read."""

    settings: EngineSettings
    problem: str = ""

    def culprit_jobs(self) -> dict[str, list[str]]:
        """The earlier job ids behind each node's culprit count (what a repeat-offender flag rests on)."""
        return {node: list(ids) for node, ids in self.settings.node_history_jobs if ids}


@dataclass(frozen=True)
class Stored:
    """Where a verdict went: ``where`` is ``store``, the spooled file's path (``reason`` says why), or
    empty: not recorded (no spool to fall back on)."""

    verdict_id: str
    where: str
    reason: str = ""


@dataclass(frozen=True)
class Attribution:
    """A diagnosis with its history and, when it was recorded, where it went."""

    diagnosis: Diagnosis
    history: History
    stored: Optional[Stored] = None

    def warnings(self) -> list[str]:
        """What an operator should know about how this verdict was made and kept."""
        found = [f"no history from the store ({self.history.problem})"] if self.history.problem else []
        if self.stored is not None and not self.stored.where:
            found.append(f"{self.stored.reason}; verdict not recorded (--spool-dir DIR would spool it)")
        elif self.stored is not None and self.stored.where != "store":
            found.append(f"{self.stored.reason}; verdict spooled to {self.stored.where}")
        return found


class VerdictStore(Protocol):
    """The store as attribution sees it: history in, verdicts out."""

    def history(self, settings: EngineSettings, job: JobFacts, anchor: datetime, days: float) -> History:
        """``settings`` with the history of ``job``'s nodes in the ``days`` before ``anchor`` (the job
        itself not counted); the settings unchanged, with the reason, when the store cannot be read."""

    def record(self, diagnosis: dict[str, Any], bundle: Path, verdict_time: datetime) -> Stored:
        """Store the verdict with its bundle, or spool it when the store stays unavailable."""

    def flush_spool(self) -> int:
        """Load spooled verdicts into the store once it is writable again; how many loaded."""


def attribute(engine: Engine, bundle_dir: Union[str, os.PathLike[str]], store: Optional[VerdictStore],
              now: datetime, history_days: float, record: bool = True) -> Attribution:
    """Diagnose the bundle in ``bundle_dir`` with ``store``'s history of its nodes and, when ``record``,
    keep the verdict there. Without a store it is the plain diagnosis.

    The history reaches back ``history_days`` from the job's end (else its start, else ``now``), so
    re-running an old job sees what was known when it failed, not what came after."""
    bundle = load_bundle(bundle_dir)
    anchor = bundle.job.end or bundle.job.start or now
    history = store.history(engine.settings, bundle.job, anchor, history_days) if store else History(engine.settings)
    diagnosis = engine.diagnose(bundle, history.settings)
    stored = store.record(diagnosis.to_dict(), Path(bundle_dir), now) if store is not None and record else None
    return Attribution(diagnosis, history, stored)


class SqliteVerdictStore:
    """The SQLite store (:mod:`slurm_attrib.store`): history read without creating or migrating the
    file, verdicts recorded with their bundle, or spooled into ``spool_dir`` so none is lost.

    Without ``spool_dir`` (``diagnose --store`` run by hand) a verdict the store refuses is not recorded
    anywhere: it must not land in the production spool, which the finalizer would import into the
    production store. With ``write_budget_s`` (the finalizer) a locked store is waited for about that long, not
    ``busy_timeout_s`` times every retry; once it failed, verdicts go straight to the spool (one
    WARNING) until a probe, at growing intervals, finds the store writable again."""

    def __init__(self, config: StoreConfig, spool_dir: Optional[Union[str, os.PathLike[str]]],
                 write_budget_s: Optional[float] = None) -> None:
        from .store import StoreSettings

        self.path = config.path
        self.spool_dir = Path(spool_dir) if spool_dir is not None else None
        if write_budget_s is None:
            self.settings = StoreSettings(busy_timeout_s=config.busy_timeout_s,
                                          bundle_cap_bytes=config.max_bundle_bytes)
        else:
            self.settings = StoreSettings(busy_timeout_s=min(config.busy_timeout_s, write_budget_s / 2), retries=1,
                                          backoff_s=0.05, bundle_cap_bytes=config.max_bundle_bytes)
        self.outage = Outage(f"store {self.path}", log)

    def history(self, settings: EngineSettings, job: JobFacts, anchor: datetime, days: float) -> History:
        from .store import Store, StoreError, settings_with_history
        from .store.rows import JobKey

        if not Path(self.path).exists():  # a new site: no history yet, and nothing to warn about
            return History(settings)
        try:
            with Store.open(self.path, self.settings, create=False, migrate=False) as store:
                return History(settings_with_history(settings, store, list(job.nodes), anchor, days,
                                                             JobKey.of_job(job)))
        except StoreError as exc:
            log.info("node history unavailable: %s", exc)
            return History(settings, problem=str(exc))

    def record(self, diagnosis: dict[str, Any], bundle: Path, verdict_time: datetime) -> Stored:
        from .store import record_or_spool
        from .store.rows import verdict_id

        if self.spool_dir is None:
            return self._record_or_not(diagnosis, bundle, verdict_time)
        consequence = f"verdicts are spooled to {self.spool_dir} until it is back"
        if not self.outage.should_try():
            spooled = _spool_now(diagnosis, bundle, verdict_time, self.spool_dir, self.settings)
            return Stored(verdict_id(diagnosis), str(spooled), "store unavailable")
        done = record_or_spool(self.path, diagnosis, verdict_time, self.spool_dir, bundle_dir=bundle,
                               settings=self.settings)
        if done.result is not None:
            self.outage.recovered()
            return Stored(done.result.verdict_id, "store")
        self.outage.failed(done.reason, consequence)
        log.info("verdict spooled to %s", done.spooled)
        return Stored(verdict_id(diagnosis), str(done.spooled), done.reason)

    def _record_or_not(self, diagnosis: dict[str, Any], bundle: Path, verdict_time: datetime) -> Stored:
        from .store import Store, StoreError
        from .store.rows import verdict_id

        try:
            with Store.open(self.path, self.settings) as store:
                return Stored(store.record(diagnosis, verdict_time, bundle_dir=bundle).verdict_id, "store")
        except StoreError as exc:
            return Stored(verdict_id(diagnosis), "", str(exc))

    def flush_spool(self) -> int:
        """Load spooled verdicts into the store once it is writable again; how many loaded."""
        from .store import Store, StoreError, import_spool

        if self.spool_dir is None or not self.spool_dir.is_dir() or not any(self.spool_dir.glob("verdict-*.json")):
            return 0
        if not self.outage.should_try():
            return 0
        try:
            with Store.open(self.path, self.settings) as store:
                count = len(import_spool(store, self.spool_dir, IMPORT_BATCH).imported)
        except StoreError as exc:  # StoreBusy included
            self.outage.failed(str(exc), f"spooled verdicts wait in {self.spool_dir}")
            return 0
        self.outage.recovered()
        return count


def _spool_now(diagnosis: dict[str, Any], bundle: Path, verdict_time: datetime, spool_dir: Path,
               settings: Any) -> Path:
    """Spool a verdict without trying the store (it is known to be down)."""
    from .store import packing
    from .store.spool import spool_verdict

    packed = packing.pack_bundle(bundle, settings.bundle_cap_bytes)
    return spool_verdict(spool_dir, diagnosis, verdict_time, packed, packing.gpus_per_node_in_dir(bundle))
