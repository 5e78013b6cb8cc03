"""The finalizer's inputs in the spool: queue entries from the controller hooks, node bundles from the
node epilogs, and the ``done/`` markers that make processing idempotent.

Layout under the spool root: ``queue/<cluster>_<job id>_<restart>.json`` (EpilogSlurmctld) and
``queue/<cluster>_<job id>.jobcomp.json`` (jobcomp/script), ``nodes/<job key>/<node>/`` (node bundles,
renamed into place from ``.tmp-*``), ``done/<job key>.json`` (finished jobs: dedupe), ``jobs/<job key>/``
(assembled job bundles), ``verdicts/`` (the store's spool fallback).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ..connectors.spool import job_key as spool_job_key
from ..safeio import read_regular
from ..slurm import hostlist

MAX_ENTRY_BYTES = 1 << 20  # a hook's whole environment; far more than any real one
MAX_DONE_BYTES = 1 << 20
JOB_ID = re.compile(r"[0-9]{1,12}(_[0-9]{1,10})?")  # a job id, or <array id>_<task id>
RESTART_COUNT = re.compile(r"[0-9]{1,6}")  # ASCII digits: str.isdigit() also takes "²"


class BadEntry(ValueError):
    """A queue entry that cannot be processed; the message says why (it goes into the quarantine)."""


@dataclass(frozen=True)
class QueueEntry:
    """One hook invocation: its whole environment, which hook, and when it ran (epoch seconds)."""

    path: Path
    hook: str
    enqueued_at: float
    env: dict[str, str]

    @property
    def cluster(self) -> str:
        return self.env.get("SLURM_CLUSTER_NAME") or self.env.get("CLUSTER", "")

    @property
    def job_id(self) -> str:
        return self.env.get("SLURM_JOB_ID") or self.env.get("SLURM_JOBID") or self.env.get("JOBID", "")

    @property
    def restart_count(self) -> Optional[int]:
        value = self.env.get("SLURM_JOB_RESTART_COUNT")
        return int(value) if value and RESTART_COUNT.fullmatch(value) else None

    @property
    def run_start(self) -> Optional[int]:
        """jobcomp's ``START`` (epoch seconds): which run of a requeued job the record is about."""
        value = self.env.get("START", "") if self.hook == "jobcomp" else ""
        return int(value) if value.isdigit() and len(value) <= 12 else None


@dataclass
class PendingJob:
    """All queue entries of one job (both hooks, or the same hook twice), merged."""

    cluster: str
    job_id: str
    restart_count: Optional[int]
    entries: list[QueueEntry] = field(default_factory=list)

    @property
    def key(self) -> str:
        return job_key(self.cluster, self.job_id, self.restart_count or 0)

    @property
    def first_enqueued(self) -> float:
        return min(e.enqueued_at for e in self.entries)

    def env(self, hook: str) -> dict[str, str]:
        for entry in self.entries:
            if entry.hook == hook:
                return entry.env
        return {}

    def nodes(self) -> list[str]:
        """The allocation from the hooks' environment (sacct can lag behind it right after the end)."""
        ctld, comp = self.env("epilog_slurmctld"), self.env("jobcomp")
        return hostlist.expand(ctld.get("SLURM_JOB_NODELIST") or comp.get("NODES", ""))


def job_key(cluster: str, job_id: str, restart_count: int) -> str:
    """``<cluster>_<raw job id>_<restart count>``: the name node bundles and queue entries share, one
    path component under the spool whatever a hook's environment said (``../../x`` becomes ``.._.._x``),
    made by the node side's own function so both name a job alike."""
    return spool_job_key(cluster, job_id, restart_count)


