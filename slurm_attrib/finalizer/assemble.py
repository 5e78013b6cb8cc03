"""Assembling the job bundle (DESIGN.md §3) the engine reads: job.yaml, applog/, the node bundles'
syslog/facts/metrics, and sacct/ (the job's rows, the nodes' recent failures, node events)."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..model import iso
from ..slurm.records import AcctRecord, NodeEvent
from . import nodebundles
from .applog import AppLogRead
from .jobinfo import JobInfo


@dataclass
class BundleParts:
    """Everything gathered for one job, ready to be written."""

    info: JobInfo
    steps: list[AcctRecord] = field(default_factory=list)
    node_states: dict[str, tuple[str, str]] = field(default_factory=dict)  # node → (state, reason)
    node_dirs: dict[str, Path] = field(default_factory=dict)
    app_logs: dict[str, AppLogRead] = field(default_factory=dict)  # bundle name → read result
    history: list[AcctRecord] = field(default_factory=list)
    events: list[NodeEvent] = field(default_factory=list)
    sacct_rows: list[AcctRecord] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


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
            "app_logs": {name: {"path": r.path, "state": r.state, "reason": r.reason, "bytes": len(r.data),
                                "size": r.size} for name, r in sorted(parts.app_logs.items())},
            "state_source": info.state_source,
            "notes": list(parts.notes) + list(info.notes),
        },
    }


def write_bundle(parts: BundleParts, dest: Path) -> Path:
    """Write the bundle into ``dest`` (temp directory + rename; an older one is replaced)."""
    tmp = dest.with_name(f".tmp-{os.getpid()}-{dest.name}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True, mode=0o750)
    (tmp / "job.yaml").write_text(yaml.safe_dump(job_yaml(parts), sort_keys=False), encoding="utf-8")
    for name, read in sorted(parts.app_logs.items()):
        if read.state == "ok":
            (tmp / "applog").mkdir(exist_ok=True)
            (tmp / "applog" / name).write_bytes(read.data)
    for node, folder in sorted(parts.node_dirs.items()):
        nodebundles.copy_evidence(folder, tmp, node)
    _write_sacct(tmp / "sacct", parts)
    if dest.exists():
        shutil.rmtree(dest)
    os.replace(tmp, dest)
    return dest


def _write_sacct(folder: Path, parts: BundleParts) -> None:
    folder.mkdir(exist_ok=True)
    _dump(folder / "job.json", [r.to_dict() for r in parts.sacct_rows])
    if parts.history:
        _dump(folder / "node_history.json", [r.to_dict() for r in parts.history])
    if parts.events:
        _dump(folder / "node_events.json", [e.to_dict() for e in parts.events])


def _dump(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, sort_keys=True, indent=1) + "\n", encoding="utf-8")


def down_nodes(events: list[NodeEvent], nodes: tuple[str, ...]) -> list[str]:
    """Nodes of the job with a DOWN/FAIL event (not a mere drain) in the queried window."""
    out = []
    for ev in events:
        state = ev.state.upper()
        if ev.node in nodes and ("DOWN" in state or "FAIL" in state) and ev.node not in out:
            out.append(ev.node)
    return sorted(out)


def applog_names(info: JobInfo) -> dict[str, str]:
    """Bundle file name → expanded path (stdout, and stderr when it is a different file)."""
    from .applog import JobIdentity, expand_pattern

    ident = JobIdentity(job_id=info.job_id, user=info.user, uid=info.uid, job_name=info.job_name,
                        first_node=info.nodes[0] if info.nodes else "", array_job_id=info.array_job_id,
                        array_task_id=info.array_task_id, work_dir=info.work_dir)
    out: dict[str, str] = {}
    default = "slurm-%A_%a.out" if info.array_job_id else "slurm-%j.out"
    stdout = expand_pattern(info.std_out or default, ident)
    out[f"slurm-{info.job_id}.out"] = stdout
    if info.std_err:
        stderr = expand_pattern(info.std_err, ident)
        if stderr != stdout:
            out[f"slurm-{info.job_id}.err"] = stderr
    return out
