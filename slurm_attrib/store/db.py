"""The SQLite store of verdicts: open (mode 0640, WAL, busy timeout, migrations), write with retry, read.

Writes are raw SQL inside one explicit ``BEGIN IMMEDIATE`` transaction, so a verdict, its culprit events,
its bundle, the history row of the verdict it replaces and its share of the daily summary ``stats_daily``
land together or not at all (sqlite-utils' table methods commit on their own in older releases); the schema
and the reads use sqlite-utils. Every change to a ``diagnoses`` row goes through :func:`_record`, which
moves the row's contribution in ``stats_daily`` (:func:`_stats_add`) before and after it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar, Union

if TYPE_CHECKING:  # imported where a store is opened: sqlite_utils pulls in numpy (0.2 s of every start)
    from sqlite_utils import Database

from ..model import Diagnosis
from . import packing, schema
from .errors import StoreBusy, StoreError
from .rows import JobKey, culprit_rows, verdict_row
from .timespec import iso_utc

T = TypeVar("T")
DEFAULT_STORE_PATH = "/var/lib/slurm-attrib/store.sqlite"
STORE_ENV = "SLURM_ATTRIB_STORE"
_BUSY_WORDS = ("database is locked", "database table is locked", "database is busy")
_READONLY_WORDS = ("readonly database", "read-only", "unable to open database file", "disk i/o error")
HISTORY_COLUMNS = ("diagnosis_id", "cluster", "job_id", "array_task", "restart_count", "verdict_id", "verdict_time",
                   "status", "category", "responsible", "culprit_nodes", "ruleset_hash", "engine_version", "json")


@dataclass(frozen=True)
class StoreSettings:
    """How hard the store tries before it gives up (and the caller spools), and the bundle size cap."""

    busy_timeout_s: float = 5.0  # SQLite's own wait for a lock, per attempt
    retries: int = 6  # attempts after the first
    backoff_s: float = 0.05  # first pause between attempts; doubles up to backoff_max_s
    backoff_max_s: float = 2.0
    bundle_cap_bytes: int = 8 * 1024 * 1024  # compressed; larger bundles lose their largest evidence files
    file_mode: int = 0o640


@dataclass(frozen=True)
class RecordResult:
    """What :meth:`Store.record` did: ``inserted``, ``updated`` (old verdict → history) or ``unchanged``."""

    action: str
    verdict_id: str
    diagnosis_id: int
    key: JobKey


def resolve_store_path(option: Optional[str], environ: Optional[dict[str, str]] = None,
                       configured: str = DEFAULT_STORE_PATH) -> str:
    """``--store PATH``, else ``$SLURM_ATTRIB_STORE``, else the configuration's ``store.path``."""
    env = os.environ if environ is None else environ
    return option or env.get(STORE_ENV) or configured


