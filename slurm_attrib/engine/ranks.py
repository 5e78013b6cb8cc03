"""Which rank printed an application log line: the srun, PyTorch and torchrun prefixes, and the
global rank they stand for."""

from __future__ import annotations

import re
from typing import Optional

from ..model import JobFacts
from ..timestamps import COLLECTED_HOST, QUOTE_MARKER, json_object

# srun --label "9: ", PyTorch "[rank9]:", torchrun "[default9]:" (local; with --role, the role's name instead of
# 'default': "--role $(hostname -s):" gives "[node-3:9]:"), Open MPI --tag-output
# "[jobid,9]<stderr>:" (the MPI rank: global; the SageMaker training toolkit rewrites it as
# "[1,mpirank:9,algo-2]<stderr>:", the host last), horovodrun's "[9]<stderr>:" (the rank; its stamp before it is
# a shipped stamp, below), and Ray's worker prefix "(WorkerDict pid=123, ip=10.0.0.5) "
# or "(raylet) ", colour codes around it included (a process, not a rank: no number is taken from it, but
# vLLM's "(VllmWorker rank=1 pid=788) " names its worker's rank);
# also in the prefilter's bytes
# A rank or task number is nine digits at most: a longer run is no prefix (and int() refuses one of 4,300 digits).
RANK_PREFIX_PATTERN = (r"\s*(?:\[rank(\d{1,9})\]: ?|\[(?:default|[A-Za-z][\w.-]{1,63}:(?=\d{1,4}\]:))(\d{1,9})\]: ?|"
                       r"(?:P\d{1,4} +)?(\d{1,9}): |"
                       r"\[(?:\d{1,20},)?(?:mpirank:)?(\d{1,9})(?:,[\w.-]{1,64})?\]<(?:stdout|stderr|stddiag)>: ?|"
                       r"(?:\x1b\[[\d;]*m)?\((?:[A-Za-z_][\w.:-]*(?: rank=(\d{1,9}))? pid=\d+|pid=\d+|raylet)"
                       r"(?:, ip=[\d.]+)?\)"
                       r"(?:\x1b\[[\d;]*m)? ?|"
                       r"\x1b\[[\d;]*m)")  # a colour code alone (rich, Ray, coloured loggers): no stream
_RANK_PREFIX = re.compile(RANK_PREFIX_PATTERN)
_COLOUR_ONLY = re.compile(r"\s*\x1b\[[\d;]*m")
# The RFC 3339 stamp a log shipper or the kubelet puts before each line it hands on (Loki exports,
# `kubectl logs --timestamps`, the watch connectors): UTC or an offset, up to nanoseconds, one blank.
# It comes before the line as the program wrote it, rank prefixes included; also in the prefilter's bytes.
# horovodrun writes the time it read the line before its rank prefix, in ctime's form and without a blank
# ("Mon Aug 26 18:41:15 2019[1]<stderr>:", horovod/runner/common/util/safe_shell_exec.py); only before such
# a prefix is it taken (the byte pattern, a superset, takes it anywhere the prefix may be).
# The CRI log format of containerd and CRI-O (the kubelet's files under /var/log/pods) writes the stream and a
# full/partial tag between that stamp and the line: "2021-08-12T14:03:41.000633417Z stderr F <line>".
# A log console's table copied as text puts the stamp in a column between bars (the CloudWatch Logs console:
# "  | 2024-08-23T22:22:51.873Z | <line>"): the bars are read past like the blank.
_RFC3339_SHIPPED = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})"
_CRI_STREAM = r"(?: (?:stdout|stderr) [FP])?"
_COLUMN_OPEN = r"(?: {0,4}\| )?"
_COLUMN_CLOSE = r"(?: \|)?"
_CTIME_SHIPPED = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}"
# a collector's local date and clock, to the minute or finer, before PyTorch's own rank prefix (' 2025-02-18
# 12:54 [rank13]:[E218 04:54:22.864467604 ProcessGroupNCCL.cpp:616] ...'): taken only before such a prefix, whose
# line then carries its own, finer stamp
_NAIVE_SHIPPED = r" ?\d{4}-\d{2}-\d{2} \d{2}:\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?"
_TORCH_RANK_NEXT = r"(?=\[(?:rank|default)\d+\]:)"
SHIPPED_STAMP_PATTERN = (f"(?:{_COLUMN_OPEN}{_RFC3339_SHIPPED}{_COLUMN_CLOSE}{_CRI_STREAM} |{_CTIME_SHIPPED}|"
                         f"{_NAIVE_SHIPPED} )")
