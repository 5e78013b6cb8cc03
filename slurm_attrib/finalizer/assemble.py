"""Assembling the job bundle (DESIGN.md §3) the engine reads: job.yaml, and what the controller-side
sources wrote (applog/, sacct/) next to the node bundles' syslog/facts/metrics."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..connectors.base import MemoryBundle, SourceCoverage, Workload
from ..model import iso
from ..slurm.records import AcctRecord
from . import nodebundles
from .jobinfo import JobInfo


@dataclass
class BundleParts:
    """Everything gathered for one job, ready to be written: ``files`` holds what the controller-side
    sources wrote, ``app_logs`` their coverage of the job's output files (bundle name → coverage)."""

    info: JobInfo
    steps: list[AcctRecord] = field(default_factory=list)
    node_states: dict[str, tuple[str, str]] = field(default_factory=dict)  # node → (state, reason)
    node_dirs: dict[str, Path] = field(default_factory=dict)
    app_logs: dict[str, SourceCoverage] = field(default_factory=dict)
    files: MemoryBundle = field(default_factory=MemoryBundle)
    sacct_rows: list[AcctRecord] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sources: list[SourceCoverage] = field(default_factory=list)  # the gap connectors' coverage (collection.sources)


def workload(info: JobInfo) -> Workload:
    """The job as the evidence sources see it."""
    return Workload(cluster=info.cluster, job_id=info.job_id, nodes=info.nodes, user=info.user, uid=info.uid,
                    partition=info.partition, job_name=info.job_name, work_dir=info.work_dir,
                    std_out=info.std_out, std_err=info.std_err, array_job_id=info.array_job_id,
                    array_task_id=info.array_task_id, restart_count=info.restart_count)


def job_yaml(parts: BundleParts) -> dict[str, Any]:
    info = parts.info
    return {
        "job_id": info.job_id,
        "cluster": info.cluster,
        "user": info.user,
        "partition": info.partition,
        "nodes": list(info.nodes),
        "start": iso(info.start),
        "end": iso(info.end),
        "state": info.state,
        "exit_code": info.exit_code or "0:0",
        "derived_exit_code": info.derived_exit_code or "0:0",
        "steps": [{"id": s.step_id, "state": s.state, "exit_code": s.exit_code, "nodes": list(s.nodes)}
                  for s in parts.steps],
        "restart_count": info.restart_count,
        "array_job_id": info.array_job_id,
        "array_task_id": info.array_task_id,
        "collection": {
            "node_bundles": {n: s for n, (s, _) in sorted(parts.node_states.items())},
            "node_bundle_reasons": {n: r for n, (s, r) in sorted(parts.node_states.items()) if r},
            "app_logs": {name: {"path": c.query, "state": c.state, "reason": c.reason, "bytes": c.bytes,
                                "size": c.size} for name, c in sorted(parts.app_logs.items())},
            "state_source": info.state_source,
            "notes": list(parts.notes) + list(info.notes),
            **({"sources": [c.job_entry() for c in parts.sources]} if parts.sources else {}),
        },
    }


def write_bundle(parts: BundleParts, dest: Path) -> Path:
    """Write the bundle into ``dest`` (temp directory + rename; an older one, or a link in its place, is
    replaced). A failure (a full disk) leaves no temporary copy behind."""
    tmp = dest.with_name(f".tmp-{os.getpid()}-{dest.name}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True, mode=0o750)
    try:
        _fill(parts, tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
        dest.unlink()
    elif dest.exists():
        shutil.rmtree(dest)
    os.replace(tmp, dest)
    return dest


def _fill(parts: BundleParts, tmp: Path) -> None:
    (tmp / "job.yaml").write_text(yaml.safe_dump(job_yaml(parts), sort_keys=False), encoding="utf-8")
    for rel, data in sorted(parts.files.files.items()):
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / rel).write_bytes(data)
    skipped: list[str] = []
    for node, folder in sorted(parts.node_dirs.items()):
        nodebundles.copy_evidence(folder, tmp, node, skipped=skipped)
    if skipped:
        parts.notes.extend(skipped)
        (tmp / "job.yaml").write_text(yaml.safe_dump(job_yaml(parts), sort_keys=False), encoding="utf-8")
