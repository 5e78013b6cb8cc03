"""A static inventory of workloads: for sites without a scheduler integration, and to replay incidents.

::

    workloads:
      - job_id: "88123"          # any job.yaml key may stand here (docs/bundle.md): cluster, user,
        cluster: orion           # partition, nodes, start, end, state, exit_code, derived_exit_code,
        nodes: [gpu-a01, gpu-a02]  # ranks, steps, addresses, restart_count, ...
        start: "2026-11-20T09:02:11+00:00"
        end: "2026-11-20T10:31:02+00:00"
        state: FAILED
        exit_code: "1:0"
        sources:                 # the connectors to ask, with their per-workload arguments
          files:
            app: [/scratch/logs/slurm-88123.out]               # globs allowed
            kernel: {gpu-a02: /var/log/remote/gpu-a02/kern.log}
          loki: {}               # the configured Loki, its label mapping (keys here override it)
          prometheus: {}

Relative paths are relative to the inventory file; globs expand in sorted order. ``end`` is required
(it bounds every query); without ``start`` the window opens ``watch.lookback_s`` before the end.
``state`` defaults to FAILED. A workload without ``sources`` is asked of every configured connector.
An inventory lists workloads explicitly, so ``discover`` returns all of them, whatever the window.
"""

from __future__ import annotations

import glob
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import yaml

from ..connectors.base import Window, Workload
from ..errors import ConfigError
from ..safeio import read_regular
from ..safeyaml import load as load_yaml
from ..slurm.ids import is_valid
from ..timestamps import parse_iso
from . import Found

__all__ = ["StaticDiscovery", "load_inventory"]

MAX_INVENTORY_BYTES = 16 << 20
JOB_KEYS = ("job_id", "cluster", "user", "partition", "nodes", "start", "end", "state", "exit_code",
            "derived_exit_code", "ranks", "steps", "addresses", "restart_count", "array_job_id", "array_task_id",
            "gpus_per_node", "job_name")
PATH_KEYS = {"files"}  # connectors whose arguments hold paths


def load_inventory(path: str, cluster: str = "", window_before: timedelta = timedelta(minutes=5),
                   window_after: timedelta = timedelta(minutes=1),
                   default_span: timedelta = timedelta(hours=2)) -> list[Found]:
    """The workloads of the inventory at ``path``, sorted by end time then key. ConfigError names the
    file and the workload for anything wrong, so an admin can fix the line."""
    try:
        text = read_regular(path, MAX_INVENTORY_BYTES).decode("utf-8")
        raw = load_yaml(text)
    except (OSError, ValueError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read the inventory: {exc}") from None
    entries = raw.get("workloads") if isinstance(raw, dict) else None
    if not isinstance(entries, list):
        raise ConfigError(f"{path}: expected a mapping with a `workloads` list")
    base = Path(path).resolve().parent
    found = [_found(entry, i, base, cluster, window_before, window_after, default_span, path)
             for i, entry in enumerate(entries)]
    keys = [f.key for f in found]
    if len(set(keys)) != len(keys):
        twice = sorted({k for k in keys if keys.count(k) > 1})
        raise ConfigError(f"{path}: workloads listed twice: {', '.join(twice)}")
    return sorted(found, key=lambda f: (f.window.end, f.key))


def _found(entry: Any, index: int, base: Path, cluster: str, before: timedelta, after: timedelta,
           default_span: timedelta, path: str) -> Found:
    where = f"{path}: workloads[{index}]"
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: expected a mapping")
    job = {key: entry[key] for key in JOB_KEYS if key in entry}
    unknown = sorted(set(entry) - set(JOB_KEYS) - {"sources"})
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(map(str, unknown))}")
    job_id = str(job.get("job_id") or "").strip()
    if not job_id:
        raise ConfigError(f"{where}: job_id is required")
    job["job_id"] = job_id
    job["cluster"] = str(job.get("cluster") or cluster or "static")
    nodes = job.get("nodes", [])
    if not isinstance(nodes, list) or not all(isinstance(n, str) and is_valid("node", n) for n in nodes):
        raise ConfigError(f"{where} ({job_id}): nodes must be a list of node names ([A-Za-z0-9._-], "
                          "a letter or digit first)")
    end = _time(job.get("end"), f"{where} ({job_id}): end")
    if end is None:
        raise ConfigError(f"{where} ({job_id}): end is required (it bounds every query)")
    start = _time(job.get("start"), f"{where} ({job_id}): start") or end - default_span
    if start > end:
        raise ConfigError(f"{where} ({job_id}): start is after end")
    job["start"], job["end"] = start.isoformat(), end.isoformat()
    job.setdefault("state", "FAILED")
    sources = entry.get("sources")
    if sources is not None and not isinstance(sources, dict):
        raise ConfigError(f"{where} ({job_id}): sources must be a mapping connector -> arguments")
    args = {str(name): _resolve(value or {}, base) if name in PATH_KEYS else (value or {})
            for name, value in sorted((sources or {}).items())}
    workload = Workload(cluster=job["cluster"], job_id=job_id, nodes=tuple(nodes), user=str(job.get("user", "")),
                        partition=str(job.get("partition", "")), job_name=str(job.get("job_name", "")),
                        kind="static", args=args)
    key = f"static:{job['cluster']}:{job_id}:{end.isoformat()}"
    return Found(key, workload, Window(start, end, before, after), job)


def _time(value: Any, where: str) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):  # unquoted in YAML; PyYAML gives a naive time for a UTC stamp
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    moment = parse_iso(str(value))  # a stamp without an offset is UTC
    if moment is None:
        raise ConfigError(f"{where}: {value!r} is not an ISO-8601 time")
    return moment


def _resolve(value: Any, base: Path) -> Any:
    """Paths made absolute against the inventory's folder, globs expanded (sorted); mappings and lists
    are walked, other values kept."""
    if isinstance(value, dict):
        return {str(k): _resolve(v, base) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [p for v in value for p in _expand(v, base)]
    if isinstance(value, str):
        paths = _expand(value, base)
        return paths[0] if len(paths) == 1 else paths
    return value


def _expand(value: Any, base: Path) -> list[str]:
    if not isinstance(value, str):
        return []
    full = os.path.join(base, os.path.expanduser(value))
    if glob.has_magic(full):
        return sorted(glob.glob(full))
    return [os.path.normpath(full)]


class StaticDiscovery:
    """The workloads of an inventory file, read again each round (an admin may append to it)."""

    name = "static"

    def __init__(self, path: str, cluster: str = "", window_before: timedelta = timedelta(minutes=5),
                 window_after: timedelta = timedelta(minutes=1), default_span: timedelta = timedelta(hours=2)) -> None:
        self.path = path
        self.cluster = cluster
        self.window_before, self.window_after, self.default_span = window_before, window_after, default_span

    def discover(self, since: datetime, until: datetime) -> list[Found]:
        return load_inventory(self.path, self.cluster, self.window_before, self.window_after, self.default_span)

    def annotate(self, found: Found, segment: str) -> str:
        return ""
