"""The finalizer's view of the SQLite store (``slurm_attrib.store``): record a verdict with its bundle
(a locked or read-only store spools the verdict instead, so none is lost), feed node history to the
repeat-offender rule, and load spooled verdicts when the store is writable again."""

from __future__ import annotations

import dataclasses
import logging
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from ..config import StoreConfig
from ..engine import EngineSettings

log = logging.getLogger("slurm_attrib.finalizer")


class VerdictStore(Protocol):
    def record(self, diagnosis: dict[str, Any], bundle: Path, verdict_time: datetime) -> tuple[str, str]:
        """Store the verdict; returns (verdict id, 'store' or the spooled file's path)."""

    def engine_settings(self, settings: EngineSettings, nodes: list[str], now: datetime,
                        days: float) -> EngineSettings:
        """``settings`` with ``node_history`` from the store (unchanged when the store cannot be read)."""

    def flush_spool(self) -> int:
        """Load spooled verdicts into the store; how many loaded."""


class SqliteVerdictStore:
    """The real store through ``slurm_attrib.store`` (``record_or_spool``, ``Store.culprit_counts``)."""

    def __init__(self, config: StoreConfig, spool_dir: Path) -> None:
        from ..store import StoreSettings

        self.path = config.path
        self.spool_dir = spool_dir
        self.settings = StoreSettings(busy_timeout_s=config.busy_timeout_s, bundle_cap_bytes=config.max_bundle_bytes)

    def record(self, diagnosis: dict[str, Any], bundle: Path, verdict_time: datetime) -> tuple[str, str]:
        from ..store import record_or_spool
        from ..store.rows import verdict_id

        done = record_or_spool(self.path, diagnosis, verdict_time, self.spool_dir, bundle_dir=bundle,
                               settings=self.settings)
        if done.result is not None:
            return done.result.verdict_id, "store"
        log.warning("store unavailable (%s): verdict spooled to %s", done.reason, done.spooled)
        return verdict_id(diagnosis), str(done.spooled)

    def engine_settings(self, settings: EngineSettings, nodes: list[str], now: datetime,
                        days: float) -> EngineSettings:
        from ..store import Store, StoreError

        if not Path(self.path).exists():
            return settings
        try:
            with Store.open(self.path, self.settings, create=False, migrate=False) as store:
                counts = store.culprit_counts(sorted(set(nodes)), now - timedelta(days=days), now)
        except StoreError as exc:
            log.warning("node history unavailable: %s", exc)
            return settings
        return dataclasses.replace(settings, node_history=tuple((n, c) for n, c in sorted(counts.items()) if c))

    def flush_spool(self) -> int:
        from ..store import Store, StoreError, import_spool

        if not self.spool_dir.is_dir() or not any(self.spool_dir.glob("verdict-*.json")):
            return 0
        try:
            with Store.open(self.path, self.settings) as store:
                return len(import_spool(store, self.spool_dir).imported)
        except StoreError as exc:
            log.warning("spooled verdicts stay spooled: %s", exc)
            return 0
