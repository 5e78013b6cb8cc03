"""The daily summary ``stats_daily``: kept exact by every write, filled by migration 0004, and ``stats``
answers from it exactly as from a scan of every row (and as the pre-summary implementation did)."""

from __future__ import annotations

import random
import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Optional

import pytest
from sqlite_utils import Database

from slurm_attrib.store import Store, schema
from slurm_attrib.store.reports import Bucket, Window, bucket_start, verdict_stats

from .conftest import VERDICT_TIME

UTC = timezone.utc
DAY0 = datetime(2026, 10, 20, tzinfo=UTC)
CATEGORIES = [("application", "workload"), ("gpu_hardware", "infrastructure"), ("nvlink", "infrastructure"),
              ("preempted", "scheduler"), ("job_limit", "workload")]
WINDOWS = {
    "none": Window(),
    "aligned": Window(datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 20, tzinfo=UTC)),
    "aligned since only": Window(since=datetime(2026, 11, 3, tzinfo=UTC)),
    "aligned until only": Window(until=datetime(2026, 11, 25, tzinfo=UTC)),
    "partial": Window(datetime(2026, 10, 28, 13, 37, 5, tzinfo=UTC), datetime(2026, 11, 21, 6, 0, 0, 1, tzinfo=UTC)),
    "partial since only": Window(since=datetime(2026, 11, 10, 23, 59, 59, tzinfo=UTC)),
    "partial until only": Window(until=datetime(2026, 11, 5, 0, 0, 1, tzinfo=UTC)),
    "within one day": Window(datetime(2026, 11, 7, 3, tzinfo=UTC), datetime(2026, 11, 7, 17, tzinfo=UTC)),
    "one aligned day": Window(datetime(2026, 11, 7, tzinfo=UTC), datetime(2026, 11, 8, tzinfo=UTC)),
    "inverted": Window(datetime(2026, 11, 9, tzinfo=UTC), datetime(2026, 11, 2, 12, tzinfo=UTC)),
    "after everything": Window(since=datetime(2027, 6, 1, tzinfo=UTC)),
}


def _iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def synthetic(rng: random.Random, cluster: str, job_id: str, restart: int = 0) -> tuple[dict[str, Any], Optional[int]]:
    """A minimal diagnosis dict (what ``Store.record`` reads) and its gpus_per_node (None: GPU-hours unknown)."""
    if rng.random() < 0.1:  # some jobs end exactly at midnight: the edge of day-aligned windows
        end = DAY0 + timedelta(days=rng.randrange(45))
    else:
        end = DAY0 + timedelta(seconds=rng.uniform(0, 45 * 86400))
    start = end - timedelta(seconds=rng.uniform(60, 30 * 3600))
    status = rng.choices(["attributed", "unattributed", "ambiguous"], [75, 18, 7])[0]
    category, responsible = rng.choice(CATEGORIES) if status == "attributed" else ("unknown", "unknown")
    nodes = [f"n{rng.randrange(40):02d}" for _ in range(rng.choice([1, 1, 2, 4, 8]))]
    diag = {"job": {"job_id": job_id, "cluster": cluster, "nodes": nodes, "start": _iso(start), "end": _iso(end),
                    "restart_count": restart, "user": f"u{rng.randrange(9)}", "partition": "gpu", "state": "FAILED"},
            "status": status, "category": category, "responsible": responsible,
            "culprit_nodes": nodes[:1] if responsible == "infrastructure" else [],
            "ruleset": {"hash": f"r{rng.randrange(3)}"}, "engine_version": "test", "summary": f"synthetic {category}"}
    return diag, rng.choice([None, 1, 4, 8, 8])


def legacy_stats(store: Store, window: Window, by: str) -> list[Bucket]:
    """``verdict_stats`` as it was before the summary (TOTAL over floats): the answer users saw."""
    where, params = window.clauses("job_time")
    if window.since is not None:
        where.append("job_day >= ?")
        params.append(_iso(window.since)[:10])
    if window.until is not None:
        where.append("job_day <= ?")
        params.append(_iso(window.until)[:10])
    sql = ("SELECT job_day, category, responsible, status, COUNT(*) AS n, TOTAL(gpu_hours) AS h "
           "FROM diagnoses INDEXED BY diagnoses_stats " + (f"WHERE {' AND '.join(where)} " if where else "")
           + "GROUP BY job_day, category, responsible, status")
    buckets: dict[str, Bucket] = {}
    for row in store.rows(sql, params):
        bucket = buckets.setdefault(bucket_start(row["job_day"], by), Bucket(bucket_start(row["job_day"], by)))
        bucket.jobs += row["n"]
        bucket.gpu_hours += row["h"]
        bucket.by_status[row["status"]] += row["n"]
        for table, key in ((bucket.by_category, row["category"]), (bucket.by_responsible, row["responsible"])):
            table[key][0] += row["n"]
            table[key][1] += row["h"]
    return [buckets[k] for k in sorted(buckets)]


