"""The grammar of a ``scontrol --oneliner show job`` record, read so that user text cannot forge a field.

scontrol prints ``Key=value`` pairs separated by spaces, and does not quote values: a job name, a
``--chdir`` or a comment holding `` JobState=PENDING`` prints exactly like the real field, and a newline
in a name splits the line. What makes the record readable anyway is that Slurm prints its keys in one
fixed order (``slurm_sprint_job_info()`` in src/api/job_info.c up to 23.02, ``_sprint_job_info()`` in
src/scontrol/info_job.c after; the same order 22.05 → 25.11, keys only added), that only the keys in
:data:`FREE_TEXT` can hold spaces, and that the keys in :data:`REQUIRED` are in every record.

A reading picks, from the ``Key=`` markers in the text, the ones that are fields: their keys in
:data:`JOB_KEYS` order, no required key skipped, and every other marker inside the value of a
free-text field. The real reading is always one of them. When a key the finalizer decides on
(:data:`PROTECTED`) is at the same place in every reading, that is the real field, whatever the user
wrote; when it could be at two places (a user copied a whole run of fields into a name), the record is
refused (:class:`SlurmParseError`) rather than guessed. Free-text values are read with the shortest
spans (the natural reading); they are exactly as trustworthy as the user who wrote them.
"""

from __future__ import annotations

import bisect
import re
from typing import NamedTuple

from .errors import SlurmParseError

JOB_KEYS = (
    "JobId", "ArrayJobId", "ArrayTaskId", "ArrayTaskThrottle", "HetJobId", "HetJobOffset", "JobName", "SLUID",
    "HetJobIdSet", "UserId", "GroupId", "MCS_label", "Priority", "Nice", "Account", "QOS", "WCKey", "JobState",
    "Reason", "FailedNode", "Dependency", "Requeue", "Restarts", "BatchFlag", "Reboot", "ExitCode",
    "DerivedExitCode", "RunTime", "TimeLimit", "TimeMin", "SubmitTime", "EligibleTime", "AccrueTime",
    "ResizeTime", "StartTime", "EndTime", "Deadline", "CronJob", "CrontabSpec", "PreemptEligibleTime",
    "PreemptTime", "SuspendTime", "SecsPreSuspend", "LastSchedEval", "Scheduler", "Partition", "AllocNode:Sid",
    "ReqNodeList", "ExcNodeList", "NodeList", "SchedNodeList", "BatchFeatures", "BatchHost", "StepMgrEnabled",
    "FedOrigin", "FedViableSiblings", "FedActiveSiblings", "NumNodes", "NumCPUs", "NumTasks", "CPUs/Task",
    "ReqB:S:C:T", "TRES", "ReqTRES", "AllocTRES", "Socks/Node", "NtasksPerN:B:S:C", "CoreSpec", "ThreadSpec",
    "JOB_GRES", "Nodes", "CPU_IDs", "Mem", "GRES", "MinCPUsNode", "MinMemoryNode", "MinMemoryCPU",
    "MinTmpDiskNode", "Features", "DelayBoot", "ClusterFeatures", "Prefer", "Reservation", "OverSubscribe",
    "Contiguous", "Licenses", "LicensesAlloc", "Network", "Command", "SubmitLine", "WorkDir", "AdminComment",
    "SystemComment", "Comment", "Extra", "StdErr", "StdIn", "StdOut", "SegmentSize", "SpreadSegments",
    "ConsolidateSegments", "Switches", "BurstBuffer", "BurstBufferState", "Power", "GresAllowTaskSharing",
    "GresEnforceBind", "GresOneTaskPerSharing", "KillOInInvalidDependent", "KillOnInvalidDependent", "SpreadJob",
    "ExpeditedRequeue", "OOMKillStep", "CpusPerTres", "MemPerTres", "TresBind", "TresFreq", "TresPerJob",
    "TresPerNode", "TresPerSocket", "TresPerTask", "MailUser", "MailType", "NtasksPerTRES", "Container",
    "ContainerID", "SELinuxContext", "ResvPorts",
)
# Values Slurm takes from the submitter (or an admin, or a job_submit plugin) without a grammar that
# excludes spaces: a name, paths, comments, free-form strings. Only these may contain ' Key='.
FREE_TEXT = frozenset({
    "JobName", "WCKey", "CrontabSpec", "BatchFeatures", "Features", "ClusterFeatures", "Prefer", "Network",
    "Command", "SubmitLine", "WorkDir", "AdminComment", "SystemComment", "Comment", "Extra", "StdErr", "StdIn",
    "StdOut", "BurstBuffer", "MailUser", "Container", "ContainerID", "SELinuxContext",
})
# Printed in every job record by every version (22.05 → 25.11).
REQUIRED = ("JobId", "JobName", "UserId", "JobState", "Restarts", "ExitCode", "StartTime", "EndTime", "Partition",
            "NodeList")
# What the finalizer decides on: each must have exactly one reading or the record is refused.
PROTECTED = frozenset({"JobId", "ArrayJobId", "ArrayTaskId", "HetJobId", "HetJobOffset", "UserId", "JobState",
                       "Reason", "Restarts", "ExitCode", "DerivedExitCode", "StartTime", "EndTime", "Partition",
                       "NodeList", "BatchHost"})
assert not PROTECTED & FREE_TEXT and set(REQUIRED) <= set(JOB_KEYS)

