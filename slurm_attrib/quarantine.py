"""Poison input set aside: what the finalizer cannot process is moved, with the reason, into a
quarantine folder, so the rest of the queue goes on and the next restart does not trip on it again.

Each quarantined entry is a folder ``<quarantine>/<time>-<name>/`` holding the moved files (queue
entries, node bundles, a spooled verdict) and ``reason.json`` (what it was, where it came from, why).
``slurm-attrib finalize --status`` lists them; an admin inspects, then deletes or moves them back.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .connectors.spool import safe_name
from .safeio import read_regular

FOLDER = "quarantine"
REASON_FILE = "reason.json"
MAX_REASON_CHARS = 2000


@dataclass(frozen=True)
class Quarantined:
    """One entry of a quarantine folder."""

    folder: Path
    kind: str
    name: str
    reason: str
    time: str


def quarantine(folder: Path, kind: str, name: str, paths: Iterable[Path], reason: str) -> Path:
    """Move ``paths`` (those that exist; links are moved, never followed) into a new entry of ``folder``
    with its reason. Everything stays on the spool's filesystem, so each move is one rename."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    base = f"{stamp}-{safe_name(name)[:100]}"
    folder.mkdir(mode=0o750, parents=True, exist_ok=True)
    entry, n = folder / base, 1
    while True:
        try:
            entry.mkdir(mode=0o750)
            break
        except FileExistsError:
            n += 1
            entry = folder / f"{base}.{n}"
    moved = []
    for path in paths:
        if os.path.lexists(path):
            os.rename(path, entry / safe_name(path.name))
            moved.append(str(path))
    record = {"kind": kind, "name": name, "reason": reason[:MAX_REASON_CHARS], "moved": moved,
              "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    (entry / REASON_FILE).write_text(json.dumps(record, indent=1, sort_keys=True), encoding="utf-8")
    return entry


def listing(folder: Path) -> list[Quarantined]:
    """The entries of ``folder``, oldest first; one whose reason cannot be read says so."""
    found = []
    for entry in sorted(folder.iterdir()) if folder.is_dir() else []:
        if entry.is_symlink() or not entry.is_dir():
            continue
        record: Any = {}
        try:
            record = json.loads(read_regular(entry / REASON_FILE, 1 << 16))
        except (OSError, ValueError):
            record = {"reason": f"{REASON_FILE} missing or unreadable"}
        if not isinstance(record, dict):
            record = {"reason": f"{REASON_FILE} is not a mapping"}
        found.append(Quarantined(entry, str(record.get("kind", "?")), str(record.get("name", entry.name)),
                                 str(record.get("reason", "")), str(record.get("time", ""))))
    return found
