"""Whose fault a file-system errno is: the file system's (EIO, ESTALE, EROFS) or the job's (a full disk
or quota, ENOSPC / EDQUOT, and short writes that come from them)."""

from __future__ import annotations

import bisect
import re
from typing import Any, Optional

from ...model import Symptom
from ...scan import Line
from ..context import EngineContext
from ..registry import decoder

# TensorFlow's 'Resource exhausted: <path>' is its status for a file call's ENOSPC or EDQUOT (or too many open files)
_JOB_FILLED = ("No space left on device", "Disk quota exceeded", "PytorchStreamWriter", "unexpected pos", "File ",
               "Resource exhausted", "ResourceExhaustedError")


_SHARED_MEMORY = ("SemLock", "multiprocessing", "/dev/shm", "torch_shm", "shared memory", "</torch_")


_ERRNO = re.compile(r"\[Errno (\d+)\]")
_ERRNO_TEXT = {5: "Input/output error", 28: "No space left on device", 30: "Read-only file system",
               70: "Communication error on send", 121: "Remote I/O error",
               108: "Cannot send after transport endpoint shutdown", 116: "Stale file handle",
               122: "Disk quota exceeded"}
_SHUTDOWN = "Cannot send after transport endpoint shutdown"
# Go's lowercase strerror and musl's own texts, read as glibc's (the rule's regex admits musl's only after a path)
_OTHER_LIBC = {"input/output error": "Input/output error", "no space left on device": "No space left on device",
               "disk quota exceeded": "Disk quota exceeded", "read-only file system": "Read-only file system",
               "stale nfs file handle": "Stale NFS file handle", "i/o error": "Input/output error",
               "quota exceeded": "Disk quota exceeded", "socket not connected": "Transport endpoint is not connected"}
# what says an ESHUTDOWN was a file's: a path in the line, or a file read/write in the frames above it
_FILE_CONTEXT = re.compile(r"'/|cannot (?:access|open|stat|create|remove|read) |"
                           r"\bread_bytes|\bread_text|\bwrite_bytes|\bwrite_text|\bf\.read\(|\bf\.write\(|"
                           r"\bopen\(|shutil|\bos\.(?:read|write|stat|listdir)|torch\.load|torch\.save|np\.load|h5py")
_SOCKET_CONTEXT = re.compile(r"socket|ssl\.py|\bsendall\b|\bsend\(|\brecv|http|urllib|requests|asyncio|"
                             r"multiprocessing/connection")