_WEEKDAY_INITIALS = frozenset("MTWFS")
_SHIPPED_STAMP = re.compile(f"{_COLUMN_OPEN}(?P<at>{_RFC3339_SHIPPED}){_COLUMN_CLOSE}{_CRI_STREAM} |"
                            f"(?P<ctime>{_CTIME_SHIPPED})(?=\\[(?:\\d+,)?\\d+\\]<(?:stdout|stderr|stddiag)>)|"
                            f"(?P<naive>{_NAIVE_SHIPPED}) {_TORCH_RANK_NEXT}")
# Docker's json-file log driver (the files `docker logs` reads, and what some shippers export): one JSON object
# per line, the program's line in "log" with its newline, and the time the daemon read it,
# {"log":"[1,5]<stderr>:RuntimeError: ...\n","stream":"stderr","time":"2024-07-10T11:52:03.000074123Z"}; a
# shipper or script that re-serialises it may put blanks around the colon ('{"log": "...", ...}', Python's
# json.dumps). Also in the prefilter's bytes, where the object's opening stands before the line.
JSON_WRAPPER_PATTERN = r'\{[ \t]*"log"[ \t]*:[ \t]*"'
_JSON_WRAPPER = re.compile(JSON_WRAPPER_PATTERN)
_JSON_WRAPPED_MAX = 1 << 16  # a longer line is not unwrapped
# Ray's worker prefix names the node's address: "(RayTrainWorker pid=43515, ip=10.141.2.13) ..."
_RAY_ADDRESS = re.compile(r"\s*\((?:[A-Za-z_][\w.:-]*(?: rank=\d+)? )?pid=\d+, ip=(\d{1,3}(?:\.\d{1,3}){3})\)")
# The host pdsh or clush put before each line of a remote command ("worker-1: "; the DeepSpeed and Horovod
# launchers run ranks through them): before the rank prefix, after a shipper's stamp; a word is one only
# when it names a job node (extract decides), so "RuntimeError: " stays the message. Also in the prefilter's
# bytes, where any such word is let through.
COLLECTED_HOST_PATTERN = rf"({COLLECTED_HOST}): "
# a quoted line as mail and Markdown paste it ('> [rank3]: Traceback ...', '>> ' in a reply): presentation, not
# the program's; read past at the line's start like a shipper's stamp
QUOTE_PREFIX_PATTERN = QUOTE_MARKER
_QUOTE_PREFIX = re.compile(QUOTE_PREFIX_PATTERN)

# ProcessGroupNCCL's log prefix names the process group and the rank in it ("[PG 0 Rank 3] " in PyTorch 2.2
# and 2.3, "[PG ID 0 PG GUID 0(default_pg) Rank 3] " since createLogPrefix); only the default group's (id 0)
# rank is the global rank, a sub-group's is its own numbering.
_PG_RANK = re.compile(r"\[PG (?:ID )?0(?: PG GUID 0)?(?:\s*\(default_pg\))? Rank (\d{1,9})\]")

Stream = tuple[Optional[int], Optional[int], Optional[int]]  # (srun label, [rankN], torchrun local rank)
StreamKey = tuple[Optional[int], Optional[int]]  # (global rank or srun label, torchrun local rank)


def shipped_stamp(text: str) -> str:
    """The shipper's stamp at the start of ``text`` (without its blank), or ``""``; a Docker json-file
    line's ``time``."""
    if text[:1] == "{":
        wrapped = _json_wrapped(text)
        if wrapped is not None:
            return wrapped[0] or _shipped(wrapped[1])[0]
    return _shipped(text)[0]


def quote_end(text: str) -> int:
    """Where a line begins after a mail or Markdown quote marker at its start (0 without one)."""
    if text[:1] != ">":
        return 0
    match = _QUOTE_PREFIX.match(text)
    return match.end() if match else 0