def read_entry(path: Path) -> QueueEntry:
    """One queue file; :class:`BadEntry` saying why when it is not a regular file, not the JSON a hook
    writes, or names no job id, a malformed one or a malformed restart count."""
    try:
        data: Any = json.loads(read_regular(path, MAX_ENTRY_BYTES))
        env = {str(k): str(v) for k, v in dict(data["env"]).items()}
        entry = QueueEntry(path=path, hook=str(data["hook"]), enqueued_at=float(data["enqueued_at"]), env=env)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise BadEntry(f"unreadable queue entry: {type(exc).__name__}: {exc}") from exc
    if not JOB_ID.fullmatch(entry.job_id):
        raise BadEntry(f"job id {entry.job_id[:80]!r} is not a Slurm job id")
    restart = entry.env.get("SLURM_JOB_RESTART_COUNT")
    if restart is not None and restart != "" and not RESTART_COUNT.fullmatch(restart):
        raise BadEntry(f"restart count {restart[:40]!r} is not a number")
    return entry


def scan_queue(spool: Path, cluster: str = "") -> tuple[list[PendingJob], list[tuple[Path, str]]]:
    """Pending jobs (grouped, oldest first) and the queue files that cannot be processed, with why;
    ``cluster`` (the configuration's) names a jobcomp record's cluster when its CLUSTER is empty."""
    folder = spool / "queue"
    bad: list[tuple[Path, str]] = []
    entries: list[QueueEntry] = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        if path.name.startswith(".tmp-"):
            continue
        try:
            entries.append(read_entry(path))
        except BadEntry as exc:
            bad.append((path, str(exc)))
    return group_entries(entries, cluster), bad


def group_entries(entries: list[QueueEntry], default_cluster: str = "") -> list[PendingJob]:
    """Merge entries of the same run of a job. EpilogSlurmctld ones by their key; a jobcomp entry (no
    restart count) joins the EpilogSlurmctld entry of the same (cluster, job id) that ran nearest in time
    (both hooks fire within milliseconds of each other at a run's end; a requeued job has one pair per
    run); without one, jobcomp entries of different runs (``START``) stay apart. jobcomp/script gives an
    empty ``CLUSTER`` for a user without an association: such a record takes ``default_cluster``, or else
    joins its job's EpilogSlurmctld entry by the job id alone (one finalizer serves one cluster); it made
    a second verdict under the cluster ``cluster``, the wrong one in AdminComment."""
    jobs: dict[tuple[str, str, Optional[int]], PendingJob] = {}
    for entry in sorted((e for e in entries if e.hook != "jobcomp"), key=lambda e: e.enqueued_at):
        ident = (entry.cluster, entry.job_id, entry.restart_count or 0)
        jobs.setdefault(ident, PendingJob(*ident)).entries.append(entry)
    alone: dict[tuple[str, str, Optional[int]], PendingJob] = {}
    for entry in sorted((e for e in entries if e.hook == "jobcomp"), key=lambda e: (e.enqueued_at, e.path.name)):
        cluster = entry.cluster or default_cluster
        same = [j for (c, i, _), j in jobs.items() if i == entry.job_id and (c == cluster or not cluster)]
        if same:
            min(same, key=lambda j: (abs(j.first_enqueued - entry.enqueued_at), -(j.restart_count or 0))
                ).entries.append(entry)
        else:
            alone.setdefault((cluster, entry.job_id, entry.run_start),
                             PendingJob(cluster, entry.job_id, None)).entries.append(entry)
    return sorted([*jobs.values(), *alone.values()], key=lambda j: j.first_enqueued)


def remove_entries(job: PendingJob) -> None:
    for entry in job.entries:
        entry.path.unlink(missing_ok=True)


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".tmp-{os.getpid()}-{path.name}")
    try:
        tmp.write_text(json.dumps(data, sort_keys=True, indent=1), encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a full disk must not keep half-written copies
        raise


def read_done(spool: Path, key: str) -> Optional[dict[str, Any]]:
    try:
        data = json.loads(read_regular(spool / "done" / f"{key}.json", MAX_DONE_BYTES))
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def write_done(spool: Path, key: str, record: dict[str, Any]) -> None:
    write_json_atomic(spool / "done" / f"{key}.json", record)
