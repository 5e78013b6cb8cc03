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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ..slurm import hostlist


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
        return int(value) if value and value.isdigit() else None


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
    """``<cluster>_<raw job id>_<restart count>``: the name node bundles and queue entries share."""
    return f"{cluster}_{job_id}_{restart_count}"


def read_entry(path: Path) -> Optional[QueueEntry]:
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
        env = {str(k): str(v) for k, v in dict(data["env"]).items()}
        return QueueEntry(path=path, hook=str(data["hook"]), enqueued_at=float(data["enqueued_at"]), env=env)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def scan_queue(spool: Path) -> tuple[list[PendingJob], list[Path]]:
    """Pending jobs (grouped, oldest first) and the queue files that cannot be read."""
    folder = spool / "queue"
    bad: list[Path] = []
    entries: list[QueueEntry] = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        if path.name.startswith(".tmp-"):
            continue
        entry = read_entry(path)
        if entry is None or not entry.job_id:
            bad.append(path)
        else:
            entries.append(entry)
    return group_entries(entries), bad


def group_entries(entries: list[QueueEntry]) -> list[PendingJob]:
    """Merge entries of the same job: EpilogSlurmctld ones by their key; a jobcomp entry (no restart
    count) joins the EpilogSlurmctld entry of the same (cluster, job id) with the highest restart count."""
    jobs: dict[tuple[str, str, Optional[int]], PendingJob] = {}
    for entry in sorted((e for e in entries if e.hook != "jobcomp"), key=lambda e: e.enqueued_at):
        ident = (entry.cluster, entry.job_id, entry.restart_count or 0)
        jobs.setdefault(ident, PendingJob(*ident)).entries.append(entry)
    for entry in (e for e in entries if e.hook == "jobcomp"):
        same = [j for (c, i, _), j in jobs.items() if (c, i) == (entry.cluster, entry.job_id)]
        if same:
            max(same, key=lambda j: j.restart_count or 0).entries.append(entry)
        else:
            jobs.setdefault((entry.cluster, entry.job_id, None),
                            PendingJob(entry.cluster, entry.job_id, None)).entries.append(entry)
    return sorted(jobs.values(), key=lambda j: j.first_enqueued)


def remove_entries(job: PendingJob) -> None:
    for entry in job.entries:
        entry.path.unlink(missing_ok=True)


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".tmp-{os.getpid()}-{path.name}")
    tmp.write_text(json.dumps(data, sort_keys=True, indent=1), encoding="utf-8")
    os.replace(tmp, path)


def read_done(spool: Path, key: str) -> Optional[dict[str, Any]]:
    try:
        data = json.loads((spool / "done" / f"{key}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_done(spool: Path, key: str, record: dict[str, Any]) -> None:
    write_json_atomic(spool / "done" / f"{key}.json", record)
