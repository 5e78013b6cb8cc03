"""The last resort of a write: a store that stays locked or read-only never loses a verdict.

The verdict (canonical diagnosis, verdict time, packed bundle) goes into a spool directory as one JSON
file, written to a temporary name and renamed, so a reader never sees half a file;
:func:`import_spool` loads the spooled verdicts into the store later and removes them.
"""

from __future__ import annotations

import base64
import json
import os
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Optional, Union

from .. import quarantine
from ..model import Diagnosis
from ..safeio import read_regular
from ..timestamps import parse_iso
from . import packing
from .db import RecordResult, Store, StoreSettings
from .errors import StoreBusy, StoreError
from .rows import JobKey, verdict_id
from .timespec import iso_utc

DEFAULT_SPOOL_DIR = "/var/spool/slurm-attrib/verdicts"
SPOOL_ENV = "SLURM_ATTRIB_SPOOL"
SPOOL_KIND = "slurm-attrib.verdict"
MAX_SPOOLED_BYTES = 256 << 20  # a diagnosis and its packed bundle (capped at store.max_bundle_bytes)


@dataclass(frozen=True)
class Recorded:
    """Where a verdict went: into the store (``result``) or into the spool (``spooled``, with why)."""

    result: Optional[RecordResult] = None
    spooled: Optional[Path] = None
    reason: str = ""


@dataclass
class SpoolImport:
    imported: list[Path] = field(default_factory=list)
    failed: list[tuple[Path, str]] = field(default_factory=list)  # quarantined, with why


def resolve_spool_dir(option: Optional[str], environ: Optional[dict[str, str]] = None,
                      configured_root: str = "") -> str:
    """The verdict spool: ``option``, else ``verdicts/`` under the spool root ``$SLURM_ATTRIB_SPOOL``, else
    under the configuration's ``spool.dir`` (the layout of etc/slurm-attrib.yaml), else the default."""
    env = os.environ if environ is None else environ
    root = env.get(SPOOL_ENV) or configured_root
    return option or (str(Path(root) / "verdicts") if root else DEFAULT_SPOOL_DIR)


def spool_verdict(spool_dir: Union[str, os.PathLike[str]], diag: dict[str, Any], verdict_time: datetime,
                  bundle: Optional[packing.PackedBundle], gpus_per_node: Optional[int]) -> Path:
    """Write one verdict into ``spool_dir`` (temp + rename); return the file's path."""
    folder = Path(spool_dir)
    folder.mkdir(parents=True, exist_ok=True, mode=0o750)
    key = JobKey.of(diag)
    name = "_".join(_safe(p) for p in (key.cluster, key.job_id, key.array_task_id or "-", str(key.restart_count),
                                         verdict_id(diag)))
    payload = {"kind": SPOOL_KIND, "version": 1, "verdict_time": iso_utc(verdict_time), "diagnosis": diag,
               "gpus_per_node": gpus_per_node,
               "bundle": base64.b64encode(bundle.data).decode("ascii") if bundle else None,
               "bundle_original_bytes": bundle.original_bytes if bundle else 0,
               "bundle_omitted": list(bundle.omitted) if bundle else []}
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(payload, handle, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        target = folder / f"verdict-{name}.json"
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-." else "-" for c in text) or "-"


def record_or_spool(store_path: Union[str, os.PathLike[str]], diagnosis: Union[Diagnosis, dict[str, Any]],
                    verdict_time: datetime, spool_dir: Union[str, os.PathLike[str]], *,
                    bundle_dir: Optional[Union[str, os.PathLike[str]]] = None,
                    settings: Optional[StoreSettings] = None) -> Recorded:
    """Record into the store, with its waits and retries; when the store stays locked, read-only or
    cannot be opened, leave the verdict in the spool instead. Raises only if the spool fails too."""
    settings = settings or StoreSettings()
    diag = diagnosis.to_dict() if isinstance(diagnosis, Diagnosis) else diagnosis
    bundle = packing.pack_bundle(bundle_dir, settings.bundle_cap_bytes) if bundle_dir is not None else None
    gpus = packing.gpus_per_node_in_dir(bundle_dir) if bundle_dir is not None else None
    try:
        with Store.open(store_path, settings) as store:
            return Recorded(result=store.record(diag, verdict_time, bundle=bundle, gpus_per_node=gpus))
    except (StoreBusy, StoreError) as exc:
        return Recorded(spooled=spool_verdict(spool_dir, diag, verdict_time, bundle, gpus), reason=str(exc))


def import_spool(store: Store, spool_dir: Union[str, os.PathLike[str]], limit: Optional[int] = None) -> SpoolImport:
    """Load every spooled verdict into ``store`` (oldest name first) and delete the files that loaded.
    A file that cannot be a verdict (not a regular file, not JSON, a list, a number SQLite cannot hold)
    is moved into ``<spool_dir>/quarantine/`` with the reason; a store that is busy or unwritable ends
    the import (StoreBusy) and leaves the rest for later, as does ``limit`` (files looked at per call)."""
    done = SpoolImport()
    folder = Path(spool_dir)
    if not folder.is_dir():
        return done
    for path in sorted(folder.glob("verdict-*.json"))[:limit]:
        try:
            _import_one(store, path)
        except StoreBusy:
            raise
        except Exception as exc:  # poison of any kind: set aside, go on with the next file
            reason = f"{type(exc).__name__}: {exc}"
            quarantine.quarantine(folder / quarantine.FOLDER, "spooled verdict", path.name, [path], reason)
            done.failed.append((path, reason))
            continue
        path.unlink()
        done.imported.append(path)
    return done


def _import_one(store: Store, path: Path) -> None:
    payload = json.loads(read_regular(path, MAX_SPOOLED_BYTES))
    if not isinstance(payload, dict) or payload.get("kind") != SPOOL_KIND:
        raise ValueError("not a spooled verdict")
    if not isinstance(payload.get("diagnosis"), dict):
        raise ValueError("its diagnosis is not a mapping")
    when = parse_iso(str(payload["verdict_time"]))
    if when is None:
        raise ValueError(f"bad verdict_time {payload['verdict_time']!r}")
    bundle = None
    if payload.get("bundle"):
        data = base64.b64decode(payload["bundle"])
        bundle = packing.PackedBundle(data=data, original_bytes=int(payload.get("bundle_original_bytes") or 0),
                                      files=packing.count_files(data),
                                      omitted=tuple(payload.get("bundle_omitted") or ()))
    store.record(payload["diagnosis"], when, bundle=bundle, gpus_per_node=payload.get("gpus_per_node"))

