"""Whose fault a file-system errno is: the file system's (EIO, ESTALE, EROFS) or the job's (a full disk
or quota, ENOSPC / EDQUOT, and short writes that come from them)."""

from __future__ import annotations

from typing import Any

from ...model import Symptom
from ...ruleset import Rule
from ...scan import Line
from ..context import EngineContext
from ..registry import decoder, rule

_JOB_FILLED = ("No space left on device", "Disk quota exceeded", "PytorchStreamWriter", "unexpected pos", "File ")


_SHARED_MEMORY = ("SemLock", "multiprocessing", "/dev/shm", "torch_shm", "shared memory", "</torch_")


@decoder("storage_errno")
def decode_storage_errno(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """ENOSPC raised while creating a semaphore or a shared-memory segment (the frames just above name
    multiprocessing or /dev/shm) is /dev/shm filling up: host memory, not a file system."""
    error = str(sym.fields.get("error", ""))
    if error == "No space left on device" and any(word in text for text in line.preceding(5)
                                                   for word in _SHARED_MEMORY):
        sym.kind, sym.category, sym.responsible = "shm_exhausted", "host_oom", "workload"
        sym.summary = "shared memory (/dev/shm) exhausted: No space left on device"
        sym.actions = ("give the job a larger /dev/shm or use fewer DataLoader workers",)
        return True
    if error.startswith(_JOB_FILLED):
        sym.responsible = "workload"
        sym.actions = ("free space or raise the quota of the file system the job writes to (checkpoints, caches)",)
    return True


@decoder("dataloader_signal")
def decode_dataloader_signal(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """SIGKILL and SIGBUS are host memory (OOM killer, /dev/shm); any other signal is the code's own crash."""
    signal = str(sym.fields.get("signal", ""))
    if signal not in ("Killed", "Bus error"):
        sym.category, sym.strength = "application", 50
        sym.actions = ("debug the crash in the DataLoader worker (run with num_workers=0 to see it)",)
    return True


@decoder("nfs_recovered")
def decode_nfs_recovered(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """'nfs: server X OK': the server came back; context that refine.nfs_recovered reads."""
    if sym.fields.get("back"):
        sym.kind, sym.role, sym.strength = "nfs_recovered", "context", 0
        sym.summary = f"nfs server {sym.fields.get('server', '?')} came back"
    return True


@rule("refine.nfs_recovered")
def nfs_recovered(ctx: EngineContext, rule_: Rule) -> int:
    """An NFS server that stopped answering and then came back ('server X OK' later on the same node): a
    hiccup the job rode out, context rather than a candidate."""
    back = [s for s in ctx.active() if s.kind == "nfs_recovered"]
    count = 0
    for sym in ctx.active():
        if sym.kind != "nfs_error" or sym.role != "candidate":
            continue
        if any(b.node == sym.node and b.fields.get("server") == sym.fields.get("server")
               and Symptom.sort_key(b) > Symptom.sort_key(sym) for b in back):
            sym.role, sym.strength = "context", 0
            sym.notes.append(f"nfs server {sym.fields.get('server')} came back later on {sym.node}")
            count += 1
    return count