MAX_MARKERS = 2000  # a real record has ~80; the reading is quadratic in this (2000: 0.3 s)
_RANK = {key: rank for rank, key in enumerate(JOB_KEYS)}
_REQUIRED_RANKS = sorted(_RANK[key] for key in REQUIRED)
_MARKER = re.compile(r"(?:(?<=\s)|\A)([A-Za-z][A-Za-z0-9_:/.-]*)=")
_RECORD_START = re.compile(r"(?:\A|(?<=\n))JobId=")


class _Marker(NamedTuple):
    key: str
    start: int  # where the key begins
    value: int  # where its value begins
    rank: int  # place in JOB_KEYS; -1 for a key we do not know (a newer version's)


def split_records(text: str) -> list[str]:
    """The records of ``scontrol -o show job`` output: each begins with ``JobId=`` at the start of a line.
    A newline plus ``JobId=`` inside a user's field starts a false record here; the real record it cut
    short then lacks required keys and :func:`read_record` refuses it."""
    starts = [m.start() for m in _RECORD_START.finditer(text)]
    return [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)])]


def read_record(record: str) -> dict[str, str]:
    """One record's fields (see the module's note); :class:`SlurmParseError` when it is not a record
    Slurm prints or a protected field has more than one reading."""
    markers = [_Marker(m.group(1), m.start(), m.end(), _RANK.get(m.group(1), -1)) for m in _MARKER.finditer(record)]
    if not markers or markers[0].key != "JobId" or markers[0].start != 0:
        raise SlurmParseError(f"not a scontrol job record: {record[:80]!r}")
    if len(markers) > MAX_MARKERS:
        raise SlurmParseError(f"{_label(record, markers)}: {len(markers)} 'Key=' markers, more than "
                              f"{MAX_MARKERS}: record not read")
    reach = _forward(markers)
    live = _backward(markers, reach)
    if (0, 0) not in live:
        raise SlurmParseError(f"{_label(record, markers)}: not a job record Slurm prints (keys out of order "
                              "or missing)")
    path = _shortest_reading(markers, live)
    _check_protected(record, markers, live, path)
    return {markers[i].key: _value(record, markers, path, n) for n, i in enumerate(path)}


def _skips_required(low: int, high: int) -> bool:
    """Whether a required key's rank lies strictly between two chosen keys' ranks."""
    at = bisect.bisect_right(_REQUIRED_RANKS, low)
    return at < len(_REQUIRED_RANKS) and _REQUIRED_RANKS[at] < high


def _can_end(rank: int) -> bool:
    return _REQUIRED_RANKS[-1] <= rank


def _successors(markers: list[_Marker], i: int, rank: int) -> list[tuple[int, int]]:
    """(marker, rank after it) that may follow marker ``i`` chosen at ``rank``: after a free-text field
    any later known key in order (the markers between are its text); after any other, the next marker."""
    if markers[i].key in FREE_TEXT:
        return [(j, m.rank) for j, m in enumerate(markers[i + 1:], start=i + 1)
                if m.rank > rank and not _skips_required(rank, m.rank)]
    if i + 1 == len(markers):
        return []
    nxt = markers[i + 1]
    if nxt.rank < 0:
        return [(i + 1, rank)]
    return [(i + 1, nxt.rank)] if nxt.rank > rank and not _skips_required(rank, nxt.rank) else []


def _ends_here(markers: list[_Marker], i: int, rank: int) -> bool:
    """Marker ``i`` can be the record's last field: nothing required is left, and what follows it is
    its value (only a free-text value may hold more markers)."""
    return _can_end(rank) and (i + 1 == len(markers) or markers[i].key in FREE_TEXT)


def _forward(markers: list[_Marker]) -> list[set[int]]:
    reach: list[set[int]] = [set() for _ in markers]
    reach[0].add(0)
    for i in range(len(markers)):
        for rank in reach[i]:
            for j, after in _successors(markers, i, rank):
                reach[j].add(after)
    return reach


def _backward(markers: list[_Marker], reach: list[set[int]]) -> set[tuple[int, int]]:
    """The (marker, rank) states on some complete reading."""
    finishes: set[tuple[int, int]] = set()
    for i in range(len(markers) - 1, -1, -1):
        for rank in reach[i]:
            if _ends_here(markers, i, rank) or any(s in finishes for s in _successors(markers, i, rank)):
                finishes.add((i, rank))
    return finishes


def _shortest_reading(markers: list[_Marker], live: set[tuple[int, int]]) -> list[int]:
    """The reading that takes the earliest next field at every step (free-text values as short as they
    can be). Every live state either ends a reading or has a live successor."""
    path, state = [0], (0, 0)
    while True:
        nxt = next((s for s in _successors(markers, *state) if s in live), None)
        if nxt is None:
            return path
        path.append(nxt[0])
        state = nxt


def _check_protected(record: str, markers: list[_Marker], live: set[tuple[int, int]], path: list[int]) -> None:
    places: dict[str, set[int]] = {}
    for i, _ in live:
        if markers[i].key in PROTECTED:
            places.setdefault(markers[i].key, set()).add(i)
    chosen = {markers[i].key: i for i in path}
    for key, where in places.items():
        if len(where) > 1 or chosen.get(key) not in where:
            raise SlurmParseError(f"{_label(record, markers)}: {key}= can be read at {len(where)} places: a "
                                  "user-controlled field holds a copy of Slurm's fields; record not used")


def _value(record: str, markers: list[_Marker], path: list[int], n: int) -> str:
    end = markers[path[n + 1]].start if n + 1 < len(path) else len(record)
    return record[markers[path[n]].value:end].strip()


def _label(record: str, markers: list[_Marker]) -> str:
    first = record[markers[0].value:markers[1].start if len(markers) > 1 else len(record)].strip()
    return f"scontrol record JobId={first[:20]!r}"
