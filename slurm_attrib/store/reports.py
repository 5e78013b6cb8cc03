"""The read side of the store: filtered verdict lists, repeat offenders, and statistics over time."""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from operator import itemgetter
from typing import Any, Optional

from . import schema
from .db import Store
from .errors import StoreError
from .timespec import iso_utc

LIST_COLUMNS = ("job_time", "cluster", "job_id", "array_task", "restart_count", "user", "partition", "state", "status",
                "category", "responsible", "culprit_nodes", "gpu_hours", "root_summary")


@dataclass(frozen=True)
class Window:
    """[since, until) on the job time; either end may be open."""

    since: Optional[datetime] = None
    until: Optional[datetime] = None

    def clauses(self, column: str) -> tuple[list[str], list[Any]]:
        where, params = [], []
        if self.since is not None:
            where.append(f"{column} >= ?")
            params.append(iso_utc(self.since))
        if self.until is not None:
            where.append(f"{column} < ?")
            params.append(iso_utc(self.until))
        return where, params


@dataclass(frozen=True)
class VerdictFilter:
    """Filters of ``query``; ``node`` means the node was the culprit of the job. ``after`` is a page cursor:
    the (job_time, row id) of the last row already seen; only rows after it in list order come."""

    window: Window = Window()
    node: Optional[str] = None
    user: Optional[str] = None
    partition: Optional[str] = None
    category: Optional[str] = None
    status: Optional[str] = None
    responsible: Optional[str] = None
    cluster: Optional[str] = None
    limit: int = 50
    after: Optional[tuple[str, int]] = None


def query_verdicts(store: Store, flt: VerdictFilter) -> list[dict[str, Any]]:
    """Verdicts matching every given filter, newest job first, at most ``limit``."""
    return [{c: row[c] for c in LIST_COLUMNS} for row in _verdict_rows(store, flt)]


def query_verdict_page(store: Store, flt: VerdictFilter) -> tuple[list[dict[str, Any]], Optional[tuple[str, int]]]:
    """One page of :func:`query_verdicts` and the cursor of the next (None on the last page): keyset
    pagination on (job_time, id), so a page costs the same however deep it is and rows recorded while a
    client pages never shift what it sees next."""
    rows = list(_verdict_rows(store, replace(flt, limit=flt.limit + 1)))
    more = len(rows) > flt.limit
    rows = rows[:flt.limit]
    cursor = (str(rows[-1]["job_time"]), int(rows[-1]["_id"])) if more and rows else None
    return [{c: row[c] for c in LIST_COLUMNS} for row in rows], cursor


def _verdict_rows(store: Store, flt: VerdictFilter) -> list[dict[str, Any]]:
    """With a node, the rows are read through the node's culprit events in (job time, verdict) order (the
    ``culprits_node_job`` index; one event per node and verdict), so a page is an index range; otherwise
    through ``diagnoses`` in the same order. Both order by the verdict's job time, then its id."""
    by_node = flt.node is not None
    time_col, id_col = ("c.job_time", "c.diagnosis_id") if by_node else ("d.job_time", "d.id")
    where, params = flt.window.clauses(time_col)
    for column in ("user", "partition", "category", "status", "responsible", "cluster"):
        value = getattr(flt, column)
        if value is not None:
            where.append(f"d.[{column}] = ?")
            params.append(value)
    if by_node:
        where.append("c.node = ?")
        params.append(flt.node)
    if flt.after is not None:
        where.append(f"({time_col}, {id_col}) < (?, ?)")  # a row value: SQLite seeks the index to the cursor
        params.extend([flt.after[0], flt.after[1]])
    source = "culprits c JOIN diagnoses d ON d.id = c.diagnosis_id" if by_node else "diagnoses d"
    sql = (f"SELECT {', '.join('d.' + c for c in LIST_COLUMNS)}, d.id AS _id FROM {source} "
           + (f"WHERE {' AND '.join(where)} " if where else "") + f"ORDER BY {time_col} DESC, {id_col} DESC LIMIT ?")
    return list(store.rows(sql, [*params, flt.limit]))


