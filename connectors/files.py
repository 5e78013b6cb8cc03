"""Log files named for one workload (a static inventory's ``sources.files``), copied into the bundle.

Arguments (``workload.args["files"]``; the inventory resolved relative paths and globs already):

- ``app``: a list of paths (each becomes ``applog/<file name>``, the job's combined output) or a
  mapping node → path(s) (``applog/NODE.log``);
- ``kernel``: node → path(s), the node's kernel log (``syslog/NODE.log``, ``.gz`` kept as such);
- ``metrics``: node → path(s) of a dcgm-exporter scrape (``.prom``) or ``nvidia-smi -q -x`` (``.xml``);
- ``diag``: node → path(s) of pasted tool output (``diag/NODE.txt``).

Only regular files are read, never through a symlink; each keeps at most its last ``max_bytes`` (the
connector's cap shared by all), cut at a line start. A node outside the workload's node list, or a
name that is not a plain file name, is left out with a note. Kernel text read from a file carries no
proof of who wrote it: the orchestrator records it as ``shipped`` (unverified).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..safeio import open_regular
from ..slurm.ids import is_valid
from .base import BundleWriter, Limits, SourceCoverage, Window, Workload

__all__ = ["FilesSource"]

_KINDS = {"kernel": ("syslog", ".log"), "metrics": ("metrics", ""), "diag": ("diag", ".txt"),
          "app": ("applog", ".log")}


class FilesSource:
    name = "files"

    def collect(self, workload: Workload, window: Window, bundle: BundleWriter, limits: Limits) -> SourceCoverage:
        args = workload.args.get(self.name)
        if not args:
            return SourceCoverage(self.name, "skipped", "no files named for this workload")
        if not isinstance(args, Mapping):
            return SourceCoverage(self.name, "error", "sources.files is not a mapping")
        notes: list[str] = []
        plan = sorted(self._plan(workload, args, notes))
        written: list[str] = []
        total = 0
        truncated = False
        errors: list[str] = []
        for rel, paths in _grouped(plan):
            parts: list[bytes] = []
            for path in paths:
                left = limits.max_bytes - total - sum(len(p) for p in parts)
                if left <= 0:
                    truncated = True
                    break
                try:
                    data, cut = _tail(path, left, gz=rel.endswith(".gz"))
                except (OSError, ValueError) as exc:
                    errors.append(f"{path}: {getattr(exc, 'strerror', None) or exc}")
                    continue
                truncated = truncated or cut
                parts.append(data if not data or data.endswith(b"\n") or rel.endswith(".gz") else data + b"\n")
            if parts:
                total += bundle.write(rel, b"".join(parts))
                written.append(rel)
        state = "ok" if written else ("error" if errors else "empty")
        reason = "; ".join(errors) or ("cut at the byte cap" if truncated else "")
        query = ", ".join(sorted({str(p) for _, p in plan}))
        return SourceCoverage(self.name, state, reason, tuple(written), total, query=query, truncated=truncated,
                              notes=tuple(notes), origin="shipped",
                              facts={"kernel_nodes": sorted(_node_of(r) for r in written if r.startswith("syslog/"))})

    def _plan(self, workload: Workload, args: Mapping[str, Any], notes: list[str]) -> list[tuple[str, str]]:
        """(bundle path, file path) for every file named."""
        plan: list[tuple[str, str]] = []
        for kind, value in sorted(args.items()):
            if kind not in _KINDS:
                notes.append(f"sources.files.{kind}: not one of {', '.join(sorted(_KINDS))}; left out")
                continue
            folder, suffix = _KINDS[kind]
            if kind == "app" and isinstance(value, (list, str)):
                for path in _paths(value):
                    plan.append((f"applog/{_safe_name(Path(path).name)}", path))
                continue
            if not isinstance(value, Mapping):
                notes.append(f"sources.files.{kind}: expected a mapping node -> path(s); left out")
                continue
            for node, paths in sorted(value.items()):
                node = str(node)
                if not is_valid("node", node) or node not in workload.nodes:
                    notes.append(f"sources.files.{kind}: {node!r} is not a node of the workload; left out")
                    continue
                for path in _paths(paths):
                    ending = suffix or (Path(path).suffix if Path(path).suffix in (".prom", ".xml", ".txt") else ".txt")
                    gz = ".gz" if path.endswith(".gz") and kind == "kernel" else ""
                    plan.append((f"{folder}/{node}{ending}{gz}", path))
        return plan


def _grouped(plan: list[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    out: dict[str, list[str]] = {}
    for rel, path in plan:
        out.setdefault(rel, []).append(path)
    return sorted(out.items())


def _paths(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [str(v) for v in value]
    return []


def _safe_name(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".") or "output"
    return cleaned if cleaned.endswith((".log", ".out", ".err", ".txt")) else f"{cleaned}.log"


def _node_of(rel: str) -> str:
    name = rel.split("/", 1)[1]
    return name[: name.index(".")] if "." in name else name


def _tail(path: str, limit: int, gz: bool) -> tuple[bytes, bool]:
    """The last ``limit`` bytes of the regular file ``path``, from a line start; a compressed file is
    taken whole or not at all (its tail alone cannot be read)."""
    with open_regular(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        if gz:
            if size > limit:
                raise ValueError(f"compressed, {size} bytes, more than the {limit} bytes left")
            return handle.read(limit), False
        if size <= limit:
            return handle.read(limit), False
        handle.seek(size - limit)
        data = handle.read(limit)
    start = data.find(b"\n") + 1
    return data[start:], True
