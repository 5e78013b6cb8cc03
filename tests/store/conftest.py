"""A store built from every golden bundle (and the demo), in job-end order, the way the finalizer
records them: each diagnosis sees the culprit history of the jobs before it."""

from __future__ import annotations

import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest

from slurm_attrib.bundle import load_bundle
from slurm_attrib.engine import Engine
from slurm_attrib.store import Store, settings_with_history
from slurm_attrib.store.rows import JobKey

TESTS = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
VERDICT_TIME = datetime(2026, 12, 1, tzinfo=timezone.utc)
NOW = "2026-12-01T00:00:00Z"


def golden_bundles() -> list[Path]:
    return sorted((TESTS / "golden").glob("*/bundle"))


def build_store(path: Path, engine: Engine) -> Path:
    bundles = sorted(golden_bundles(), key=lambda b: (load_bundle(b).job.end or VERDICT_TIME, str(b)))
    with Store.open(path) as store:
        for bundle_dir in bundles:
            job = load_bundle(bundle_dir).job
            key = JobKey.of_job(job)
            settings = settings_with_history(engine.settings, store, list(job.nodes), job.end or VERDICT_TIME,
                                             30, key)
            store.record(engine.diagnose(bundle_dir, settings), VERDICT_TIME, bundle_dir=bundle_dir)
    return path


@pytest.fixture(scope="session")
def golden_store_master(tmp_path_factory: pytest.TempPathFactory, engine: Engine) -> Path:
    return build_store(tmp_path_factory.mktemp("store") / "store.sqlite", engine)


@pytest.fixture()
def golden_store(golden_store_master: Path, tmp_path: Path) -> Path:
    """A private copy of the golden store: tests may change it."""
    copy = tmp_path / "store.sqlite"
    with Store.open(golden_store_master) as store:
        store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copy(golden_store_master, copy)
    return copy