def node_offenders(store: Store, window: Window, min_jobs: int = 1, by_gpu: bool = False,
                   limit: Optional[int] = None) -> list[dict[str, Any]]:
    """Per culprit node of a cluster (and GPU with ``by_gpu``): jobs it was the culprit of, their
    categories, first and last seen, GPU-hours of those jobs; most jobs first. A verdict has one culprit
    event per node, so counting events counts jobs. One pass over the ``culprits_window`` index."""
    where, params = window.clauses("time")
    group = "cluster, node, gpu" if by_gpu else "cluster, node"
    sql = (f"SELECT {group}, COUNT(*) AS jobs, GROUP_CONCAT(DISTINCT category) AS categories, "
           f"{'' if by_gpu else 'GROUP_CONCAT(DISTINCT gpu) AS gpus, '}MIN(time) AS first_seen, "
           f"MAX(time) AS last_seen, ROUND(TOTAL(gpu_hours), 2) AS gpu_hours FROM culprits "
           + (f"WHERE {' AND '.join(where)} " if where else "") + f"GROUP BY {group} "
           "HAVING COUNT(*) >= ? ORDER BY jobs DESC, gpu_hours DESC, cluster, node" + (" LIMIT ?" if limit else ""))
    rows = list(store.rows(sql, [*params, min_jobs, *([limit] if limit else [])]))
    for row in rows:
        row["categories"] = ",".join(sorted(set((row["categories"] or "").split(",")) - {""}))
        if not by_gpu:
            row["gpus"] = ",".join(sorted(set((row["gpus"] or "").split(",")) - {""}))
    return rows


@dataclass
class Bucket:
    """One time bucket of ``stats``."""

    start: str
    jobs: int = 0
    gpu_hours: float = 0.0
    by_status: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    by_category: dict[str, list[float]] = field(default_factory=lambda: defaultdict(lambda: [0, 0.0]))
    by_responsible: dict[str, list[float]] = field(default_factory=lambda: defaultdict(lambda: [0, 0.0]))

    def rate(self, status: str) -> float:
        return round(self.by_status.get(status, 0) / self.jobs, 4) if self.jobs else 0.0

    def to_dict(self) -> dict[str, Any]:
        def group(values: dict[str, list[float]]) -> dict[str, Any]:
            return {k: {"jobs": int(v[0]), "gpu_hours": round(v[1], 2)} for k, v in sorted(values.items())}

        return {"bucket": self.start, "jobs": self.jobs, "gpu_hours": round(self.gpu_hours, 2),
                "unattributed_rate": self.rate("unattributed"), "ambiguous_rate": self.rate("ambiguous"),
                "by_status": dict(sorted(self.by_status.items())), "by_category": group(self.by_category),
                "by_responsible": group(self.by_responsible)}


def bucket_start(day: str, by: str) -> str:
    """The bucket a day (YYYY-MM-DD) falls in: itself, or the Monday of its ISO week."""
    if by == "day":
        return day
    when = date.fromisoformat(day)
    return (when - timedelta(days=when.weekday())).isoformat()


StatsGroup = tuple[Any, Any, Any, Any, int, int]  # job_day, category, responsible, status, jobs, GPU-hours (1e-4 h)
_GROUP = "job_day, category, responsible, status"


def _scan_groups(store: Store, where: list[str], params: list[Any]) -> list[StatsGroup]:
    """Groups counted from ``diagnoses`` rows: one pass over the covering ``diagnoses_stats`` index."""
    sql = (f"SELECT {_GROUP}, COUNT(*) AS n, COALESCE(SUM({schema.GPU_HOURS_E4_SQL}), 0) AS e4 "
           "FROM diagnoses INDEXED BY diagnoses_stats " + (f"WHERE {' AND '.join(where)} " if where else "")
           + f"GROUP BY {_GROUP} ORDER BY {_GROUP}")
    return _groups(store, sql, params)


def _summary_groups(store: Store, after: Optional[str], before: Optional[str]) -> list[StatsGroup]:
    """Groups read from ``stats_daily`` (clusters added up) for the job days strictly between the two."""
    where, params = [], []
    if after is not None:
        where.append("job_day > ?")
        params.append(after)
    if before is not None:
        where.append("job_day < ?")
        params.append(before)
    sql = (f"SELECT {_GROUP}, SUM(jobs) AS n, SUM(gpu_hours_e4) AS e4 FROM stats_daily "
           + (f"WHERE {' AND '.join(where)} " if where else "")
           + f"GROUP BY {_GROUP} HAVING SUM(jobs) != 0 ORDER BY {_GROUP}")
    return _groups(store, sql, params)