def is_busy_error(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and any(w in str(exc).lower() for w in _BUSY_WORDS)


def is_unwritable_error(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, sqlite3.DatabaseError) and any(w in text for w in _READONLY_WORDS)


def _create_file(path: Path, mode: int) -> None:
    """Create the database file with ``mode`` (0640) before SQLite does (it would use 0644 & ~umask)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        return
    os.close(fd)
    os.chmod(path, mode)


class Store:
    """One open store. Use :meth:`open`; close it (or use ``with``) when done."""

    def __init__(self, db: Database, path: str, settings: StoreSettings,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.db, self.path, self.settings, self._sleep = db, path, settings, sleep

    @classmethod
    def open(cls, path: Union[str, os.PathLike[str]], settings: Optional[StoreSettings] = None, *,
             create: bool = True, readonly: bool = False, migrate: bool = True,
             sleep: Callable[[float], None] = time.sleep) -> Store:
        """Open (and with ``create`` make) the store at ``path`` and bring its schema up to date."""
        settings = settings or StoreSettings()
        file = Path(path)
        try:
            if not file.exists():
                if not create or readonly:
                    raise StoreError(f"{file}: no store here (record a diagnosis with --store first)")
                _create_file(file, settings.file_mode)
            conn = _connect(file, settings, readonly)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"{file}: cannot open the store: {exc}") from exc
        from sqlite_utils import Database

        store = cls(Database(conn), str(file), settings, sleep)
        try:
            store._prepare(readonly, migrate)
        except BaseException:
            store.close()
            raise
        return store

    def _prepare(self, readonly: bool, migrate: bool) -> None:
        if readonly:
            return
        if self.retrying(lambda: self.db.execute("PRAGMA journal_mode").fetchone()[0]) != "wal":
            self.retrying(lambda: self.db.execute("PRAGMA journal_mode=WAL").fetchone())
        if migrate and schema.pending(self.db):
            self.write(lambda conn: schema.migrate(self.db))

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ---------------------------------------------------------------------------------

    def retrying(self, action: Callable[[], T]) -> T:
        """Run ``action``; on "database is locked" pause (doubling) and try again, ``retries`` times."""
        pause = self.settings.backoff_s
        for attempt in range(self.settings.retries + 1):
            try:
                return action()
            except sqlite3.DatabaseError as exc:
                if not is_busy_error(exc):
                    if is_unwritable_error(exc):
                        raise StoreBusy(f"{self.path}: the store cannot be written: {exc}") from exc
                    raise StoreError(f"{self.path}: {exc}") from exc
                if attempt == self.settings.retries:
                    raise StoreBusy(f"{self.path}: still locked after {attempt + 1} attempts") from exc
                self._sleep(pause)
                pause = min(pause * 2, self.settings.backoff_max_s)
        raise AssertionError("unreachable")  # pragma: no cover

    def write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` in one ``BEGIN IMMEDIATE`` transaction, with retry; all of it or nothing."""
        conn = self.db.conn

        def attempt() -> T:
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = work(conn)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return result

        return self.retrying(attempt)

    def record(self, diagnosis: Union[Diagnosis, dict[str, Any]], verdict_time: datetime, *,
               bundle_dir: Optional[Union[str, os.PathLike[str]]] = None, gpus_per_node: Optional[int] = None,
               bundle: Optional[packing.PackedBundle] = None) -> RecordResult:
        """Store one verdict (and its bundle). The same key again replaces the row and keeps the old
        verdict in ``history``; the identical verdict again changes nothing (a job enqueued twice)."""
        diag = diagnosis.to_dict() if isinstance(diagnosis, Diagnosis) else diagnosis
        if bundle_dir is not None:
            bundle = bundle or packing.pack_bundle(bundle_dir, self.settings.bundle_cap_bytes)
            gpus_per_node = gpus_per_node or packing.gpus_per_node_in_dir(bundle_dir)
        row = verdict_row(diag, verdict_time, gpus_per_node)
        culprits = culprit_rows(diag, row)
        return self.write(lambda conn: _record(conn, row, culprits, bundle, JobKey.of(diag)))

    # -- reading ---------------------------------------------------------------------------------

    def rows(self, sql: str, params: Union[list[Any], dict[str, Any], None] = None) -> Iterator[dict[str, Any]]:
        """Rows of a read query as dicts (a locked WAL store can still be read)."""
        try:
            yield from self.db.query(sql, params or [])
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: {exc}") from exc

    def find(self, job: str, cluster: Optional[str] = None) -> list[dict[str, Any]]:
        """Stored verdicts of a job id (``123``, or ``<array>_<task>``), newest restart first."""
        array, sep, task = job.partition("_")
        # a plain job id never names an array task: without that arm the (cluster, job_id, ...) index answers
        # alone (with it, SQLite scans every row: 0.19 s on 1,000,000 verdicts)
        match = "((job_id = :job) OR (array_job_id = :array AND array_task = :task))" if sep else "job_id = :job"
        sql = (f"SELECT * FROM diagnoses WHERE {match} " + ("AND cluster = :cluster " if cluster else "")
               + "ORDER BY restart_count DESC, cluster")
        return list(self.rows(sql, {"job": job, "array": array, "task": task, "cluster": cluster}))

    def previous_verdicts(self, row: dict[str, Any]) -> list[dict[str, Any]]:
        """Earlier verdicts of the same job: replaced ones (history) and earlier restarts, oldest first."""
        replaced = self.rows("SELECT restart_count, verdict_id, verdict_time, replaced_time, status, category, "
                             "responsible, culprit_nodes, ruleset_hash FROM history WHERE cluster = ? AND job_id = ? "
                             "AND array_task = ?", [row["cluster"], row["job_id"], row["array_task"]])
        restarts = self.rows("SELECT restart_count, verdict_id, verdict_time, NULL AS replaced_time, status, "
                             "category, responsible, culprit_nodes, ruleset_hash FROM diagnoses WHERE cluster = ? "
                             "AND job_id = ? AND array_task = ? AND restart_count < ?",
                             [row["cluster"], row["job_id"], row["array_task"], row["restart_count"]])
        return sorted([*replaced, *restarts], key=lambda r: (r["restart_count"], r["verdict_time"] or ""))

    def bundle(self, diagnosis_id: int) -> Optional[dict[str, Any]]:
        """The stored bundle row of a verdict (``data`` is the tar.gz), or None."""
        found = list(self.rows("SELECT * FROM bundles WHERE diagnosis_id = ?", [diagnosis_id]))
        return found[0] if found else None

    def bundle_info(self, diagnosis_id: int) -> Optional[dict[str, Any]]:
        """The stored bundle of a verdict without its data, or None: ``stored_bytes``, ``original_bytes``,
        ``files``, ``capped`` (bool), ``omitted`` (what the cap left out) and ``names`` (the members,
        sorted). Names recorded with the bundle are read as they are; for a bundle stored before they were
        kept, from the archive itself."""
        columns = self.db.table("bundles").columns_dict
        kept = "names" if "names" in columns else "NULL AS names"
        found = list(self.rows("SELECT stored_bytes, original_bytes, files, capped, omitted, " + kept
                               + " FROM bundles WHERE diagnosis_id = ?", [diagnosis_id]))
        if not found:
            return None
        info = found[0]
        names = json.loads(info["names"]) if info["names"] else None
        if not isinstance(names, list):
            data = next(iter(self.rows("SELECT data FROM bundles WHERE diagnosis_id = ?", [diagnosis_id])))["data"]
            names = packing.member_names(data)
        info.update(capped=bool(info["capped"]), omitted=json.loads(info["omitted"]), names=names)
        return info

    def has_verdict(self, cluster: str, job_ids: tuple[str, ...], array_job_id: str = "",
                    array_task: str = "") -> bool:
        """Whether any verdict exists for the job under any of its ids (raw id, printed id, array task)."""
        marks = ",".join("?" for _ in job_ids)
        sql = (f"SELECT 1 FROM diagnoses WHERE cluster = ? AND (job_id IN ({marks}) "
               "OR (array_job_id = ? AND array_task = ? AND array_task != '')) LIMIT 1")
        return bool(list(self.rows(sql, [cluster, *job_ids, array_job_id or "\0", array_task])))

    def culprit_jobs(self, nodes: list[str], since: datetime, until: datetime,
                     exclude: Optional[JobKey] = None, cluster: Optional[str] = None) -> dict[str, list[str]]:
        """Per node, the ids of the jobs it was the culprit of in [since, until) (the evidence behind a
        repeat-offender flag), each job once however often it was restarted. Node names count within one
        cluster: ``cluster``, else ``exclude``'s; ``exclude`` leaves out the job being diagnosed."""
        return {node: list(dict.fromkeys(job for job, _ in pairs))
                for node, pairs in self._culprit_rows(nodes, since, until, exclude, cluster).items()}

    def culprit_events(self, nodes: list[str], since: datetime, until: datetime,
                       exclude: Optional[JobKey] = None, cluster: Optional[str] = None) -> dict[str, int]:
        """Per node, how many distinct faults (root-cause times) made it a culprit in [since, until): one
        Xid that several jobs met counts once (as :meth:`culprit_jobs`, without the job being diagnosed)."""
        return {node: len({when for _, when in pairs})
                for node, pairs in self._culprit_rows(nodes, since, until, exclude, cluster).items()}

    def _culprit_rows(self, nodes: list[str], since: datetime, until: datetime, exclude: Optional[JobKey],
                      cluster: Optional[str]) -> dict[str, list[tuple[str, str]]]:
        out: dict[str, list[tuple[str, str]]] = {n: [] for n in nodes}
        cluster = cluster if cluster is not None else exclude.cluster if exclude is not None else None
        if not nodes:
            return out
        marks = ",".join("?" for _ in nodes)
        sql = (f"SELECT DISTINCT node, cluster, job_id, time FROM culprits WHERE node IN ({marks}) AND time >= ? "
               "AND time < ?" + (" AND cluster = ?" if cluster is not None else "") + " ORDER BY node, time, job_id")
        params = [*nodes, iso_utc(since), iso_utc(until), *([cluster] if cluster is not None else [])]
        for r in self.rows(sql, params):
            own = exclude is not None and (r["cluster"], r["job_id"]) == (exclude.cluster, exclude.job_id)
            if not own:
                out[r["node"]].append((str(r["job_id"]), str(r["time"])))
        return out

    def gpu_xid_jobs(self, nodes: list[str], codes: tuple[int, ...], since: datetime, until: datetime,
                     exclude: Optional[JobKey] = None) -> dict[tuple[str, str], list[str]]:
        """Per (node, GPU) of ``nodes``, the jobs of [since, until) whose verdict cites an Xid of ``codes`` on
        that GPU (root cause, candidate or supporting symptom): NVIDIA's workflow for Xid 13/31/43 asks
        whether the same GPU keeps faulting across jobs."""
        if not nodes or not codes:
            return {}
        cluster = exclude.cluster if exclude is not None else None
        marks, code_marks = ",".join("?" for _ in nodes), ",".join("?" for _ in codes)
        cited = ("SELECT d.cluster, d.job_id, d.job_time, s.value AS sym "
                 "FROM diagnoses d, json_each(d.json, '$.{0}') s WHERE d.job_time >= ? AND d.job_time < ?")
        sql = ("SELECT DISTINCT cluster, job_id, json_extract(sym, '$.node') AS node, "
               "json_extract(sym, '$.gpu') AS gpu "
               f"FROM ({cited.format('supporting_symptoms')} UNION ALL {cited.format('candidates')} UNION ALL "
               "SELECT d.cluster, d.job_id, d.job_time, json_extract(d.json, '$.root_cause') FROM diagnoses d "
               "WHERE d.job_time >= ? AND d.job_time < ? AND d.root_kind = 'xid') "
               f"WHERE json_extract(sym, '$.kind') = 'xid' AND json_extract(sym, '$.fields.code') IN ({code_marks}) "
               f"AND json_extract(sym, '$.node') IN ({marks}) AND json_extract(sym, '$.gpu') IS NOT NULL"
               + (" AND cluster = ?" if cluster is not None else "") + " ORDER BY node, gpu, job_time, job_id")
        window = [iso_utc(since), iso_utc(until)]
        params = [*window, *window, *window, *codes, *nodes, *([cluster] if cluster is not None else [])]
        out: dict[tuple[str, str], list[str]] = {}
        for r in self.rows(sql, params):
            own = exclude is not None and (r["cluster"], r["job_id"]) == (exclude.cluster, exclude.job_id)
            jobs = out.setdefault((str(r["node"]), str(r["gpu"])), [])
            if not own and r["job_id"] not in jobs:
                jobs.append(r["job_id"])
        return {key: jobs for key, jobs in out.items() if jobs}



def _connect(file: Path, settings: StoreSettings, readonly: bool) -> sqlite3.Connection:
    target = f"file:{file}?mode=ro" if readonly else str(file)
    conn = sqlite3.connect(target, timeout=settings.busy_timeout_s, isolation_level=None, uri=readonly,
                           check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {int(settings.busy_timeout_s * 1000)}")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def _insert(conn: sqlite3.Connection, table: str, row: dict[str, Any]) -> int:
    cols = list(row)
    cursor = conn.execute(f"INSERT INTO {table} ({', '.join(f'[{c}]' for c in cols)}) "
                          f"VALUES ({', '.join('?' for _ in cols)})", [row[c] for c in cols])
    return int(cursor.lastrowid or 0)


def _record(conn: sqlite3.Connection, row: dict[str, Any], culprits: list[dict[str, Any]],
            bundle: Optional[packing.PackedBundle], key: JobKey) -> RecordResult:
    found = conn.execute("SELECT id, verdict_id FROM diagnoses WHERE cluster = ? AND job_id = ? AND array_task = ? "
                         "AND restart_count = ?",
                         [key.cluster, key.job_id, key.array_task_id, key.restart_count]).fetchone()
    if found is not None and found[1] == row["verdict_id"]:
        if bundle is not None and conn.execute("SELECT 1 FROM bundles WHERE diagnosis_id = ?", [found[0]]).fetchone() \
                is None:
            _store_bundle(conn, found[0], bundle)
        return RecordResult("unchanged", row["verdict_id"], found[0], key)
    if found is None:
        diagnosis_id, action = _insert(conn, "diagnoses", row), "inserted"
    else:
        diagnosis_id, action = found[0], "updated"
        _to_history(conn, diagnosis_id, row["verdict_time"])
        _stats_add(conn, diagnosis_id, -1)  # the replaced verdict leaves its day's group
        conn.execute("DELETE FROM culprits WHERE diagnosis_id = ?", [diagnosis_id])
        cols = [c for c in row if c not in ("cluster", "job_id", "array_task", "restart_count")]
        conn.execute(f"UPDATE diagnoses SET {', '.join(f'[{c}] = ?' for c in cols)} WHERE id = ?",
                     [*(row[c] for c in cols), diagnosis_id])
    _stats_add(conn, diagnosis_id, +1)
    for culprit in culprits:
        _insert(conn, "culprits", {**culprit, "diagnosis_id": diagnosis_id})
    if bundle is not None:
        _store_bundle(conn, diagnosis_id, bundle)
    return RecordResult(action, row["verdict_id"], diagnosis_id, key)


def _stats_add(conn: sqlite3.Connection, diagnosis_id: int, sign: int) -> None:
    """Add (``sign`` +1) or take away (-1) the stored row ``diagnosis_id`` in its ``stats_daily`` group, as
    :func:`schema.fill_stats_daily` would count it (same SQL expression for the GPU-hours). Groups are found
    with ``IS`` so a NULL in a legacy row's key still matches; a group that reaches 0 jobs is removed. (A
    group missing on removal can only mean rows changed behind the store's back: the negative delta is kept,
    and ``schema.fill_stats_daily`` rebuilds the table.)"""
    found = conn.execute(f"SELECT {', '.join(schema.STATS_KEY)}, COALESCE({schema.GPU_HOURS_E4_SQL}, 0) "
                         "FROM diagnoses WHERE id = ?", [diagnosis_id]).fetchone()
    if found is None:
        return
    key, e4 = list(found[:-1]), sign * int(found[-1])
    match = " AND ".join(f"{c} IS ?" for c in schema.STATS_KEY)
    cursor = conn.execute("UPDATE stats_daily SET jobs = jobs + ?, gpu_hours_e4 = gpu_hours_e4 + ?, "
                          f"gpu_hours = (gpu_hours_e4 + ?) / 10000.0 WHERE {match}", [sign, e4, e4, *key])
    if cursor.rowcount == 0:
        conn.execute(f"INSERT INTO stats_daily ({', '.join(schema.STATS_KEY)}, jobs, gpu_hours_e4, gpu_hours) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?, ? / 10000.0)", [*key, sign, e4, e4])
    elif sign < 0:
        conn.execute(f"DELETE FROM stats_daily WHERE jobs = 0 AND {match}", key)


def _to_history(conn: sqlite3.Connection, diagnosis_id: int, replaced_time: str) -> None:
    source = ", ".join("id" if c == "diagnosis_id" else f"[{c}]" for c in HISTORY_COLUMNS)
    conn.execute(f"INSERT INTO history ({', '.join(f'[{c}]' for c in HISTORY_COLUMNS)}, replaced_time) "
                 f"SELECT {source}, ? FROM diagnoses WHERE id = ?", [replaced_time, diagnosis_id])


def _store_bundle(conn: sqlite3.Connection, diagnosis_id: int, bundle: packing.PackedBundle) -> None:
    conn.execute("DELETE FROM bundles WHERE diagnosis_id = ?", [diagnosis_id])
    _insert(conn, "bundles", {"diagnosis_id": diagnosis_id, "format": packing.FORMAT, "stored_bytes": len(bundle.data),
                              "original_bytes": bundle.original_bytes, "files": bundle.files,
                              "capped": int(bundle.capped), "omitted": json.dumps(list(bundle.omitted)),
                              "names": json.dumps(list(bundle.names)) if bundle.names else None,
                              "data": bundle.data})
