"""The verdict as an AdminComment segment: short, versioned, lower-case, quote-free and ``|``-free
(Slurm 22.05's sacctmgr lower-cases the value, every version turns quotes into backticks, and ``|``
breaks ``sacct --parsable2``). Other tools' text in AdminComment is kept; only our own prefixed
segment is replaced.

Example: ``slurm-attrib/v1:st=attributed,cat=gpu_hardware,node=node-02,gpu=0000:3b:00,root=xid-79,id=3f2a``
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Optional

from ..slurm.records import AcctRecord

PREFIX = "slurm-attrib/v1:"
SEPARATOR = "; "
_OURS = re.compile(r"slurm-attrib/v\d+:[^;\s]*", re.IGNORECASE)
_UNSAFE = re.compile(r"[^a-z0-9._:/=,+-]")
MAX_NODES = 4


def _clean(value: object) -> str:
    return _UNSAFE.sub("-", str(value).lower()).strip("-")[:64]


def root_kind(diag: dict[str, Any]) -> str:
    """'xid-79', 'nccl_error', ... from the root symptom (kind plus an Xid code when there is one)."""
    root = diag.get("root_cause") or {}
    kind = str(root.get("kind") or "")
    code = (root.get("fields") or {}).get("code")
    return f"{kind}-{code}" if kind and code not in (None, "") else kind


def verdict_segment(diag: dict[str, Any], verdict_id: str) -> str:
    """Our segment for a Diagnosis (its canonical dict) and the store's verdict id."""
    parts = [("st", diag.get("status")), ("cat", diag.get("category"))]
    nodes = list(diag.get("culprit_nodes") or [])
    if nodes:
        shown = "+".join(nodes[:MAX_NODES]) + (f"+{len(nodes) - MAX_NODES}more" if len(nodes) > MAX_NODES else "")
        parts.append(("node", shown))
    gpu = (diag.get("root_cause") or {}).get("gpu")
    if gpu:
        parts.append(("gpu", gpu))
    kind = root_kind(diag)
    if kind:
        parts.append(("root", kind))
    parts.append(("id", verdict_id))
    return PREFIX + ",".join(f"{k}={_clean(v)}" for k, v in parts if v not in (None, ""))


def merge(existing: Optional[str], segment: str) -> str:
    """``existing`` AdminComment with our old segment(s) replaced by ``segment``; others' text kept as is."""
    text = existing or ""
    found = _OURS.search(text)
    while found:
        before, after = text[: found.start()], text[found.end():]
        if before.strip():
            before = re.sub(r"\s*;\s*$", "", before)
        else:
            after = re.sub(r"^\s*;\s*", "", after)
        text = before + after
        found = _OURS.search(text)
    text = text.strip()
    return f"{text}{SEPARATOR}{segment}" if text else segment


def ours(admin_comment: str) -> Optional[str]:
    """Our segment inside an AdminComment, or None."""
    found = _OURS.search(admin_comment or "")
    return found.group(0) if found else None


def job_ref(job_id: str, array_job_id: str, array_task_id: str) -> str:
    """The id sacctmgr must be given: ``<array>_<task>`` for an array task (``where jobid=<array>`` would
    hit every task of the array), else the raw job id. Ids that are not plain numbers are not used (the
    backend refuses them anyway; :func:`safe_ref` then settles a raw id that is also an array's)."""
    if array_job_id.isdigit() and array_task_id.isdigit() and (array_job_id + array_task_id).isascii():
        return f"{array_job_id}_{array_task_id}"
    return job_id


def safe_ref(ref: str, job_id: str, rows: Sequence[AcctRecord]) -> Optional[str]:
    """``ref`` checked against sacct's ``rows`` before sacctmgr gets it. ``<array>_<task>`` is kept. A bare
    id that is also an array's id (the last task's raw id equals the array id) would make sacctmgr modify
    every task of the array: it becomes ``<array>_<task>`` from this job's own record (raw id ``job_id``),
    or None (do not write yet) while sacct does not show that record as an array task."""
    if "_" in ref:
        return ref
    allocations = [r for r in rows if not r.is_step]
    if not any(r.array_ids[0] == ref or r.job_id.startswith(f"{ref}_") for r in allocations):
        return ref
    own = next((r for r in allocations if r.job_id_raw == job_id and r.array_ids[0]), None)
    return f"{own.array_ids[0]}_{own.array_ids[1]}" if own is not None else None
