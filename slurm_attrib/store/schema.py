"""The store's schema as named migrations, recorded in the ``migrations`` table.

Each migration is idempotent (``if_not_exists``, a column is added only when missing), so running
:func:`migrate` twice, or from two processes at once, is safe. Never edit a released migration: add one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from . import packing

if TYPE_CHECKING:
    from sqlite_utils import Database

Migration = Callable[["Database"], None]


def _add_column(db: Database, table: str, column: str, col_type: Any) -> None:
    if column not in db.table(table).columns_dict:
        db.table(table).add_column(column, col_type)


def m0001_initial(db: Database) -> None:
    """Diagnoses with their indexed columns, culprit events, bundles and previous verdicts."""
    db.table("diagnoses").create({
        "id": int, "cluster": str, "job_id": str, "array_job_id": str, "array_task": str, "restart_count": int,
        "user": str, "partition": str, "start": str, "end": str, "job_time": str, "state": str, "status": str,
        "category": str, "responsible": str, "culprit_nodes": str, "root_kind": str, "root_summary": str,
        "ruleset_hash": str, "engine_version": str, "verdict_time": str, "node_hours": float,
        "verdict_id": str, "json": str,
    }, pk="id", not_null={"cluster", "job_id", "array_task", "restart_count"},
        defaults={"array_task": "", "restart_count": 0}, if_not_exists=True)
    db.table("diagnoses").create_index(["cluster", "job_id", "array_task", "restart_count"], unique=True,
                                 index_name="diagnoses_key", if_not_exists=True)
    db.table("diagnoses").create_index(["job_time"], if_not_exists=True)
    db.table("culprits").create({
        "id": int, "diagnosis_id": int, "cluster": str, "job_id": str, "node": str, "gpu": str, "time": str,
        "category": str, "responsible": str,
    }, pk="id", foreign_keys=[("diagnosis_id", "diagnoses", "id")], if_not_exists=True)
    db.table("culprits").create_index(["node", "time"], if_not_exists=True)
    db.table("culprits").create_index(["diagnosis_id"], if_not_exists=True)
    db.table("bundles").create({
        "diagnosis_id": int, "format": str, "stored_bytes": int, "original_bytes": int, "files": int,
        "capped": int, "omitted": str, "data": bytes,
    }, pk="diagnosis_id", foreign_keys=[("diagnosis_id", "diagnoses", "id")], if_not_exists=True)
    db.table("history").create({
        "id": int, "diagnosis_id": int, "cluster": str, "job_id": str, "array_task": str, "restart_count": int,
        "verdict_id": str, "verdict_time": str, "replaced_time": str, "status": str, "category": str,
        "responsible": str, "culprit_nodes": str, "ruleset_hash": str, "engine_version": str, "json": str,
    }, pk="id", if_not_exists=True)
    db.table("history").create_index(["cluster", "job_id", "array_task"], if_not_exists=True)


def m0002_gpu_hours(db: Database) -> None:
    """GPU-hours lost: gpus_per_node from job.yaml; earlier rows are backfilled from their stored bundle."""
    _add_column(db, "diagnoses", "gpus_per_node", int)
    _add_column(db, "diagnoses", "gpu_hours", float)
    _add_column(db, "culprits", "gpu_hours", float)
    rows = db.query("SELECT d.id, d.node_hours, b.data FROM diagnoses d JOIN bundles b ON b.diagnosis_id = d.id "
                    "WHERE d.gpus_per_node IS NULL")
    for row in list(rows):
        gpus = packing.gpus_per_node_of(row["data"])
        if gpus is None:
            continue
        hours = row["node_hours"] * gpus if row["node_hours"] is not None else None
        db.execute("UPDATE diagnoses SET gpus_per_node = ?, gpu_hours = ? WHERE id = ?", [gpus, hours, row["id"]])
        db.execute("UPDATE culprits SET gpu_hours = ? WHERE diagnosis_id = ?", [hours, row["id"]])


def m0003_report_indexes(db: Database) -> None:
    """The day of each job, and covering indexes for `nodes`, `query --node` and `stats` (bench/store)."""
    _add_column(db, "diagnoses", "job_day", str)
    db.execute("UPDATE diagnoses SET job_day = substr(job_time, 1, 10) WHERE job_day IS NULL")
    db.table("diagnoses").create_index(["job_day", "category", "responsible", "status", "gpu_hours", "job_time"],
                                 index_name="diagnoses_stats", if_not_exists=True)
    db.table("culprits").create_index(["time", "cluster", "node", "gpu", "category", "gpu_hours"],
                                index_name="culprits_window", if_not_exists=True)


STATS_KEY = ("cluster", "job_day", "category", "responsible", "status")
# A row's GPU-hours as an exact integer of 1/10,000 h (the store rounds gpu_hours to 4 decimals): integer sums
# do not depend on the order of addition, so the daily summary and a scan of `diagnoses` agree to the bit.
GPU_HOURS_E4_SQL = "CAST(round(gpu_hours * 10000) AS INTEGER)"


def fill_stats_daily(db: Database) -> None:
    """(Re)build ``stats_daily`` from every ``diagnoses`` row: the migration, and bulk loaders after raw inserts."""
    key = ", ".join(STATS_KEY)
    db.execute("DELETE FROM stats_daily")
    db.execute(f"INSERT INTO stats_daily ({key}, jobs, gpu_hours_e4, gpu_hours) SELECT {key}, jobs, e4, e4 / 10000.0 "
               f"FROM (SELECT {key}, COUNT(*) AS jobs, COALESCE(SUM({GPU_HOURS_E4_SQL}), 0) AS e4 FROM diagnoses "
               f"GROUP BY {key})")


def m0004_stats_daily(db: Database) -> None:
    """Jobs and GPU-hours per (cluster, job day, category, responsible, status), kept in step by every write
    of ``db.py`` in the same transaction; ``stats`` reads whole days from it. ``gpu_hours_e4`` is the exact
    sum (1/10,000 h), ``gpu_hours`` = ``gpu_hours_e4 / 10000.0`` for people reading the table."""
    db.table("stats_daily").create({
        "cluster": str, "job_day": str, "category": str, "responsible": str, "status": str, "jobs": int,
        "gpu_hours": float, "gpu_hours_e4": int,
    }, pk=STATS_KEY, if_not_exists=True)  # the primary key is the unique index on the group
    fill_stats_daily(db)


def m0005_culprit_job_time(db: Database) -> None:
    """Each culprit event carries its job's time, and one index lists a node's verdicts newest job first
    (``query --node``, ``GET /v1/diagnoses?node=``): a page is an index range, not a sort of all the node's
    jobs (bench/service: 20 ms -> well under 1 ms for a node with 3,000 jobs in 1,000,000)."""
    _add_column(db, "culprits", "job_time", str)
    db.execute("UPDATE culprits SET job_time = (SELECT job_time FROM diagnoses WHERE diagnoses.id = "
               "culprits.diagnosis_id) WHERE job_time IS NULL")
    db.table("culprits").create_index(["node", "job_time", "diagnosis_id"], index_name="culprits_node_job",
                                      if_not_exists=True)


def m0006_bundle_names(db: Database) -> None:
    """The member names of each stored bundle, kept when it is recorded: the job page and ``show`` list them
    without decompressing the archive. Bundles stored before keep NULL and are read the old way."""
    _add_column(db, "bundles", "names", str)


MIGRATIONS: tuple[tuple[str, Migration], ...] = (
    ("0001_initial", m0001_initial),
    ("0002_gpu_hours", m0002_gpu_hours),
    ("0003_report_indexes", m0003_report_indexes),
    ("0004_stats_daily", m0004_stats_daily),
    ("0005_culprit_job_time", m0005_culprit_job_time),
    ("0006_bundle_names", m0006_bundle_names),
)


def applied(db: Database) -> list[str]:
    """Names of the migrations recorded in this store, in the order they ran."""
    if "migrations" not in db.table_names():
        return []
    return [r["name"] for r in db.query("SELECT name FROM migrations ORDER BY position")]


def pending(db: Database, upto: int | None = None) -> list[tuple[str, Migration]]:
    done = set(applied(db))
    return [m for m in MIGRATIONS[:upto] if m[0] not in done]


def migrate(db: Database, upto: int | None = None) -> list[str]:
    """Run the migrations not yet recorded (the first ``upto`` only, for tests); return their names.

    The caller holds the write lock (``BEGIN IMMEDIATE``) so two processes do not race."""
    db.table("migrations").create({"position": int, "name": str}, pk="name", if_not_exists=True)
    ran = []
    for name, migration in pending(db, upto):
        migration(db)
        position = MIGRATIONS.index((name, migration)) + 1
        db.execute("INSERT OR IGNORE INTO migrations (position, name) VALUES (?, ?)", [position, name])
        ran.append(name)
    return ran