def _groups(store: Store, sql: str, params: list[Any]) -> list[StatsGroup]:
    """Rows as plain tuples (thousands of them: dicts would cost more than the query)."""
    try:
        return store.db.execute(sql, params).fetchall()
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{store.path}: {exc}") from exc


def _has_summary(store: Store) -> bool:
    return "0004_stats_daily" in schema.applied(store.db)


def verdict_stats(store: Store, window: Window, by: str = "week", use_summary: bool = True) -> list[Bucket]:
    """Counts and lost GPU-hours per category and per responsible party in each day or week, with the
    unattributed and ambiguous rates; oldest bucket first.

    Whole days come from the daily summary ``stats_daily`` (a few rows per day); the day of ``since`` and
    the day of ``until`` are always counted from ``diagnoses`` with the exact ``job_time`` cut, whether or
    not they are cut at 00:00 UTC (one day each, so the answer stays that of a full scan even for job times
    stored in another string form). Without a window there is no edge: everything comes from the summary.
    ``use_summary=False`` (or a store without migration 0004, opened read-only) counts every row from the
    covering ``diagnoses_stats`` index instead. Both give bit-identical buckets: jobs are counted, GPU-hours
    are added as exact integers of 1/10,000 h (the store's precision, ``schema.GPU_HOURS_E4_SQL``) and turned
    into hours per group, and groups fold into buckets in the same (GROUP BY) order. Against the version
    before the summary (``TOTAL(gpu_hours)``, a float sum in index order) the printed figures are the same
    except where an exact sum ends in 5 at the third decimal: that tie was rounded to 2 decimals by float
    noise and may now go the other way (0.01 apart; tests/store/test_stats_daily.py checks exactly this)."""
    if by not in ("day", "week"):
        raise ValueError(f"--by must be day or week, not {by!r}")
    where, params = window.clauses("job_time")
    first = iso_utc(window.since)[:10] if window.since is not None else None
    last = iso_utc(window.until)[:10] if window.until is not None else None
    if first is not None:  # a range on the index's first column; job_time then cuts exactly
        where.append("job_day >= ?")
        params.append(first)
    if last is not None:
        where.append("job_day <= ?")
        params.append(last)
    if use_summary and _has_summary(store):
        edges = sorted({day for day in (first, last) if day is not None})
        groups = _summary_groups(store, first, last)
        if edges:  # with a window every job_day is a date: the edge days go before and after, in order
            groups += _scan_groups(store, [*where, f"job_day IN ({', '.join('?' for _ in edges)})"],
                                   [*params, *edges])
            groups.sort(key=itemgetter(0))  # stable: the SQL order within each day stays
    else:
        groups = _scan_groups(store, where, params)
    buckets: dict[str, Bucket] = {}
    starts: dict[Any, str] = {}
    for job_day, category, responsible, status, n, e4 in groups:  # in GROUP BY order, as before the summary
        if job_day not in starts:
            starts[job_day] = bucket_start(job_day, by)
        start = starts[job_day]
        bucket = buckets.setdefault(start, Bucket(start))
        hours = e4 / 10000
        bucket.jobs += n
        bucket.gpu_hours += hours
        bucket.by_status[status] += n
        for table, key in ((bucket.by_category, category), (bucket.by_responsible, responsible)):
            table[key][0] += n
            table[key][1] += hours
    return [buckets[k] for k in sorted(buckets)]


def verdict_totals(store: Store) -> dict[tuple[str, str], tuple[int, float]]:
    """All-time (status, category) -> (verdicts, GPU-hours), from the same groups as :func:`verdict_stats`
    (the daily summary when the store has it, else one pass over the covering index)."""
    groups = _summary_groups(store, None, None) if _has_summary(store) else _scan_groups(store, [], [])
    totals: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for _day, category, _responsible, status, n, e4 in groups:
        total = totals[(str(status), str(category))]
        total[0] += n
        total[1] += e4
    return {key: (jobs, e4 / 10000) for key, (jobs, e4) in sorted(totals.items())}
