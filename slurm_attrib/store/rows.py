"""A Diagnosis (its canonical JSON dict) as store rows: the indexed verdict columns and culprit events.

``node_hours`` = nodes * job duration; ``gpu_hours`` = node_hours * ``gpus_per_node`` only when the
bundle's job.yaml states ``gpus_per_node`` (never guessed; NULL otherwise).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Optional, Protocol

from .. import canonical
from ..timestamps import parse_iso
from .timespec import iso_utc


class KeyedJob(Protocol):
    """A job record that names its key fields as job.yaml does (JobFacts, the finalizer's JobInfo)."""

    @property
    def cluster(self) -> str: ...

    @property
    def job_id(self) -> str: ...

    @property
    def array_task_id(self) -> str: ...

    @property
    def restart_count(self) -> int: ...


@dataclass(frozen=True)
class JobKey:
    """What identifies one verdict: (cluster, job id, array task id, restart count), named as in job.yaml.
    The constructors below read it from each place a job is described, so no caller picks fields by hand."""

    cluster: str
    job_id: str
    array_task_id: str = ""
    restart_count: int = 0

    @classmethod
    def of(cls, diag: Mapping[str, Any]) -> JobKey:
        """The key of a Diagnosis (its canonical dict): its ``job`` section uses job.yaml's names."""
        job = diag.get("job") or {}
        return cls(cluster=str(job.get("cluster") or ""), job_id=str(job.get("job_id") or "unknown"),
                   array_task_id=str(job.get("array_task_id") or ""),
                   restart_count=int(job.get("restart_count") or 0))

    @classmethod
    def of_job(cls, job: KeyedJob) -> JobKey:
        """The key of a loaded job.yaml (``Bundle.job``) or of the finalizer's ``JobInfo``."""
        return cls(job.cluster, job.job_id, job.array_task_id, job.restart_count)

    @classmethod
    def of_row(cls, row: Mapping[str, Any]) -> JobKey:
        """The key of a stored ``diagnoses`` row (whose column is ``array_task``)."""
        return cls(str(row["cluster"]), str(row["job_id"]), str(row["array_task"]), int(row["restart_count"]))


def diagnosis_json(diag: dict[str, Any]) -> str:
    """Compact canonical JSON (sorted keys): what the store keeps and what the verdict id hashes."""
    return canonical.dumps(diag, indent=None)


def verdict_id(diag: dict[str, Any]) -> str:
    """Stable id: sha256 of the job key, the ruleset hash and the canonical JSON; 16 hex digits."""
    key = JobKey.of(diag)
    ruleset_hash = str((diag.get("ruleset") or {}).get("hash") or "")
    text = f"{key.cluster}/{key.job_id}/{key.array_task_id}/{key.restart_count}\n{ruleset_hash}\n{diagnosis_json(diag)}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def node_hours(job: dict[str, Any]) -> Optional[float]:
    """len(nodes) * duration in hours, when start and end are known."""
    start, end = parse_iso(str(job.get("start") or "")), parse_iso(str(job.get("end") or ""))
    if start is None or end is None or end < start:
        return None
    return round(len(job.get("nodes") or []) * (end - start).total_seconds() / 3600.0, 4)


def job_time(job: dict[str, Any], verdict_time: datetime) -> str:
    """The job's end, else its start, else the verdict time: what --since/--until and buckets use."""
    return str(job.get("end") or job.get("start") or iso_utc(verdict_time))


def verdict_row(diag: dict[str, Any], verdict_time: datetime, gpus_per_node: Optional[int]) -> dict[str, Any]:
    """The ``diagnoses`` columns of one verdict."""
    job, root = diag.get("job") or {}, diag.get("root_cause") or {}
    key = JobKey.of(diag)
    hours = node_hours(job)
    when = job_time(job, verdict_time)
    return {
        "cluster": key.cluster, "job_id": key.job_id, "array_job_id": str(job.get("array_job_id") or ""),
        "array_task": key.array_task_id, "restart_count": key.restart_count, "user": job.get("user") or "",
        "partition": job.get("partition") or "", "start": job.get("start"), "end": job.get("end"),
        "job_time": when, "job_day": when[:10], "state": job.get("state") or "", "status": diag.get("status"),
        "category": diag.get("category"), "responsible": diag.get("responsible"),
        "culprit_nodes": ",".join(diag.get("culprit_nodes") or []), "root_kind": root.get("kind"),
        "root_summary": root.get("summary") or diag.get("summary"),
        "ruleset_hash": (diag.get("ruleset") or {}).get("hash"), "engine_version": diag.get("engine_version"),
        "verdict_time": iso_utc(verdict_time), "node_hours": hours, "gpus_per_node": gpus_per_node,
        "gpu_hours": round(hours * gpus_per_node, 4) if hours is not None and gpus_per_node else None,
        "verdict_id": verdict_id(diag), "json": diagnosis_json(diag),
    }


def culprit_rows(diag: dict[str, Any], row: dict[str, Any]) -> list[dict[str, Any]]:
    """One event per culprit node (with the root cause's GPU on the root's node)."""
    root = diag.get("root_cause") or {}
    when = root.get("time") or row["job_time"]
    return [{"cluster": row["cluster"], "job_id": row["job_id"], "node": node,
             "gpu": root.get("gpu") if root.get("node") == node else None, "time": when, "job_time": row["job_time"],
             "category": row["category"], "responsible": row["responsible"], "gpu_hours": row["gpu_hours"]}
            for node in diag.get("culprit_nodes") or []]
