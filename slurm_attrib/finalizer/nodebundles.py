"""Node bundles in the spool: which arrived, in what state, and copying their evidence into the job
bundle. A node that sent nothing, or only part, is recorded (missing/timeout/error): absence is evidence."""

from __future__ import annotations

import re
import shutil
import stat
from pathlib import Path
from typing import Any, Optional

import yaml

from .. import safeyaml
from ..safeio import copy_regular, read_regular

COPIED = ("syslog", "facts", "metrics")
MAX_COLLECTION_BYTES = 1 << 20
# A node caps its whole bundle (collector.max_bundle_bytes, 8 MiB by default): a file far larger was not
# written by our collector, and is left out before it is read.
MAX_NODE_FILE_BYTES = 64 << 20


def bundle_dir(spool: Path, key: str, node: str) -> Path:
    return spool / "nodes" / key / node


def arrived(spool: Path, key: str) -> dict[str, Path]:
    """Node → its bundle directory, for every complete (renamed into place) bundle of the job."""
    folder = spool / "nodes" / key
    if folder.is_symlink() or not folder.is_dir():  # a link would pass off another tree as node bundles
        return {}
    return {p.name: p for p in sorted(folder.iterdir())
            if not p.name.startswith(".tmp-") and p.is_dir() and not p.is_symlink()}


def staged(spool: Path, key: str) -> list[str]:
    """Nodes whose collector began a bundle (``.tmp-<node>-<pid>``) and never renamed it into place:
    the collector hung or was killed at the Epilog budget."""
    folder = spool / "nodes" / key
    if folder.is_symlink() or not folder.is_dir():
        return []
    names = {m.group(1) for p in folder.iterdir() if (m := re.match(r"^\.tmp-(.+)-\d+$", p.name)) and p.is_dir()}
    return sorted(names)


def read_collection(path: Path) -> Optional[dict[str, Any]]:
    """collection.yaml of a node bundle, or None when missing or unreadable."""
    try:
        text = read_regular(path, MAX_COLLECTION_BYTES)
    except (OSError, ValueError):
        return None
    try:
        data = safeyaml.load(text.decode("utf-8", errors="replace"))
    except yaml.YAMLError:
        return None
    return data if isinstance(data, dict) else None


def source_reports(collection: dict[str, Any]) -> list[dict[str, Any]]:
    """The per-source reports ``{source, state, reason, ...}`` wherever collection.yaml lists them."""
    for key in ("sources", "collection", "reports"):
        value = collection.get(key)
        if isinstance(value, list):
            return [r for r in value if isinstance(r, dict)]
        if isinstance(value, dict):
            return [{"source": k, **v} for k, v in value.items() if isinstance(v, dict)]
    return []


def node_state(directory: Optional[Path], began: bool = False) -> tuple[str, str]:
    """(ok|missing|timeout|error, reason) of one node's bundle; ``began``: no bundle, but the
    collector left its staging directory behind."""
    if directory is None:
        if began:
            return "timeout", "the collector began a bundle and never finished it (killed at the Epilog budget?)"
        return "missing", "no node bundle arrived"
    collection = read_collection(directory / "collection.yaml")
    if collection is None:
        return "error", "partial node bundle: collection.yaml missing or unreadable"
    overall = str(collection.get("state", "")).lower()
    reports = source_reports(collection)
    timed_out = [str(r.get("source")) for r in reports if str(r.get("state", "")).lower() == "timeout"]
    if overall == "timeout" or timed_out:
        return "timeout", "collector timed out" + (f" ({', '.join(timed_out)})" if timed_out else "")
    if overall == "error":
        return "error", str(collection.get("reason", "collector error"))
    return "ok", ""


def copy_evidence(source: Path, dest: Path, node: str, limit: int = MAX_NODE_FILE_BYTES,
                  skipped: Optional[list[str]] = None) -> int:
    """Copy syslog/, facts/, metrics/ and collection.yaml of a node bundle: regular files only, none
    larger than ``limit`` (those are named in ``skipped``, with why, and never read), and only the files
    about ``node`` itself. A node's bundle speaks for that node: a ``syslog/node-01.log`` in node-02's
    bundle would overwrite node-01's own evidence (and could get node-01 drained), so it is left out."""
    copied = 0
    for folder in COPIED:
        base = source / folder
        if not base.is_dir() or base.is_symlink():
            continue
        for item in sorted(base.iterdir()):
            if not _names_node(item.name, node):
                if skipped is not None:
                    skipped.append(f"{node}: {folder}/{item.name} left out: a node bundle holds its own node's "
                                   "evidence only")
                continue
            if stat.S_ISREG(item.lstat().st_mode):
                (dest / folder).mkdir(parents=True, exist_ok=True)
                copied += _copy_one(item, dest / folder / item.name, limit, f"{node}: {folder}/{item.name}", skipped)
    collection = source / "collection.yaml"
    if collection.exists() and not collection.is_symlink():
        (dest / "collection").mkdir(parents=True, exist_ok=True)
        _copy_one(collection, dest / "collection" / f"{node}.yaml", MAX_COLLECTION_BYTES,
                  f"{node}: collection.yaml", skipped)
    return copied


def _names_node(name: str, node: str) -> bool:
    """``node-01.log``, ``node-01.yaml``, ``node-01.dcgm.txt`` are node-01's; ``node-010.log`` is not."""
    return name.startswith(node + ".") and len(name) > len(node) + 1


def _copy_one(item: Path, target: Path, limit: int, name: str, skipped: Optional[list[str]]) -> int:
    try:
        copy_regular(item, target, limit)
    except (OSError, ValueError) as exc:
        if skipped is not None:
            skipped.append(f"{name} left out: {exc}")
        return 0
    return 1


def remove(spool: Path, key: str) -> None:
    folder = spool / "nodes" / key
    if folder.is_symlink():
        folder.unlink()  # the link only, never what it points at
    elif folder.is_dir():
        shutil.rmtree(folder, ignore_errors=True)