def _shipped(text: str) -> tuple[str, int]:
    """The shipper's stamp at the start of ``text`` (after a quote marker) and where the line it carries begins."""
    quoted = quote_end(text)
    first = text[quoted:quoted + 1]
    match = _SHIPPED_STAMP.match(text, quoted) if first.isdecimal() or first in _WEEKDAY_INITIALS or first in " |" \
        else None
    return ((match.group("at") or match.group("ctime") or match.group("naive").lstrip()), match.end()) if match \
        else ("", quoted)


def _json_wrapped(text: str) -> Optional[tuple[str, str]]:
    """(time, line) of a Docker json-file object (:data:`JSON_WRAPPER_PATTERN`), or None for any other line."""
    entry = json_object(text, _JSON_WRAPPED_MAX) if _JSON_WRAPPER.match(text) else None
    line = entry.get("log") if entry is not None else None
    if entry is None or not isinstance(line, str):
        return None
    time = entry.get("time")
    return (time if isinstance(time, str) else ""), line.rstrip("\r\n")


_MPIRANK_HOST = re.compile(r"\[\d+,mpirank:\d+,([\w.-]{1,64})\]<(?:stdout|stderr|stddiag)>")


def prefix_host(text: str) -> Optional[str]:
    """The host the SageMaker training toolkit's rank prefix names ('[1,mpirank:5,algo-3]<stderr>:'), or None."""
    match = _MPIRANK_HOST.match(text, _shipped(text)[1])
    return match.group(1) if match else None


def prefix_address(text: str) -> Optional[str]:
    """The node address a Ray worker prefix names at the start of ``text`` (after a shipper's stamp), or None."""
    match = _RAY_ADDRESS.match(text, _shipped(text)[1])
    return match.group(1) if match else None


# An srun label, perhaps PyTorch's rank after it, and then no further prefix ('3536: node-443:40000:41000 [0] NCCL
# INFO ...', '3: [rank3]:[E1120 14:00:30.0 ProcessGroupNCCL.cpp:632] ...'): the most common lines of an srun --label
# log, read without the loop below when the prefix pattern finds nothing more where they end. Digits followed by a
# colon are no shipper's stamp ('2024-...'), so the loop would have read the same.
_LABEL_RANK = re.compile(r"(\d{1,9}): (?:\[rank(\d{1,9})\]: ?)?")


def split_rank(text: str) -> tuple[Optional[Stream], str]:
    """Strip a shipper's stamp (:data:`SHIPPED_STAMP_PATTERN`), then srun ``--label`` (``9: ``), PyTorch
    (``[rank9]:``), torchrun (``[default9]:``, a LOCAL rank) and Open MPI ``--tag-output``
    (``[1,9]<stderr>:``) prefixes, and Ray's worker prefix (``(WorkerDict pid=123, ip=...)``, no rank);
    return which stream the line belongs to (None without a prefix) and the rest, as the program wrote it."""
    common = _LABEL_RANK.match(text)
    if common is not None and _RANK_PREFIX.match(text, common.end()) is None:
        rank = common.group(2)
        return (int(common.group(1)), None if rank is None else int(rank), None), text[common.end():]
    return split_prefixes(text)


