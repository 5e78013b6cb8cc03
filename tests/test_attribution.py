"""attribute(): the one function behind `diagnose --store`, the finalizer and the service. History comes
from the store before the job (never the job itself), the verdict is recorded or spooled, and what went
wrong on the way is said, never raised."""

from __future__ import annotations

import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest

from slurm_attrib.attribution import SqliteVerdictStore, attribute
from slurm_attrib.config import StoreConfig
from slurm_attrib.data import demo_bundle
from slurm_attrib.engine import Engine
from slurm_attrib.ruleset import load_ruleset
from slurm_attrib.store import Store

NOW = datetime(2026, 11, 20, 11, 0, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine(load_ruleset(include_site=False))


def _bundle(tmp_path: Path, job_id: str, start: str = "2026-11-20T09:12:40Z",
            end: str = "2026-11-20T10:31:19Z") -> Path:
    dest = tmp_path / f"bundle-{job_id}"
    shutil.copytree(demo_bundle(), dest)
    job = dest / "job.yaml"
    text = job.read_text().replace("'318442", f"'{job_id}").replace("318442.", f"{job_id}.")
    job.write_text(text.replace("2026-11-20T09:12:40Z", start).replace("2026-11-20T10:31:19Z", end))
    return dest


def _store(tmp_path: Path) -> SqliteVerdictStore:
    return SqliteVerdictStore(StoreConfig(path=str(tmp_path / "store.sqlite")), tmp_path / "spool")


def test_without_a_store_it_is_the_plain_diagnosis(engine: Engine) -> None:
    done = attribute(engine, demo_bundle(), None, NOW, 30)
    assert done.diagnosis.to_dict() == engine.diagnose(demo_bundle()).to_dict()
    assert done.stored is None and done.warnings() == []


def test_first_verdict_creates_the_store_and_has_no_history(engine: Engine, tmp_path: Path) -> None:
    store = _store(tmp_path)
    done = attribute(engine, _bundle(tmp_path, "100"), store, NOW, 30)
    assert done.stored is not None and done.stored.where == "store" and done.warnings() == []
    assert done.history.settings.node_history == ()
    with Store.open(store.path) as st:
        assert [r["job_id"] for r in st.find("100", None)] == ["100"]


def test_an_earlier_culprit_is_history_and_the_job_itself_is_not(engine: Engine, tmp_path: Path) -> None:
    store = _store(tmp_path)
    job = _bundle(tmp_path, "100")
    assert attribute(engine, job, store, NOW, 30).diagnosis.culprit_nodes == ["node-02"]
    again = attribute(engine, job, store, NOW, 30)  # a re-run does not count the job's own first verdict
    assert again.history.settings.node_history == ()
    later = attribute(engine, _bundle(tmp_path, "200", "2026-11-20T11:12:40Z", "2026-11-20T12:31:19Z"), store, NOW, 30)
    assert later.history.settings.node_history == (("node-02", 1),)
    assert later.history.culprit_jobs() == {"node-02": ["100"]}


def test_history_reaches_back_from_the_jobs_end_not_from_now(engine: Engine, tmp_path: Path) -> None:
    store = _store(tmp_path)
    attribute(engine, _bundle(tmp_path, "100"), store, NOW, 30)
    old_job = _bundle(tmp_path, "50", "2026-10-01T09:00:00Z", "2026-10-01T10:00:00Z")
    assert attribute(engine, old_job, store, NOW, 30).history.settings.node_history == ()


def test_an_unreadable_store_is_said_and_the_verdict_is_spooled(engine: Engine, tmp_path: Path) -> None:
    store = _store(tmp_path)
    Path(store.path).write_bytes(b"this is not a database" * 100)
    done = attribute(engine, _bundle(tmp_path, "300"), store, NOW, 30)
    assert done.diagnosis.category == "nvlink"
    assert done.stored is not None and done.stored.where.startswith(str(tmp_path / "spool"))
    warnings = done.warnings()
    assert len(warnings) == 2 and warnings[0].startswith("no history from the store")
    assert "verdict spooled to" in warnings[1]
