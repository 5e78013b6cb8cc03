"""Many writers at once lose nothing and never surface "database is locked"; a writer killed inside its
transaction leaves a readable store with the previous data; a locked or read-only store spools."""

from __future__ import annotations

import copy
import multiprocessing
import os
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from slurm_attrib.data import demo_bundle
from slurm_attrib.engine import Engine
from slurm_attrib.store import Store, StoreBusy, StoreSettings, import_spool, record_or_spool

from .conftest import VERDICT_TIME

WRITERS = 50
CTX = multiprocessing.get_context("fork")


def _diag(engine: Engine, job_id: str) -> dict[str, Any]:
    diag = copy.deepcopy(engine.diagnose(demo_bundle()).to_dict())
    diag["job"]["job_id"] = job_id
    return diag


def _writer(path: str, diag: dict[str, Any], errors: Any) -> None:
    try:
        with Store.open(path, StoreSettings(busy_timeout_s=2.0, retries=20)) as store:
            store.record(diag, VERDICT_TIME)
    except BaseException as exc:  # reported to the parent, which fails the test
        errors.put(f"{diag['job']['job_id']}: {exc}")
        os._exit(1)
    os._exit(0)


def test_fifty_concurrent_writers(tmp_path: Path, engine: Engine) -> None:
    path = str(tmp_path / "s.sqlite")  # a fresh file: the writers also race to create and migrate it
    errors = CTX.Queue()
    procs = [CTX.Process(target=_writer, args=(path, _diag(engine, f"job-{i}"), errors)) for i in range(WRITERS)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
    assert all(p.exitcode == 0 for p in procs), [errors.get() for _ in range(errors.qsize())]
    with Store.open(path) as store:
        ids = {r["job_id"] for r in store.rows("SELECT job_id FROM diagnoses")}
    assert ids == {f"job-{i}" for i in range(WRITERS)}


def _die_inside_transaction(path: str, diag: dict[str, Any], ready: Any) -> None:
    store = Store.open(path)

    def work(conn: sqlite3.Connection) -> None:
        from slurm_attrib.store.db import _record
        from slurm_attrib.store.rows import JobKey, culprit_rows, verdict_row

        row = verdict_row(diag, VERDICT_TIME, None)
        _record(conn, row, culprit_rows(diag, row), None, JobKey.of(diag))
        ready.set()
        signal.pause()  # killed here, the transaction open

    store.write(work)


def test_writer_killed_mid_transaction(tmp_path: Path, engine: Engine) -> None:
    path = str(tmp_path / "s.sqlite")
    with Store.open(path) as store:
        store.record(_diag(engine, "before"), VERDICT_TIME)
    ready = CTX.Event()
    child = CTX.Process(target=_die_inside_transaction, args=(path, _diag(engine, "doomed"), ready))
    child.start()
    assert ready.wait(30)
    os.kill(child.pid or 0, signal.SIGKILL)
    child.join(10)
    with Store.open(path) as store:
        assert store.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert [r["job_id"] for r in store.rows("SELECT job_id FROM diagnoses")] == ["before"]
        store.record(_diag(engine, "after"), VERDICT_TIME)  # the lock died with the writer
        assert store.db.execute("SELECT COUNT(*) FROM diagnoses").fetchone()[0] == 2


def test_locked_store_spools_then_imports(tmp_path: Path, engine: Engine) -> None:
    path, spool = tmp_path / "s.sqlite", tmp_path / "spool"
    Store.open(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    quick = StoreSettings(busy_timeout_s=0.05, retries=2, backoff_s=0.01)
    try:
        done = record_or_spool(path, _diag(engine, "late"), VERDICT_TIME, spool, bundle_dir=demo_bundle(),
                               settings=quick)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert done.result is None and done.spooled is not None and done.spooled.parent == spool
    assert "still locked" in done.reason
    with Store.open(path) as store:
        imported = import_spool(store, spool)
        row = next(store.rows("SELECT d.job_id, b.files FROM diagnoses d JOIN bundles b ON b.diagnosis_id = d.id"))
    assert len(imported.imported) == 1 and not imported.failed and not list(spool.iterdir())
    assert row == {"job_id": "late", "files": 9}


def test_unopenable_store_spools(tmp_path: Path, engine: Engine) -> None:
    """The store's parent is a regular file (chmod does not stop root, this does)."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    done = record_or_spool(blocker / "s.sqlite", _diag(engine, "x"), VERDICT_TIME, tmp_path / "spool")
    assert done.spooled is not None and done.spooled.name.startswith("verdict-helios_x_-_0_")


def test_read_only_store_refuses_writes(tmp_path: Path, engine: Engine) -> None:
    path = tmp_path / "s.sqlite"
    Store.open(path).close()
    with Store.open(path, readonly=True) as store, pytest.raises(StoreBusy, match="cannot be written"):
        store.record(_diag(engine, "x"), VERDICT_TIME)