def assert_as_legacy(buckets: list[Bucket], legacy: list[Bucket]) -> None:
    """The printed answer (``to_dict``) is the pre-summary one. The one freedom: a GPU-hours figure whose exact
    value (a sum of 4-decimal GPU-hours) ends in 5 at the third decimal is rounded to 2 decimals up or down
    by the last bit of a float sum, which depends on the order of addition; there the two may differ by
    0.01. Everything else (jobs, rates, every other figure) must be equal."""
    new, old = [b.to_dict() for b in buckets], [b.to_dict() for b in legacy]
    assert [b["bucket"] for b in new] == [b["bucket"] for b in old]
    for bucket, a, b in zip(buckets, new, old):
        raw = {"gpu_hours": bucket.gpu_hours, **{f"{g}/{k}": v[1] for g, table in
                                                 (("by_category", bucket.by_category),
                                                  ("by_responsible", bucket.by_responsible)) for k, v in table.items()}}
        shown = {"gpu_hours": (a["gpu_hours"], b["gpu_hours"]),
                 **{f"{g}/{k}": (v["gpu_hours"], b[g][k]["gpu_hours"]) for g in ("by_category", "by_responsible")
                    for k, v in a[g].items()}}
        for path, (mine, theirs) in shown.items():
            if mine != theirs:
                assert round(raw[path] * 10000) % 100 == 50 and abs(mine - theirs) < 0.0100001, (a["bucket"], path)
        strip = [{**d, "gpu_hours": 0, **{g: {k: v["jobs"] for k, v in d[g].items()}
                                          for g in ("by_category", "by_responsible")}} for d in (a, b)]
        assert strip[0] == strip[1]


def summary_rows(db: Database) -> list[tuple[Any, ...]]:
    return db.execute("SELECT cluster, job_day, category, responsible, status, jobs, gpu_hours_e4, gpu_hours "
                      "FROM stats_daily ORDER BY cluster, job_day, category, responsible, status").fetchall()


def rebuilt_rows(store: Store) -> list[tuple[Any, ...]]:
    """What the migration's fill makes of the current rows (in a rolled-back transaction)."""
    conn = store.db.conn
    conn.execute("BEGIN")
    try:
        schema.fill_stats_daily(store.db)
        return summary_rows(store.db)
    finally:
        conn.execute("ROLLBACK")


