"""Migrations: from an empty file, from the previous schema, and safe to run twice."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlite_utils import Database

from slurm_attrib.data import demo_bundle
from slurm_attrib.store import Store, packing, schema

ALL = [name for name, _ in schema.MIGRATIONS]


def test_from_an_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    path.write_bytes(b"")
    with Store.open(path) as store:
        assert schema.applied(store.db) == ALL
        assert {"diagnoses", "culprits", "bundles", "history", "migrations"} <= set(store.db.table_names())


def test_running_twice_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    Store.open(path).close()
    with Store.open(path) as store:
        assert schema.migrate(store.db) == []
        assert schema.applied(store.db) == ALL


def test_from_the_previous_schema_backfills(tmp_path: Path) -> None:
    """A store made by 0001 only, with a verdict and its bundle: 0002 fills gpu_hours from the bundle's
    job.yaml, 0003 the job day; the data stays."""
    path = tmp_path / "old.sqlite"
    db = Database(sqlite3.connect(path))
    assert schema.migrate(db, upto=1) == ["0001_initial"]
    assert "gpu_hours" not in db.table("diagnoses").columns_dict
    db.execute("INSERT INTO diagnoses (cluster, job_id, array_task, restart_count, job_time, node_hours, status, "
               "json) VALUES ('c', '1', '', 0, '2026-11-20T10:00:00.000000Z', 2.5, 'attributed', '{}')")
    db.execute("INSERT INTO culprits (diagnosis_id, cluster, job_id, node, time) VALUES (1, 'c', '1', 'n1', "
               "'2026-11-20T10:00:00.000000Z')")
    packed = packing.pack_bundle(demo_bundle(), 10**7)
    db.execute("INSERT INTO bundles (diagnosis_id, format, data) VALUES (1, 'tar.gz', ?)", [packed.data])
    db.conn.commit()
    db.close()
    with Store.open(path) as store:
        assert schema.applied(store.db) == ALL
        row = next(store.rows("SELECT gpus_per_node, gpu_hours, job_day, status FROM diagnoses"))
        culprit = next(store.rows("SELECT gpu_hours, job_time FROM culprits"))
        indexes = {i.name for i in store.db.table("diagnoses").indexes}
        culprit_indexes = {i.name for i in store.db.table("culprits").indexes}
    assert row == {"gpus_per_node": 8, "gpu_hours": 20.0, "job_day": "2026-11-20", "status": "attributed"}
    assert culprit == {"gpu_hours": 20.0, "job_time": "2026-11-20T10:00:00.000000Z"}  # 0005 from its verdict
    assert "diagnoses_stats" in indexes and "culprits_node_job" in culprit_indexes