@decoder("storage_errno")
def decode_storage_errno(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """ENOSPC raised while creating a semaphore or a shared-memory segment (the frames just above name
    multiprocessing or /dev/shm) is /dev/shm filling up: host memory, not a file system."""
    error = str(sym.fields.get("error", ""))
    numbered = _ERRNO.match(error)
    if numbered:  # Python's '[Errno N] <strerror in the node's language>': the number says which
        error = sym.fields["error"] = _ERRNO_TEXT.get(int(numbered.group(1)), error)
    canonical = _OTHER_LIBC.get(error.rsplit(": ", 1)[-1].lower()) if error[:1].islower() or ": " in error else None
    if canonical is not None:
        error = sym.fields["error"] = canonical
    if error == _SHUTDOWN:
        context = " ".join([extra["text"], *line.preceding(6)])
        if _SOCKET_CONTEXT.search(context) or not _FILE_CONTEXT.search(context):
            return False  # a socket's ESHUTDOWN, or nothing to say it was a file's
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


@decoder("dataloader_exit")
def decode_dataloader_exit(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """A worker that exited with a status of its own raised or exited in the dataset's code: the workload's code,
    not its memory."""
    if "exit_code" in sym.fields:
        sym.category = "application"
        sym.summary = f"a dataloader worker exited with code {sym.fields['exit_code']}"
        sym.actions = ("rerun with num_workers=0 to see the error the worker's code raised",)
    return True


# NCCL's shared-memory segment: the errno that failed it, on its own line since 2.19 (', error: <text> (N)') and
# before that on the WARN just above from the same process and thread ('host:pid:tid [0] include/shm.h:27 NCCL
# WARN Call to shm_open failed : Permission denied')
_SHM_SEGMENT = "Error while creating shared memory segment"
_SHM_CALL = re.compile(r"Call to (?:shm_open|posix_fallocate|ftruncate|mmap|fallocate) failed ?: ([^\n]{1,120})")
_SHM_REFUSED = ("Permission denied", "Operation not permitted")
_NCCL_THREAD = re.compile(r"(\S{1,200}:\d{1,9}:\d{1,9}) \[")


@decoder("shm_errno")
def decode_shm_errno(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """NCCL failing to create its /dev/shm segment is /dev/shm full only when its errno says so (or says nothing):
    a segment the node's /dev/shm refuses (EACCES, EPERM: its mode, a mount without the sticky world-writable
    bit) is the node's setup; any other errno is no exhaustion and decides nothing."""
    text = extra["text"]
    if sym.fields.get("host"):  # srun's 'task N: Bus error': a task's SIGBUS, which may be no DataLoader's
        sym.actions = ("read the task's output before the signal: a DataLoader or a shared-memory segment needs a "
                       "larger /dev/shm; a memory-mapped file truncated under it, or the job's memory limit, is "
                       "the host's memory",)
    if _SHM_SEGMENT not in text:
        return True
    why = text.split(", error: ", 1)[1] if ", error: " in text else _errno_above(line, text)
    if why is None or why.startswith("No space left on device"):
        return True
    if why.startswith(_SHM_REFUSED):
        # the job's output alone says so (a user can print it): a kind of its own, which yields to a fault the
        # node's kernel logged (final.root_cause params.printable_kinds)
        sym.kind, sym.category, sym.responsible, sym.strength = "shm_refused", "node_failure", "infrastructure", 50
        sym.summary = f"the node's /dev/shm refused NCCL's shared-memory segment: {why.strip()}"[:300]
        sym.actions = ("give /dev/shm on the node mode 1777 (a tmpfs mounted world-writable with the sticky bit) and "
                       "check what changed it (a prolog, a container runtime's mount)",)
    else:
        sym.role, sym.category, sym.responsible, sym.strength = "context", "unknown", "unknown", 0
    sym.fields["errno_text"] = why.strip()[:120]
    return True


def _errno_above(line: Line, text: str) -> Optional[str]:
    """The errno of older NCCL's 'Call to <syscall> failed : <text>' just above, from the same process and thread."""
    thread = _NCCL_THREAD.search(text)
    if thread is None:
        return None
    for before in line.preceding(4):
        same = _NCCL_THREAD.search(before)
        if same is not None and same.group(1) == thread.group(1) and (call := _SHM_CALL.search(before)):
            return call.group(1)
    return None


@decoder("nfs_recovered")
def decode_nfs_recovered(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """'nfs: server X not responding' with 'nfs: server X OK' after it in the same block of the log: the
    server came back, a hiccup the job rode out, so context rather than a candidate."""
    server = sym.fields.get("server")
    if sym.role == "candidate" and isinstance(server, str) and server and _came_back(line, server, extra["memo"]):
        sym.role, sym.strength = "context", 0
        sym.notes.append(f"nfs server {server} came back later (server {server} OK)")
    return True


def _came_back(line: Line, server: str, memo: dict[str, Any]) -> bool:
    """Whether 'server X OK' ends a line (or a journal record's MESSAGE) after this one in its block.
    Where each server's recovery lines start is found once per block (kept in the file's decoder memo), so a log
    with thousands of "not responding" lines costs one search of each block per server, not one per line."""
    block, starts = memo.get("nfs_recoveries", (None, {}))
    if block is not line.buffer:
        block, starts = line.buffer, {}
        memo["nfs_recoveries"] = (block, starts)
    found: Optional[list[int]] = starts.get(server)
    if found is None:
        name = re.escape(server.encode("utf-8", "surrogateescape"))
        pattern = re.compile(rb"server " + name + rb" OK(?:[ \t]*\r?$|\")", re.MULTILINE)
        found = starts[server] = [m.start() for m in pattern.finditer(block)]
    return bisect.bisect_right(found, line.end) < len(found)


_NO_LOCKING = (38, 95, 524)  # ENOSYS, EOPNOTSUPP, the kernel's ENOTSUPP: the file system does not lock
_HELD = (11,)  # EAGAIN / EWOULDBLOCK: a lock someone else holds


# what says Python's ENOLCK / ENOSYS / EOPNOTSUPP came from locking a file
_LOCK_CONTEXT = re.compile(r"fcntl\.(?:flock|lockf)|\bflock\(|\blockf\(|filelock|FileLock|portalocker|_acquire")
# the strerror texts a program prints instead of the number (TensorStore's '[OS error: ...]')
_ERRNO_BY_TEXT = {"function not implemented": 38, "operation not supported": 95, "not supported": 95,
                  "resource temporarily unavailable": 11, "no locks available": 37}


@decoder("storage_lock")
def decode_storage_lock(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """Which side a refused lock is on, by its errno (ROMIO prints it in hex): a file system without
    locking is the shared service's setting (storage, nobody blamed); a lock another process holds is the
    workload's; any other errno keeps the file system as the candidate."""
    if str(sym.fields.get("errno3") or "37") != "37" \
            and not _LOCK_CONTEXT.search(" ".join([extra["text"], *line.preceding(6)])):
        return False  # ENOSYS / EOPNOTSUPP come from any call: only a lock call above makes it a lock's (ENOLCK
        # comes from locking alone)
    hexerrno = sym.fields.get("hexerrno")
    errno = sym.fields.get("errno") or sym.fields.get("errno3") or sym.fields.get("errno2") or _ERRNO_BY_TEXT.get(
        str(sym.fields.get("os_error", "")).strip().lower())
    try:
        number = int(str(hexerrno), 16) if hexerrno else int(str(errno)) if errno else 38
    except ValueError:
        return True
    sym.fields["errno_number"] = number
    if number in _HELD:
        sym.category, sym.responsible = "application", "workload"
        sym.summary = f"another process holds the file's lock on rank {'?' if sym.rank is None else sym.rank}"
        sym.actions = ("make one rank or job write each file (or open it read-only); set "
                       "HDF5_USE_FILE_LOCKING=FALSE only where no two writers share a file",)
    elif number not in _NO_LOCKING:
        sym.responsible = "infrastructure"
    return True