def fill_store(store: Store, seed: int, jobs: int = 600) -> dict[str, int]:
    """Record ``jobs`` synthetic verdicts over two clusters, then re-record a third of them (new verdicts,
    often on another day) and a few unchanged; returns how many of each action happened."""
    rng = random.Random(seed)
    keys = [(rng.choice(["alpha", "beta"]), str(5000 + i), rng.choice([0, 0, 0, 1])) for i in range(jobs)]
    actions: dict[str, int] = {}
    for cluster, job_id, restart in keys:
        diag, gpus = synthetic(rng, cluster, job_id, restart)
        assert store.record(diag, VERDICT_TIME, gpus_per_node=gpus).action == "inserted"
        actions["inserted"] = actions.get("inserted", 0) + 1
    for cluster, job_id, restart in rng.sample(keys, jobs // 3) + rng.sample(keys, jobs // 10):
        diag, gpus = synthetic(rng, cluster, job_id, restart)
        action = store.record(diag, VERDICT_TIME + timedelta(days=1), gpus_per_node=gpus).action
        actions[action] = actions.get(action, 0) + 1
    return actions


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_summary_answers_like_a_full_scan(golden_store: Path, seed: int) -> None:
    with Store.open(golden_store) as store:
        golden = store.db.execute("SELECT COUNT(*) FROM diagnoses").fetchone()[0]
        actions = fill_store(store, seed)
        assert golden > 10 and actions["updated"] > 150
        assert store.db.execute("SELECT COUNT(*) FROM history").fetchone()[0] >= actions["updated"]
        assert summary_rows(store.db) == rebuilt_rows(store)  # every write kept the summary exact
        for name, window in WINDOWS.items():
            for by in ("day", "week"):
                summary = verdict_stats(store, window, by)
                assert summary == verdict_stats(store, window, by, use_summary=False), (name, by)  # to the bit
                assert_as_legacy(summary, legacy_stats(store, window, by))
                if name == "none":
                    assert sum(b.jobs for b in summary) == golden + actions["inserted"]


def test_unchanged_and_reattributed_verdicts_move_between_groups(tmp_path: Path) -> None:
    rng = random.Random(7)
    diag, _ = synthetic(rng, "c", "1")
    diag.update(status="attributed", category="nvlink", responsible="infrastructure")
    diag["job"].update(start="2026-11-02T10:00:00.000000Z", end="2026-11-02T12:00:00.000000Z", nodes=["a", "b"])
    with Store.open(tmp_path / "s.sqlite") as store:
        store.record(diag, VERDICT_TIME, gpus_per_node=8)
        store.record(diag, VERDICT_TIME, gpus_per_node=8)  # unchanged: counted once
        first = summary_rows(store.db)
        moved = {**diag, "category": "application", "responsible": "workload",
                 "job": {**diag["job"], "end": "2026-11-03T01:00:00.000000Z"}}
        assert store.record(moved, VERDICT_TIME, gpus_per_node=8).action == "updated"
        second = summary_rows(store.db)
    assert first == [("c", "2026-11-02", "nvlink", "infrastructure", "attributed", 1, 320000, 32.0)]
    assert second == [("c", "2026-11-03", "application", "workload", "attributed", 1, 2400000, 240.0)]


def test_a_failed_write_leaves_the_summary_alone(tmp_path: Path) -> None:
    """The summary changes in the record's transaction: a write that fails midway changes nothing."""
    rng = random.Random(8)
    with Store.open(tmp_path / "s.sqlite") as store:
        diag, _ = synthetic(rng, "c", "1")
        store.record(diag, VERDICT_TIME, gpus_per_node=4)
        before = summary_rows(store.db)
        store.db.execute("CREATE TRIGGER boom BEFORE INSERT ON culprits BEGIN SELECT RAISE(ABORT, 'boom'); END")
        changed, _ = synthetic(rng, "c", "1")
        changed["culprit_nodes"] = ["n01"]
        with pytest.raises(Exception, match="boom"):
            store.record(changed, VERDICT_TIME, gpus_per_node=4)
        assert summary_rows(store.db) == before


def test_migration_fills_the_summary_from_the_previous_schema(tmp_path: Path) -> None:
    """A store at 0003 with rows (one with NULL category and GPU-hours, as legacy rows may have): 0004
    fills stats_daily from them; running it again changes nothing; stats answers as a full scan does."""
    path = tmp_path / "old.sqlite"
    db = Database(sqlite3.connect(path))
    assert schema.migrate(db, upto=3) == ["0001_initial", "0002_gpu_hours", "0003_report_indexes"]
    rows = [("c", "1", "2026-11-20T10:00:00.000000Z", "attributed", "nvlink", "infrastructure", 12.5),
            ("c", "2", "2026-11-20T23:00:00.000000Z", "attributed", "nvlink", "infrastructure", 0.1234),
            ("d", "3", "2026-11-20T11:00:00.000000Z", "attributed", "nvlink", "infrastructure", 1.0),
            ("c", "4", "2026-11-23T00:00:00.000000Z", "unattributed", None, None, None)]
    for cluster, job, when, status, category, responsible, hours in rows:
        db.execute("INSERT INTO diagnoses (cluster, job_id, array_task, restart_count, job_time, job_day, status, "
                   "category, responsible, gpu_hours, gpus_per_node, json) VALUES (?, ?, '', 0, ?, ?, ?, ?, ?, ?, 8, "
                   "'{}')", [cluster, job, when, when[:10], status, category, responsible, hours])
    db.conn.commit()
    db.close()
    with Store.open(path) as store:
        assert "0004_stats_daily" in schema.applied(store.db)
        filled = summary_rows(store.db)
        schema.m0004_stats_daily(store.db)
        assert summary_rows(store.db) == filled
        for window in (Window(), Window(since=datetime(2026, 11, 20, 10, 30, tzinfo=UTC))):
            for by in ("day", "week"):
                summary = verdict_stats(store, window, by)
                assert summary == verdict_stats(store, window, by, use_summary=False)
                assert [b.to_dict() for b in summary] == [b.to_dict() for b in legacy_stats(store, window, by)]
    assert filled == [("c", "2026-11-20", "nvlink", "infrastructure", "attributed", 2, 126234, 12.6234),
                      ("c", "2026-11-23", None, None, "unattributed", 1, 0, 0.0),
                      ("d", "2026-11-20", "nvlink", "infrastructure", "attributed", 1, 10000, 1.0)]