def split_prefixes(text: str) -> tuple[Optional[Stream], str]:
    """:func:`split_rank` without its shortcut for a bare srun label: every prefix, one at a time."""
    if text[:1] == "\ufeff":  # a byte-order mark opens a file's first line
        text = text[1:]
    if text[:1] == ">":
        text = text[quote_end(text):]
    if text[:1] == "{":
        wrapped = _json_wrapped(text)
        if wrapped is not None:
            text = wrapped[1]
    shipped, end = _shipped(text)
    if shipped:
        text = text[end:]
    label = rank = local = None
    found = pytorch = False
    while True:
        first = text[:1]  # a prefix opens with a blank, "[", "(", ESC, a digit or a het job's "P1 ": others skip it
        opens = first in ("[", "(", "\x1b") or first.isdecimal() or first.isspace() or (
            first == "P" and text[1:2].isdecimal())
        match = _RANK_PREFIX.match(text) if opens else None
        if not match:
            return ((label, rank, local) if found else None), text
        found = found or not _COLOUR_ONLY.fullmatch(match.group(0))  # a colour code alone names no stream
        named = next((g for g in (match.group(1), match.group(4), match.group(5)) if g is not None), None)
        if named is not None and rank is None:
            rank = int(named)
        elif match.group(1) is not None and local is None and pytorch:
            # '[rank3]:[rank11]: ...': torchrun's '--role rank' tee prefix (the LOCAL rank) around PyTorch's own
            local, rank = rank, int(match.group(1))
        elif match.group(2) is not None and local is None:
            local = int(match.group(2))
        elif match.group(3) is not None and label is None and not match.group(0).lstrip().startswith("P"):
            label = int(match.group(3))  # 'P1 3: ' (a het job's component 1, its task 3) names no rank of the map
        pytorch = pytorch or match.group(1) is not None
        text = text[match.end():]


# What a logging setup puts before a program's line (tried only when no rule read the line as it is): a time
# (ISO 8601 with or without brackets, ctime, moreutils ts's 'Apr 04 10:12:33'), then Python logging's fields
# ('- STDERR - ERROR - ', 'ERROR ', '[ERROR] ', 'ERROR:root:' without a time); vLLM's and SGLang's own formats
LOG_PREFIX_PATTERN = (
    r"(?:\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?: [A-Z]{2}\d{1,4})+\][ \t]*"  # SGLang's '[2025-01-29 08:52:43 TP5] '
    r"|(?:\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?:Z|[+-]\d{2}(?::?\d{2})?)?\]?"
    r"|[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]?\d \d{2}:\d{2}:\d{2}(?: [A-Z]{3,4})? \d{4}"
    r"|[A-Z][a-z]{2} [ \d]?\d \d{2}:\d{2}:\d{2})[ \t]*(?:[-|:][ \t]*)?"
    r"(?:[\w.<>]{1,40}[ \t]*[-|][ \t]*)?"
    r"(?:\[?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\]?[ \t]*(?:[-|:][ \t]*)?)?"
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.]{1,60}:"
    # vLLM's logger: 'ERROR 06-27 17:14:23 [multiproc_executor.py:522] '
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{1,6})? \[[\w./-]{1,80}:\d{1,6}\]"
    r"[ \t]*)")
_LOG_PREFIX = re.compile(LOG_PREFIX_PATTERN)


def after_log_prefix(text: str) -> Optional[str]:
    """The program's own line after a logging prefix (:data:`_LOG_PREFIX`), or None without one: a line like
    '2023-10-12 17:31:02,118 - STDERR - ERROR - TypeError: ...' is read as 'TypeError: ...' by the rules that
    anchor at the start of the program's line."""
    first = text[:1]
    if not (first.isdecimal() or first in "[ADEFIJMNOSTW"):
        return None
    match = _LOG_PREFIX.match(text)
    return text[match.end():] if match is not None and match.end() < len(text) else None


def pg_rank(text: str) -> Optional[int]:
    """The global rank a ProcessGroupNCCL message names in its default process group's prefix, or None."""
    match = _PG_RANK.search(text) if "Rank " in text else None
    return int(match.group(1)) if match else None


def stream_key(stream: Optional[Stream]) -> Optional[StreamKey]:
    """Which rank's output a line is, whatever mix of prefixes carries it: ``9: [rank9]:`` and ``9: ``
    are the same stream."""
    if stream is None:
        return None
    label, rank, local = stream
    return (rank if rank is not None else label, local)


def global_rank(stream: Optional[Stream], node: Optional[str], job: JobFacts) -> tuple[Optional[int], Optional[int]]:
    """(global rank, local rank) of a stream: ``[rankN]`` is global; a torchrun ``[defaultN]`` is local
    to its node (global through the node's sorted ranks); a bare srun label is the task = the rank."""
    if stream is None:
        return None, None
    label, rank, local = stream
    if rank is not None:
        return rank, local
    if local is not None:
        node_ranks = job.node_ranks(node) if node else []
        return (node_ranks[local] if local < len(node_ranks) else None), local
    return label, None
