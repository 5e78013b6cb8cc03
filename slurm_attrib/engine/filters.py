"""Phase 2, filter: mark what cannot be causal. Nothing is deleted; a dropped symptom keeps the
reason, and the diagnosis can list it."""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Optional

from ..bundle import TRUSTED_KERNEL_ORIGINS, BundleFile
from ..errors import RuleError
from ..model import SOURCE_APP, SOURCE_KERNEL, Symptom, connector_of
from ..ruleset import Rule
from ..safeio import open_regular
from ..scan import EVIDENCE_READ_ERRORS, decode, gutter_cutter, open_evidence
from ..timestamps import TimeContext, format_utc, iso_offset, parse_line_time, zone_from_name
from .causal import CausalModel
from .context import EngineContext
from .params import str_list
from .ranks import quote_end, shipped_stamp, split_rank
from .registry import rule
from .timeinfer import latest_time, own_time, shift_time, time_context


def matches_when(when: dict[str, Any], sym: Symptom) -> bool:
    """The declarative condition of a ``when`` section against one symptom.

    Keys: ``kind``, ``role``, ``category``, ``source`` (lists or single values), ``fields``
    (field → value or list of values) and ``regex`` (field → regular expression, ``raw`` for the line).
    """
    return when_matcher(when)(sym)


_MATCHERS: dict[int, tuple[dict[str, Any], Callable[[Symptom], bool]]] = {}


def when_matcher(when: dict[str, Any]) -> Callable[[Symptom], bool]:
    """:func:`matches_when` for one ``when`` section, its lists and patterns read once: a filter rule asks
    it of every symptom (21,000 in a loud cascade). Kept per section object (a rule's, loaded once)."""
    found = _MATCHERS.get(id(when))
    if found is not None and found[0] is when:
        return found[1]
    wanted = [(key, tuple(_as_list(when[key]))) for key in ("kind", "role", "category") if key in when]
    sources = tuple(_as_list(when["source"])) if "source" in when else None
    fields = [(name, tuple(_as_list(value))) for name, value in (when.get("fields") or {}).items()]
    patterns = [(name, re.compile(str(pattern))) for name, pattern in (when.get("regex") or {}).items()]

    def matcher(sym: Symptom) -> bool:
        for key, values in wanted:
            if getattr(sym, key) not in values:
                return False
        if sources is not None and (not sym.evidence or sym.evidence[0].source not in sources):
            return False
        for name, values in fields:
            if sym.fields.get(name) not in values:
                return False
        for name, pattern in patterns:
            value = sym.evidence[0].raw if name == "raw" and sym.evidence else sym.fields.get(name)
            if not isinstance(value, str) or not pattern.search(value):
                return False
        return True

    if len(_MATCHERS) >= 1024:  # rulesets reloaded again and again (a long-lived service): start afresh
        _MATCHERS.clear()
    _MATCHERS[id(when)] = (when, matcher)
    return matcher


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def run_declarative_filter(ctx: EngineContext, rule_: Rule) -> int:
    """A YAML filter rule: drop every active symptom matching ``when``, with ``reason``."""
    reason = str(rule_.raw.get("reason", rule_.title))
    matches = when_matcher(rule_.raw["when"])
    count = 0
    for sym in ctx.active():
        if matches(sym):
            sym.dropped = f"{reason} ({rule_.id})"
            count += 1
    return count


@rule("filter.outside_job_window")
def outside_window(ctx: EngineContext, rule_: Rule) -> int:
    """Drop what lies outside the job window, and say so: how many symptoms of each source, under which
    zone assumption; an infrastructure fault within ``params.near_s`` of the window is marked
    ``near_window`` so that FINAL can weigh it (ambiguous, never silently unattributed). A kernel line
    whose stamp no format reads (``unread_stamp``) cannot be placed at all: dropped too, and counted."""
    dropped: Counter[str] = Counter()
    near = timedelta(seconds=float(rule_.params.get("near_s", 600)))
    skews = ctx.bundle.clock_skews
    for node, skew in sorted(skews.items()):
        ctx.notes.append(f"{node}'s clock was {-skew:g} s behind the controller's at its Epilog (collection.yaml): "
                         "its lines were placed in the job window with that correction")
    kernel_rezoned = _rezoned_kernel_lines(ctx)
    for node, zone_name in kernel_rezoned:
        ctx.notes.append(f"{node}: its kernel lines without a zone were read at {zone_name}, the offset its other "
                         "kernel lines carry (no zone in its facts)")
    rezoned = _rezoned_application_logs(ctx)
    if rezoned or kernel_rezoned:
        ctx.order()  # their times moved: active() hands the symptoms on in time order
    for rel, zone_name in rezoned:
        ctx.app_zones[rel] = zone_name
        why = ("as UTC (a container's clock)" if zone_name == "UTC"
               else f"at {zone_name} (the offset its nodes' kernel lines carry)")
        ctx.notes.append(f"{rel}: its stamps carry no zone and fall outside the job window in its node's zone but "
                         f"inside it {why}: read so")
    unread = 0
    for sym in ctx.active():
        if sym.kind == "job_state":
            continue
        when = sym.time  # on the controller's clock: extraction corrected any recorded skew
        if when is None and sym.fields.get("unread_stamp") and ctx.window_start is not None:
            # its line has a time the engine cannot read: it may lie days before the job, so it decides nothing
            sym.dropped = "its time stamp could not be read, so it cannot be placed in the job window"
            unread += 1
            continue
        if ctx.in_window(when) is False and not _may_be_inside(ctx, sym, when):
            assert sym.time is not None
            sym.dropped = (f"outside the job window ({format_utc(sym.time)} vs {ctx.window_source} "
                           f"window with {ctx.settings.window_before_s:g}s/{ctx.settings.window_after_s:g}s "
                           "tolerance)")
            dropped[sym.evidence[0].source if sym.evidence else "other"] += 1
            assert when is not None
            if sym.role == "candidate" and sym.responsible == "infrastructure" and (
                    ctx.beyond_window(when) <= near or "clock_in_doubt" in sym.fields):
                sym.fields["near_window"] = True  # a clock said to be off may put it inside: ambiguous, not dropped
    if unread:
        ctx.notes.append(f"{unread} kernel symptom(s) with a time stamp in a form the engine cannot read were not "
                         "used: they cannot be placed in the job window")
    if dropped:
        zones = sorted(a for a in ctx.assumptions if a.startswith("zone "))
        counts = ", ".join(f"{n} {source}" for source, n in sorted(dropped.items()))
        ctx.notes.append(f"{counts} symptom(s) fell outside the job window"
                         + (f"; {'; '.join(zones)}" if zones else ""))
    return sum(dropped.values()) + unread + len(rezoned)


# slurmstepd's words that it ended a job ('*** JOB 3884617 ON node023 CANCELLED AT ... ***'): in an output file
# opened for appending (--open-mode=append, a fixed --output name), they close an earlier job's output
_JOB_ENDING_KINDS = frozenset({"slurm_time_limit", "slurm_cancelled", "slurm_preempted", "slurm_requeued",
                               "srun_node_failure"})


@rule("filter.other_jobs_output")
def other_jobs_output(ctx: EngineContext, rule_: Rule) -> int:
    """An application log holding slurmstepd's end-of-job line of ANOTHER job: what the file holds up to that
    line is that job's output (a file appended to), not this job's. Only where the job's id is Slurm's plain
    number (an array task's or a het job's own id is not in job.yaml). The job can print such a line itself:
    one behind a task's prefix (srun --label, torchrun, MPI) is a task's output, not slurmstepd's; a cut with a
    line above it stamped inside this job's window, or with nothing after it, would drop the job's own lines:
    none of them cuts."""
    job = ctx.job
    if not job.job_id.isdecimal() or job.array_job_id or job.array_task_id or ctx.window_source != "job" \
            or ctx.window_start is None:
        return 0
    before = ctx.window_start - ctx.tolerance(ctx.settings.window_before_s)
    ends: dict[str, tuple[int, str]] = {}
    for sym in ctx.symptoms:
        other = str(sym.fields.get("job", "")).split(".", 1)[0]
        if sym.kind not in _JOB_ENDING_KINDS or not other.isdecimal() or other == job.job_id or not sym.evidence \
                or sym.evidence[0].source != SOURCE_APP or sym.time is None or sym.fields.get("time_inferred") \
                or sym.time >= before or split_rank(sym.evidence[0].raw)[0] is not None:
            continue  # only another job that ended before this one started, by its own stamp, in slurmstepd's words
        line = sym.evidence[0].line
        if line is not None and line > ends.get(sym.evidence[0].file, (0, ""))[0]:
            ends[sym.evidence[0].file] = (line, other)
    for bf in ctx.bundle.files:  # lines the job printed itself around the end line: no cut there
        if bf.rel in ends and (why := _cut_refused(ctx, bf, ends[bf.rel][0])) is not None:
            ctx.notes.append(f"{bf.rel}: line {ends[bf.rel][0]} names job {ends[bf.rel][1]} as ended before this "
                             f"job, but {why}: not cut there")
            del ends[bf.rel]
    count = 0
    for sym in ctx.active():
        ref = sym.evidence[0] if sym.evidence else None
        if ref is None or ref.file not in ends or ref.line is None:
            continue
        last, other = ends[ref.file]
        if ref.line <= last:
            sym.dropped = f"output of job {other}, which ended at line {last} of this file before this job wrote to it"
            count += 1
    if ends:
        ctx.notes.append("; ".join(f"{rel}: lines up to {last} are job {other}'s output (the file was appended to)"
                                   for rel, (last, other) in sorted(ends.items())))
    return count


_CLOCK = re.compile(rb"\d:\d\d:\d\d|\d{10}")  # a time of day or an epoch: worth parsing for a stamp
OWN_LINES_READ_BYTES = 64 << 20  # above a cut line further in than this, the file is not cut


def _cut_refused(ctx: EngineContext, bf: BundleFile, last: int) -> Optional[str]:
    """Why ``bf`` may not be cut after line ``last`` (another job's end line): a line before it stamped inside
    this job's window (named), no line after it (a file appended to holds this job's output after the earlier
    job's end: one that ends with the line is the job's own output, which printed it), the file too long to
    read, or unreadable; None when the cut stands. A compressed file is read decompressed."""
    timectx = _app_time_context(ctx, bf)
    cut = gutter_cutter(bf.path)
    try:
        handle = open_evidence(bf.path)
    except EVIDENCE_READ_ERRORS:
        return "the file could not be read"
    read, lineno, at_head = 0, 1, True
    with handle:
        while True:
            try:
                raw = handle.readline(64 << 10)  # a piece of a longer line is read on, only its head is parsed
            except EVIDENCE_READ_ERRORS:
                return "the file could not be read to its end"  # an I/O error, a truncated archive
            if not raw:
                return "no line follows it"
            read += len(raw)
            if read > OWN_LINES_READ_BYTES:
                return f"more than {OWN_LINES_READ_BYTES >> 20} MiB of lines"
            this_line, head, at_head = lineno, at_head, raw.endswith(b"\n")
            if at_head:
                lineno += 1  # the next piece opens the next line
            if this_line > last:
                if raw.strip(b" \t\r\n\x00"):
                    return None  # this job's output follows the earlier job's end
                continue
            if this_line == last or not head or not _CLOCK.search(raw, 0, 4096):
                continue
            when = _own_stamp(split_rank(decode(cut(raw[:4096])))[1], timectx)
            if when is not None and ctx.in_window(when):
                return f"line {this_line} above it is stamped inside this job ({format_utc(when)})"


def _app_time_context(ctx: EngineContext, bf: BundleFile) -> TimeContext:
    """How an application log's stamps read: its node's clock, in the zone the filter phase found for the file."""
    timectx = time_context(ctx, bf.node)
    zone = ctx.app_zones.get(bf.rel)
    return replace(timectx, zone=zone_from_name(zone)) if zone else timectx


def _own_stamp(text: str, timectx: TimeContext) -> Optional[datetime]:
    """The time of a line read straight from its file: its own stamp, else a log shipper's in front of it."""
    when = parse_line_time(text, timectx).time
    if when is None and (shipped := shipped_stamp(text)):
        when = parse_line_time(shipped, timectx).time
    return when


def _may_be_inside(ctx: EngineContext, sym: Symptom, when: Optional[datetime]) -> bool:
    """A line without a stamp of its own has its preceding line's time, a lower bound: before the window it
    may still lie inside it, unless the following line's stamp (its upper bound) is before the window too
    (a job that printed a years-old dmesg line before its own error)."""
    if not sym.fields.get("time_inferred") or when is None or ctx.window_start is None or when >= ctx.window_start:
        return False
    upper = latest_time(sym)
    return upper is None or ctx.in_window(upper) is not False


_SLURM_WRITTEN = re.compile(r"(?:slurmstepd(?:-[\w.-]+)?|srun|salloc|sbatch): ")


def _slurm_written(raw: str) -> bool:
    """Whether the line, past any rank prefix, is srun's, salloc's, sbatch's or slurmstepd's own; the words are
    looked for first, so that most lines skip the prefix split (every application symptom asks)."""
    return ("slurmstepd" in raw or "srun: " in raw or "salloc: " in raw or "sbatch: " in raw) \
        and _SLURM_WRITTEN.match(split_rank(raw)[1]) is not None


def _rezoned_application_logs(ctx: EngineContext) -> list[tuple[str, str]]:
    """Application logs whose zone-less stamps all lie outside the job window as read in the zone assumed for
    them, and all inside it read in another zone the bundle states: UTC (a container's clock on a node whose
    zone is local; the kernel's lines keep the node's zone), else an offset the job nodes' own kernel lines
    carry (journalctl's '+0800' where no facts name the zone). Their symptoms move to that reading; (file,
    zone) for each file moved."""
    by_file: dict[str, list[Symptom]] = {}
    for sym in ctx.active():
        if sym.time is not None and sym.evidence and sym.evidence[0].source == SOURCE_APP \
                and not _slurm_written(sym.evidence[0].raw):
            # srun's and slurmstepd's own lines ('*** JOB 12 ON n1 CANCELLED AT 2026-...') carry the host's local
            # time whatever clock the program's container keeps: they neither vote on the file's zone nor move
            by_file.setdefault(sym.evidence[0].file, []).append(sym)
    moved: list[tuple[str, str]] = []
    others: Optional[list[tuple[str, Any]]] = None
    for rel, symptoms in sorted(by_file.items()):
        own = [s for s in symptoms if not s.fields.get("time_inferred")]
        if not own or any(ctx.in_window(s.time) is not False for s in own):
            continue
        zone = time_context(ctx, own[0].node).zone
        if not all(_zone_less(ctx, s, zone) for s in own[:3]):
            continue
        if others is None:
            others = [("UTC", timezone.utc), *_kernel_offsets(ctx)]
        for name, other in others:
            shifts = {id(sym): _offset(sym.time, zone) - _offset(sym.time, other)
                      for sym in symptoms if sym.time is not None}
            if not any(shifts[id(s)] for s in own):
                continue
            if any(ctx.in_window(when + shifts[id(s)]) is not True for s in own if (when := s.time)):
                continue
            for sym in symptoms:
                shift_time(sym, shifts[id(sym)])
                sym.notes.append(f"stamp read at {name}: its file's stamps fit the job only so")
            moved.append((rel, name))
            break
    return moved


def _rezoned_kernel_lines(ctx: EngineContext) -> list[tuple[str, str]]:
    """A node without a zone in its facts whose kernel lines carry one non-zero UTC offset in their own stamps
    (journalctl's '2024-11-15T20:02:03+0800': the node's local time) and whose other kernel lines carry none (a
    syslog file's 'Nov 15 20:02:03', written in the same local time): those are read at that offset, not in the
    zone assumed for them. A zero offset says nothing of the local zone ('journalctl --utc'). (node, offset) for
    each node moved."""
    by_node: dict[str, tuple[list[Symptom], set[str]]] = {}
    for sym in ctx.active():
        if sym.node and sym.time is not None and sym.evidence and sym.evidence[0].source == SOURCE_KERNEL \
                and not sym.fields.get("time_inferred"):
            naive, offsets = by_node.setdefault(sym.node, ([], set()))
            offset = _stamp_offset(sym)
            if offset:
                offsets.add(offset)
            else:
                naive.append(sym)
    moved: list[tuple[str, str]] = []
    for node, (naive, offsets) in sorted(by_node.items()):
        facts = ctx.bundle.facts_for(node)
        if not naive or len(offsets) != 1 or (facts is not None and facts.timezone):
            continue
        name = next(iter(offsets))
        try:
            other = zone_from_name(name)
        except ValueError:
            continue
        zone, first = time_context(ctx, node).zone, naive[0].time
        if first is None or name in ("Z", "z") or not _offset(first, other) \
                or not all(_zone_less(ctx, s, zone) for s in naive[:3]):
            continue
        for sym in naive:
            if sym.time is not None and _zone_less(ctx, sym, zone):
                shift_time(sym, _offset(sym.time, zone) - _offset(sym.time, other))
                sym.notes.append(f"stamp read at {name}: the node's own kernel lines carry that offset")
        moved.append((node, name))
    return moved


def _kernel_offsets(ctx: EngineContext) -> list[tuple[str, Any]]:
    """The UTC offsets the job's kernel lines write in their own stamps ('2024-10-02T18:06:38+0800'), one each."""
    found: set[str] = set()
    for sym in ctx.active():
        if sym.evidence and sym.evidence[0].source != SOURCE_APP and sym.time is not None:
            offset = _stamp_offset(sym)
            if offset and offset not in ("Z", "z"):
                found.add(offset)
    out: list[tuple[str, Any]] = []
    for offset in sorted(found):
        try:
            out.append((offset, zone_from_name(offset)))
        except ValueError:
            continue
    return out


def _stamp_offset(sym: Symptom) -> Optional[str]:
    """The UTC offset the symptom's own line writes in its leading stamp ('2024-10-02T18:06:38+0800'), or None."""
    return iso_offset(sym.evidence[0].raw.split(" ", 1)[0]) if sym.evidence else None


def _offset(when: datetime, zone: Any) -> timedelta:
    """The zone's offset from UTC at ``when``."""
    return when.astimezone(zone).utcoffset() or timedelta(0)


def _zone_less(ctx: EngineContext, sym: Symptom, zone: Any) -> bool:
    """Whether the symptom's own line has a stamp without a zone or offset (the node's zone was assumed); the
    job window gives a yearless stamp (glog's 'E1002 18:16:40') its year."""
    raw = sym.evidence[0].raw if sym.evidence else ""
    stamp = parse_line_time(split_rank(raw)[1], TimeContext(window_start=ctx.window_start, window_end=ctx.window_end,
                                                            zone=zone, zone_name="node"))
    return stamp.time is not None and any(a.startswith("zone ") for a in stamp.assumptions)


def _to_context(sym: Symptom, why: str) -> None:
    """A candidate the job met but that did not stop it: context, with the reason in its notes."""
    sym.role, sym.strength = "context", 0
    sym.notes.append(why)


@rule("filter.gpu_outside_allocation")
def gpu_outside_allocation(ctx: EngineContext, rule_: Rule) -> int:
    """A fault on a GPU of a job node that Slurm did not give this job (another job's, an idle one): context,
    with a note, where the node's collection record and facts say which GPUs the job had."""
    count = 0
    allocated: dict[str, Optional[frozenset[str]]] = {}
    seen_pids = _PidsInOutput(ctx)
    for sym in ctx.active():
        if sym.role != "candidate" or not sym.gpu or not sym.node:
            continue
        if sym.node not in allocated:
            allocated[sym.node] = ctx.bundle.allocated_gpus(sym.node)
        mine = allocated[sym.node]
        if mine and sym.gpu not in mine:
            _to_context(sym, f"GPU {sym.gpu} was not one of this job's GPUs on {sym.node} ({', '.join(sorted(mine))}, "
                             "as the epilog recorded them): another job's or an idle one")
            count += 1
        elif mine is None and (by_index := ctx.bundle.allocated_by_index(sym.node)) is not None \
                and sym.gpu not in by_index and _listed(ctx, sym) and not seen_pids.named(sym):
            # Slurm's indexes follow the device files, which nvidia-smi's order matches on most nodes but not all: a
            # GPU outside them is set aside only where it is still listed after the job (a GPU gone from the bus
            # renumbers the rest), the fault's process is none the job's output names, and either the job's output
            # on that node shows no GPU error at all (a fault on a GPU the job used fails its CUDA calls) or it
            # names the processes of its ranks there and the fault's is not one of them
            quiet = not _gpu_error_in_output(ctx, sym.node)
            processes = max(len(ctx.job.node_ranks(sym.node)), len(by_index))
            if quiet or seen_pids.foreign(sym, processes):
                why = "shows no GPU error" if quiet else \
                    "names its ranks' processes there (NCCL's host:pid:tid), and not the fault's"
                _to_context(sym, f"GPU {sym.gpu} is not among this job's GPUs on {sym.node} by index "
                                 f"({', '.join(sorted(by_index))}, nvidia-smi's numbering), and the job's output "
                                 f"{why}: another job's or an idle one")
                count += 1
    return count


def _listed(ctx: EngineContext, sym: Symptom) -> bool:
    """Whether the node's facts (nvidia-smi after the job) list the symptom's GPU."""
    facts = ctx.bundle.facts_for(sym.node)
    return facts is not None and sym.gpu is not None and facts.uuid_for(sym.gpu) is not None


class _PidsInOutput:
    """Which processes the faults name (an Xid's pid=) appear in the job's output on their node (NCCL's 'host:pid:tid'
    prefix, glog's thread id, a 'pid N' of the program's): then the fault was the job's. Every pid of a node's
    index-outside faults is looked for in one pass over its application files, read up to PID_SEARCH_BYTES each; a
    file that cannot be read counts as naming them all (the faults are then kept). :meth:`foreign` compares them
    with the processes and GPUs NCCL names for the job's ranks there."""

    def __init__(self, ctx: EngineContext) -> None:
        self.ctx = ctx
        self._found: dict[str, set[int]] = {}
        self._ranks: dict[str, Optional[tuple[set[int], set[int]]]] = {}

    def named(self, sym: Symptom) -> bool:
        pid = _fault_pid(sym)
        return pid is not None and bool(sym.node) and pid in self._named_on(str(sym.node))

    def _named_on(self, node: str) -> set[int]:
        """The faults' pids the job's output on ``node`` names (:meth:`_scan`, once per node)."""
        if node not in self._found:
            self._found[node] = self._scan(node)
        return self._found[node]

    def foreign(self, sym: Symptom, processes: int) -> bool:
        """Whether the faults on the symptom's GPU name processes (pid=) and the job's output on its node names the
        processes of all its ``processes`` ranks there (NCCL's 'host:pid:tid [dev]' prefix: every rank printed one)
        and as many GPUs by bus id (its init lines' 'busId 8a000'), none of them the fault's process or GPU: another
        job's fault. A line the job's output forged can only set a fault aside here, never blame one."""
        pids = {pid for s in self.ctx.active() if s.node == sym.node and s.gpu == sym.gpu
                and (pid := _fault_pid(s)) is not None}
        if not pids or not sym.node or not sym.gpu or processes < 1:
            return False
        if sym.node not in self._ranks:
            self._ranks[sym.node] = self._rank_pids(sym.node)
        seen = self._ranks[sym.node]
        if seen is None:  # a file that could not be read: nothing to compare
            return False
        ranks, buses = seen
        if len(ranks) < processes or len(buses) < processes or _nccl_bus_id(sym.gpu) in buses:
            # a rank that printed no prefix may be the fault's process; NCCL must name the job's GPUs there (its
            # init lines' busId, NCCL_DEBUG=INFO) and not the fault's: in a PID namespace the prefix's pids are the
            # container's and no pid comparison holds
            return False
        return not pids & (ranks | self._named_on(sym.node))

    def _rank_pids(self, node: str) -> Optional[tuple[set[int], set[int]]]:
        """The pids NCCL's prefix gives the job's processes on ``node`` and the bus ids its lines name (an init
        line's 'busId 8a000'), up to PID_SEARCH_BYTES of each file; None when a file cannot be read."""
        prefix = re.compile(rb"(?<![\w.-])" + re.escape(node.encode()) + rb"(?:\.[\w-]{1,63}){0,8}:(\d{1,9}):\d{1,9} "
                            rb"\[\d{1,3}\](?:[^\n]{0,300}?\bbusId ([0-9a-fA-F]{1,12})\b)?")
        found: set[int] = set()
        buses: set[int] = set()
        for bf in self._app_files(node):
            try:
                with open_evidence(bf.path) as handle:
                    for match in prefix.finditer(handle.read(PID_SEARCH_BYTES)):
                        found.add(int(match.group(1)))
                        if match.group(2):
                            buses.add(int(match.group(2), 16))
            except EVIDENCE_READ_ERRORS:
                return None
        return found, buses

    def _app_files(self, node: str) -> Iterator[BundleFile]:
        """The application files that may hold ``node``'s output: its own, and those placed on no node."""
        return (bf for bf in self.ctx.bundle.files if bf.source == SOURCE_APP and bf.node in (node, None))

    def _scan(self, node: str) -> set[int]:
        wanted = {pid for s in self.ctx.active() if s.node == node and s.gpu and (pid := _fault_pid(s)) is not None}
        if not wanted:
            return set()
        token = re.compile(rb"(?<![\w.])(" + b"|".join(str(p).encode() for p in sorted(wanted)) + rb")(?![\w.])")
        found: set[int] = set()
        for bf in self._app_files(node):
            try:
                with open_evidence(bf.path) as handle:
                    found.update(int(m) for m in token.findall(handle.read(PID_SEARCH_BYTES)))
            except EVIDENCE_READ_ERRORS:
                return wanted
            if found >= wanted:
                break
        return found


PID_SEARCH_BYTES = 64 << 20  # of each application file, for a fault's pid (bounded memory on a huge log)


def _nccl_bus_id(pci: str) -> int:
    """NCCL's 'busId' of a PCI address: the hex digits of '0000:8a:00.0' as one number (0x8a000)."""
    digits = re.sub(r"[^0-9a-fA-F]", "", pci if "." in pci else f"{pci}.0")
    return int(digits, 16) if digits else -1


def _fault_pid(sym: Symptom) -> Optional[int]:
    """The process a fault names (an Xid's pid=), or None for none or the kernel's own (0, 1)."""
    pid = sym.fields.get("pid")
    return pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 1 else None


def _gpu_error_in_output(ctx: EngineContext, node: str) -> bool:
    """Whether the job's output on ``node`` (or not placed on any) holds a GPU error: a GPU-category symptom or a
    CUDA error of any reading."""
    return any(s.evidence and s.evidence[0].source == SOURCE_APP and s.node in (node, None)
               and (s.category in ("gpu_hardware", "gpu_memory", "nvlink")
                    or s.kind in ("cuda_error", "nccl_cuda_error") or s.fields.get("readings"))
               for s in ctx.symptoms)


@rule("filter.pre_start_event")
def pre_start_event(ctx: EngineContext, rule_: Rule) -> int:
    """Keep an infrastructure fault from before the job's start only when the job met it (see the rule's
    description); a kept one is marked ``pre_existing``."""
    start = ctx.window_start if ctx.window_source == "job" else None
    if start is None:
        return 0
    kinds = set(str_list(rule_, "met_by_kinds"))
    categories = set(str_list(rule_, "met_by_categories"))
    start -= timedelta(seconds=float(rule_.params.get("start_grace_s", 10)))
    witnesses = _gpu_errors_by_node(ctx, kinds, categories)  # once: thousands of early Xids may each ask
    count = 0
    for sym in ctx.symptoms:
        when = sym.time  # on the controller's clock: extraction corrected any recorded skew
        if when is None or when >= start or sym.responsible != "infrastructure" or "clock_in_doubt" in sym.fields \
                or sym.role != "candidate" or not sym.evidence or sym.evidence[0].source == SOURCE_APP:
            continue  # (a stamp its node's time daemon put in doubt stays as outside_job_window left it)
        early = format_utc(when)
        met = _job_met(ctx, sym, witnesses)
        if met:
            sym.fields["pre_existing"] = True
            sym.notes.append(f"pre-existing fault: {early}, before the job started; the job met it ({met})")
        elif sym.dropped is None:
            sym.dropped = (f"before the job started ({early}) and the job shows no sign of meeting it "
                           "(no GPU error of its own on that node, and the node became usable)")
            count += 1
        elif sym.fields.pop("near_window", None):
            sym.notes.append("before the job started, and the job shows no sign of meeting it: not a candidate")
    return count


def _gpu_errors_by_node(ctx: EngineContext, kinds: set[str],
                        categories: set[str]) -> dict[Optional[str], list[Symptom]]:
    """The job's own GPU errors (application lines of ``kinds`` or ``categories``), per node, in order."""
    found: dict[Optional[str], list[Symptom]] = {}
    for sym in ctx.active():
        if sym.evidence and sym.evidence[0].source == SOURCE_APP and (sym.kind in kinds or sym.category in categories) \
                and not sym.fields.get("node_from_label"):  # a per-node launcher's task number places it nowhere
            found.setdefault(sym.node, []).append(sym)
    return found


def _job_met(ctx: EngineContext, fault: Symptom, witnesses: dict[Optional[str], list[Symptom]]) -> str:
    """How the job shows it met ``fault`` (a few words), or "" when it does not."""
    if ctx.job.state == "NODE_FAIL":
        return "the job ended NODE_FAIL"
    for sym in witnesses.get(fault.node, ()):
        if not (fault.gpu and sym.gpu and fault.gpu != sym.gpu):
            return f"{sym.kind} on {sym.node}, {sym.evidence[0].file}:{sym.evidence[0].line}"
    return ""


@rule("filter.other_process_gpu_fault")
def other_process_gpu_fault(ctx: EngineContext, rule_: Rule) -> int:
    """Drop an application-class Xid (a process's own fault) stamped outside the job's run by more than ``grace_s``:
    another process's fault on the same GPU (see the rule's description)."""
    if ctx.window_source != "job" or (ctx.window_start is None and ctx.window_end is None):
        return 0
    grace = timedelta(seconds=float(rule_.params.get("grace_s", 5)))
    count = 0
    for sym in ctx.active():
        when = sym.time  # on the controller's clock: extraction corrected any recorded skew
        if when is None or sym.kind != "xid" or sym.responsible != "workload" or "clock_in_doubt" in sym.fields \
                or not sym.evidence or sym.evidence[0].source == SOURCE_APP:
            continue
        if ctx.window_start is not None and when < ctx.window_start - grace:
            side = "before the job started"
        elif ctx.window_end is not None and when > ctx.window_end + grace:
            side = "after the job ended"
        else:
            continue
        process = f" (pid {sym.fields['pid']})" if "pid" in sym.fields else ""
        sym.dropped = f"{side} ({format_utc(when)}): another process's fault on the GPU{process}, not this job's"
        count += 1
    return count


@rule("filter.previous_boot")
def previous_boot(ctx: EngineContext, rule_: Rule) -> int:
    """Drop kernel symptoms written before their file's last boot marker (kernel.boot_marker) when the job
    ran in that last boot: the job did not end NODE_FAIL and the node's boot_time, when known, is not later
    than the job's start."""
    if ctx.job.state == "NODE_FAIL":
        return 0
    last: dict[str, int] = {}  # file -> offset of its last boot marker
    for sym in ctx.symptoms:
        if sym.kind == "boot_marker" and sym.evidence:
            marker = sym.evidence[0]
            last[marker.file] = max(last.get(marker.file, -1), marker.offset)
    count = 0
    for sym in ctx.active():
        ref = sym.evidence[0] if sym.evidence else None
        if ref is None or ref.file not in last or ref.offset >= last[ref.file] or sym.kind == "boot_marker":
            continue
        facts = ctx.bundle.facts_for(sym.node)
        booted = facts.boot_time if facts else None
        if booted is not None and ctx.window_start is not None and booted > ctx.window_start:
            continue  # the node booted after the job began: the earlier boot is the job's
        sym.dropped = "written before the node's last boot (a reboot later in its kernel log): another boot's"
        count += 1
    return count


@rule("filter.node_not_in_job")
def node_not_in_job(ctx: EngineContext, rule_: Rule) -> int:
    nodes = set(ctx.job.nodes)
    if not nodes:
        return 0
    dropped: Counter[tuple[str, str]] = Counter()
    for sym in ctx.active():
        if sym.node is not None and sym.node not in nodes:
            sym.dropped = f"node {sym.node} is not one of the job's nodes"
            dropped[(connector_of(sym.evidence[0].source) if sym.evidence else "job_facts", sym.node)] += 1
    for (connector, node), count in sorted(dropped.items()):  # said, not silent: a node list may be wrong
        ctx.coverage_for(connector).notes.append(
            f"{count} symptom(s) of node {node} set aside: it is not one of the job's nodes ({len(nodes)} listed)")
    return sum(dropped.values())


@rule("filter.task_printed_slurm_lines")
def task_printed_slurm_lines(ctx: EngineContext, rule_: Rule) -> int:
    """A Slurm daemon's line (``params.kinds``) naming a node that a program wrote: set aside (see the rule's
    description)."""
    kinds = set(str_list(rule_, "kinds"))
    paths = {bf.rel: bf.path for bf in ctx.bundle.files}
    found: dict[str, list[Symptom]] = {}
    for sym in ctx.active():
        ref = sym.evidence[0] if sym.evidence else None
        if sym.kind in kinds and ref is not None and ref.source == SOURCE_APP \
                and (sym.fields.get("host") or sym.responsible == "infrastructure"):
            # only a line that would blame a node (it names one, or its file's): slurmstepd's own lines reach the
            # output through the task's stream (srun --label puts '600: ' before them) and blame none
            found.setdefault(ref.file, []).append(sym)
    count = 0
    for rel, symptoms in sorted(found.items()):
        heads = _line_heads(paths.get(rel), [s.evidence[0].offset for s in symptoms])
        pasted = _quoted_throughout(paths.get(rel))
        for sym in symptoms:
            head = heads.get(sym.evidence[0].offset, b"")
            why = _program_written(sym.evidence[0].raw, pasted, _own_regex(ctx, sym)) or (
                "the line is coloured" if b"\x1b[" in head else "") or (
                "the line's own first bytes carry a task's prefix" if _task_prefixed(head) else "")
            if why:
                sym.dropped = (f"a program printed these words ({why}): Slurm writes its own plain lines, so they "
                               "name no node")
                count += 1
            elif (other := _foreign_step(ctx, sym)) is not None:
                sym.dropped = f"the step it names belongs to job {other}, not this one: another job's line"
                count += 1
    return count + _unplace_task_lines(ctx, set(str_list(rule_, "task_stream_kinds")))


def _unplace_task_lines(ctx: EngineContext, kinds: set[str]) -> int:
    """slurmstepd's lines that reach the output through a task's stream ('1: slurmstepd: error: Munge decode failed:
    ...') read exactly as the task's own print of them: srun puts the task's number before both. The number places
    the line on the task's node, which the task chose by printing; the symptom keeps its reading and loses the node."""
    count = 0
    for sym in ctx.active():
        ref = sym.evidence[0] if sym.evidence else None
        if sym.kind not in kinds or ref is None or ref.source != SOURCE_APP or sym.node is None \
                or split_rank(ref.raw)[0] is None:
            continue
        sym.fields["node_from_task_stream"] = sym.node
        sym.notes.append(f"placed on {sym.node} only by the task's prefix, which the task's own print of these "
                         "words carries too: no node blamed")
        sym.summary = f"{sym.kind.replace('_', ' ')} in a task's output (rank {sym.rank}): it names no node"
        sym.node = None
        count += 1
    return count


def _own_regex(ctx: EngineContext, sym: Symptom) -> Optional[re.Pattern[str]]:
    rule_ = ctx.ruleset.get(sym.rule_id)
    return rule_.match.regex if rule_ is not None and rule_.match is not None else None


def _task_prefixed(head: bytes) -> bool:
    """Whether the line as the file holds it opens with a task's prefix that the text read lost: a line longer
    than the scan keeps is read from its last carriage return (a progress bar's redraws), and the '0: ' srun
    --label put at its start is then gone from the text."""
    return bool(head) and split_rank(decode(head))[0] is not None


# What may stand before Slurm's (or HPE PALS') own words on its own line: a stamp (ISO, or syslog's with its
# host), the launcher's or daemon's tag ('srun: ', 'slurmstepd-n1: ', 'slurmd[123]: ', 'mpiexec: '), the level
# ('error: '). Anything else (a program's logging prefix, grep -H's 'file:', another message that quotes the
# words, a chdir error's path) is a program's line.
_SLURM_LINE_HEAD = re.compile(
    r"\s*(?:(?:\[?\d{4}-\d\d-\d\d[T ][\d:.,]{5,20}(?:Z|[+-]\d\d:?\d\d)?\]?"
    r"|[A-Z][a-z]{2} {1,2}\d{1,2} \d\d:\d\d:\d\d(?:\.\d{1,9})?(?: [\w.-]{1,64})?)\s+)?"
    r"(?:(?:stdout|stderr):\s+)?"
    r"(?:(?:srun|salloc|sbatch|yhrun|yhalloc|slurmstepd(?:-[\w.-]{1,64})?|slurmd|slurmctld|mpiexec|aprun|palsd)"
    r"(?:\[\d{1,10}\])?:\s+)?"
    r"(?:(?:error|fatal|warning):\s+)?")


def _foreign_step(ctx: EngineContext, sym: Symptom) -> Optional[str]:
    """The job a 'Task launch for <job>.<step> failed' line's step belongs to, when it is not this job (nor
    its array job): an echo of another job's output."""
    step = str(sym.fields.get("step") or "")
    job = step.partition(".")[0].partition("+")[0]
    if not job.isdigit():
        return None
    if not ctx.job.own_id_known:
        return job if _before_the_array(ctx, job) else None
    own = {ctx.job.job_id.split("_")[0].split("+")[0], ctx.job.array_job_id}
    return None if job in own else job


def _before_the_array(ctx: EngineContext, job: str) -> bool:
    """Whether ``job`` is older than the array this job (named only '<array>_<task>') is a task of: Slurm gives an
    array's tasks ids from the array's own on, so an id below it is another job's."""
    array = _job_number(ctx.job.job_id.split("+", 1)[0].split("_", 1)[0])
    return array != float("inf") and _job_number(job) < array  # (no array id to read: nothing is older)


def _job_number(text: str) -> float:
    """A job id as Slurm writes it (at most 20 ASCII digits: a uint32, a 64-bit id) as a number; anything else (a
    superscript '²³' that ``str.isdigit`` accepts and ``int`` refuses, 5,000 digits ``int`` will not read) as
    infinitely large, so it is never taken for an older job's."""
    return int(text) if len(text) <= 20 and text.isascii() and text.isdigit() else float("inf")


def _line_heads(path: Optional[Path], offsets: list[int]) -> dict[int, bytes]:
    """The file's own first bytes (up to 4 KiB) of the lines at ``offsets``: what the scan read before it cut
    terminal escapes from the text (srun and the Slurm daemons never colour); a compressed file's, decompressed
    (the offsets count its decompressed bytes). Nothing for an unreadable file."""
    if path is None:
        return {}
    heads: dict[int, bytes] = {}
    try:
        with open_evidence(path) as handle:
            for offset in sorted(set(offsets)):
                if offset >= 0:
                    handle.seek(offset)
                    heads[offset] = handle.read(4096).split(b"\n", 1)[0]
    except EVIDENCE_READ_ERRORS:
        return heads
    return heads


def _quoted_throughout(path: Optional[Path]) -> bool:
    """Whether every line of the file's head (64 KiB) that holds anything is quoted ('> '): a log pasted into
    a mail or a Markdown quote, where the marker is the paste's, not what any program wrote."""
    if path is None:
        return False
    try:
        with open_evidence(path) as handle:
            head = handle.read(1 << 16)
    except EVIDENCE_READ_ERRORS:
        return False
    lines = [line for line in decode(head).split("\n")[:-1 if len(head) == 1 << 16 else None] if line.strip()]
    return bool(lines) and all(quote_end(line) for line in lines)


def _program_written(raw: str, pasted: bool = False, regex: Optional[re.Pattern[str]] = None) -> str:
    """Why a line in Slurm's words was written by a program rather than srun or a Slurm daemon, or "".
    ``pasted``: the whole file is quoted, so a line's quote marker says nothing of who wrote it; ``regex``: the
    rule's own, which finds where Slurm's words start in the line."""
    if not pasted and quote_end(raw.lstrip("\x00")):
        return "the line is quoted"  # srun and the daemons never quote their own lines
    stream, rest = split_rank(raw)
    if stream is not None:
        return "the line carries a task's prefix"
    if rest.lstrip()[:1] == "{":
        return "the words sit inside a program's log record"
    found = regex.search(rest) if regex is not None else None
    # not found: read only after a logger's prefix (extract's after_log_prefix), or past the part of the line kept
    if regex is not None and (found is None or not _SLURM_LINE_HEAD.fullmatch(rest, 0, found.start())):
        return "the words follow a program's own prefix"
    return ""


@rule("filter.oom_of_other_job")
def oom_of_other_job(ctx: EngineContext, rule_: Rule) -> int:
    count = 0
    for sym in ctx.active():
        other = sym.fields.get("memcg_job")
        if other and (str(other) != ctx.job.job_id.split("+")[0] if ctx.job.own_id_known
                      else _before_the_array(ctx, str(other))):
            sym.dropped = f"the OOM kill hit job {other}, not this job"
            count += 1
    return count


@rule("filter.exception_wrapping_cuda_error")
def exception_wrapping_cuda_error(ctx: EngineContext, rule_: Rule) -> int:
    """Drop a Python exception on a line that also made a CUDA error symptom (see the rule's description)."""
    kinds = set(str_list(rule_, "kinds"))
    active = ctx.active()  # a list built anew per call while the filter phase runs: once here
    read = {(s.evidence[0].file, s.evidence[0].line) for s in active
            if s.kind in kinds and s.evidence and s.evidence[0].source == SOURCE_APP}
    count = 0
    for sym in active:
        if sym.rule_id == "app.python_exception" and sym.evidence \
                and (sym.evidence[0].file, sym.evidence[0].line) in read:
            sym.dropped = "the exception only carries the CUDA error its line names, which the CUDA catalog judged"
            count += 1
    return count


@rule("filter.first_exception_per_rank")
def first_exception_per_rank(ctx: EngineContext, rule_: Rule) -> int:
    """Keep the first Python exception of each rank (or file, without ranks); later ones are
    chained re-raises or shutdown noise."""
    seen: dict[tuple[Any, ...], Symptom] = {}
    count = 0
    for sym in ctx.active():
        if sym.kind != "python_exception":
            continue
        key = (sym.rank, sym.node) if sym.rank is not None else (sym.evidence[0].file,)
        if key in seen:
            sym.dropped = f"a later exception of the same rank (first: line {seen[key].evidence[0].line})"
            count += 1
        else:
            seen[key] = sym
    return count


@rule("filter.duplicate_lines")
def duplicate_lines(ctx: EngineContext, rule_: Rule) -> int:
    """The same kernel line seen twice (dmesg and syslog in one bundle): keep the first."""
    seen: dict[tuple[Any, ...], Symptom] = {}
    count = 0
    window = timedelta(seconds=float(rule_.params.get("seconds", 1.0)))
    for sym in ctx.active():
        if not sym.evidence or sym.evidence[0].source != "kernel":
            continue
        key = (sym.kind, sym.node, sym.gpu, sym.summary)
        first = seen.get(key)
        if first and first.evidence[0].file != sym.evidence[0].file and _close(first, sym, window):
            sym.dropped = f"duplicate of {first.evidence[0].file}:{first.evidence[0].line}"
            count += 1
        elif first is None:
            seen[key] = sym
    return count


def _close(a: Symptom, b: Symptom, window: timedelta) -> bool:
    return a.time is not None and b.time is not None and abs(a.time - b.time) <= window


@rule("filter.teardown_after_failure")
def teardown_after_failure(ctx: EngineContext, rule_: Rule) -> int:
    """Teardown-class events (Xid 45, Xid 43) after the first failure are consequences of it."""
    teardown = [sym for sym in ctx.active() if sym.role == "teardown"]
    first = _first_failure(ctx) if teardown else None  # (a minimum over every symptom: only when one is asked about)
    count = 0
    for sym in teardown:
        if first is None or first.time is None or sym.time is None \
                or sym.time >= first.time - ctx.tolerance(ctx.settings.skew_s):
            when = format_utc(first.time) if first and first.time else "the job end"
            sym.dropped = f"teardown after the first failure ({when})"
            count += 1
    return count


def _first_failure(ctx: EngineContext) -> Symptom | None:
    timed = [s for s in ctx.active() if s.time is not None and s.role in ("candidate", "cascade")]
    return min(timed, key=Symptom.sort_key) if timed else None


# faults the kernel logs the moment they happen (a port going down, an OOM kill), which cannot have started a hang
# that began before them; a GPU the driver finds fallen off the bus on its next access, or a file server a client
# declares not responding after its RPC timeouts, may be logged minutes into the hang they caused
_LOGGED_AT_ONCE = frozenset({"network", "host_oom"})


# Slurm's own OOM reports ('Detected 1 oom_kill event in StepId=...') come when the step ends, after the kill
_REPORTED_AT_STEP_END = frozenset({"slurm_oom_kill", "slurm_memory_limit"})


def _last_stall(starts: list[tuple[datetime, Optional[int]]], margin: timedelta, resumed: list[datetime]) -> datetime:
    """The start of the job's last stall: the watchdog lines of an earlier, finished one (a retried step, an
    elastic restart) do not move it. Starts more than ``margin`` apart are two stalls, unless their collectives'
    sequence numbers say the job never went on between them (the later one's within _SAME_HANG_SEQS of the
    earlier's, and no elastic agent restarting its workers between, ``resumed``): the stuck collective never
    completed, so a 'later' stall at the next sequence number is the same hang's (a line the job printed itself)."""
    began, seqs = starts[-1][0], {starts[-1][1]}
    for start, seq in reversed(starts[:-1]):
        if began - start > margin and not _same_hang(seq, seqs, start, began, resumed):
            break
        began = start
        seqs.add(seq)
    return began


def _same_hang(seq: Optional[int], later: set[Optional[int]], start: datetime, began: datetime,
               resumed: list[datetime]) -> bool:
    known = [s for s in later if s is not None]
    return seq is not None and bool(known) and min(abs(s - seq) for s in known) <= _SAME_HANG_SEQS \
        and not any(start < when <= began for when in resumed)


_SAME_HANG_SEQS = 2  # ranks of one hang report the oldest pending collective, one or two apart


@rule("filter.outlived_fault")
def outlived_fault(ctx: EngineContext, rule_: Rule) -> int:
    """An infrastructure fault or a host OOM kill stamped well before the job's stuck collectives began (the
    watchdog's stamp less its 'ran for N milliseconds') did not stop the job: context, with a note."""
    watchdogs = [(when, sym) for sym in ctx.active() if sym.kind == "watchdog_timeout" and (when := own_time(sym))]
    # every rank of a hang prints the same stamp, 'ran for' and sequence number: each reading counts once, where it
    # last occurs (of equal starts, the stall's walk back meets the last first: _last_stall)
    shown = dict.fromkeys((when, str(sym.fields.get("ran_ms", "")), str(sym.fields.get("seq", "")))
                          for when, sym in reversed(watchdogs))
    starts = [(when - timedelta(milliseconds=int(ran)), int(seq) if seq.isdecimal() else None)
              for when, ran, seq in reversed(shown) if ran.isdecimal()]
    if not starts:
        return 0
    margin = timedelta(seconds=float(rule_.params.get("margin_s", 60)))
    resumed = sorted(when for sym in ctx.active() if sym.kind == "worker_restart" and (when := own_time(sym)))
    began = _last_stall(sorted(starts, key=lambda pair: (pair[0], pair[1] or 0)), margin, resumed)
    ctx.hang = (began, margin)
    reported = min((when for when, _ in watchdogs if when >= began), default=began)
    count = 0
    for sym in ctx.active():
        if not _physical_candidate(sym):
            continue
        latest, own = latest_time(sym), own_time(sym)
        if own is not None and own > reported + margin:
            # the watchdogs had already reported the stuck collectives and the job was being torn down
            _to_context(sym, f"logged {int((own - reported).total_seconds())} s after the job's watchdogs "
                             f"reported its stuck collectives ({format_utc(reported)}): not shown to have caused them")
            count += 1
            continue
        # a file system outage still a candidate never logged its recovery ('server X OK' makes it context): it
        # lasts, and the ranks that do not read from it run on until one does
        if latest is not None and latest < began - margin and sym.category != "storage":
            _to_context(sym, f"the job's collectives ran on until {format_utc(began)}, "
                             f"{int((began - latest).total_seconds())} s after it: not what stopped the job")
        elif sym.category in _LOGGED_AT_ONCE and sym.kind not in _REPORTED_AT_STEP_END and own is not None \
                and own > began + margin:
            _to_context(sym, f"the job's collectives were already stuck at {format_utc(began)}, "
                             f"{int((own - began).total_seconds())} s before it: it did not start the hang")
        else:
            continue
        count += 1
    return count


@rule("filter.fault_after_failure")
def fault_after_failure(ctx: EngineContext, rule_: Rule) -> int:
    """A physical fault stamped well after the launcher recorded the job's failure (see the rule's description)."""
    kinds = set(str_list(rule_, "failure_kinds"))
    reasons = set(str_list(rule_, "cancel_reasons"))  # slurmstepd's end of a step counts when its tasks failed
    # a task's exit srun reported (its line, in the file) before a bare cancel of the step: srun ended the step
    # for that task's failure, as 'DUE TO TASK FAILURE' says in newer releases
    exit_kinds = set(str_list(rule_, "task_exit_kinds"))
    exits = {(s.evidence[0].file, s.evidence[0].line) for s in ctx.active() if s.kind in exit_kinds and s.evidence}
    records = [(when, sym.node) for sym in ctx.active() if sym.kind in kinds and (when := own_time(sym))
               and (sym.kind != "slurm_cancelled" or str(sym.fields.get("reason", "")).upper() in reasons
                    or (not sym.fields.get("reason") and _after_a_task_exit(sym, exits)))]
    if not records:
        return 0
    failed = max(when for when, _ in records)  # the last: an elastic agent restarts its workers after each failure
    failed_nodes = {node for _, node in records}
    margin = timedelta(seconds=float(rule_.params.get("margin_s", 60)))
    skew = ctx.tolerance(ctx.settings.skew_s)
    count = 0
    for sym in ctx.active():
        own = own_time(sym)
        if not _physical_candidate(sym) or own is None:
            continue
        # a device on the failed tasks' own node may be logged as broken a while after they died of it; a fault on
        # another node logged after they failed cannot have made them fail
        elsewhere = sym.node is not None and None not in failed_nodes and sym.node not in failed_nodes
        if own > failed + (skew if elsewhere else margin):
            where = " on another node" if elsewhere else ""
            _to_context(sym, f"logged {int((own - failed).total_seconds())} s after the job's failure was recorded "
                             f"({format_utc(failed)}){where}: not shown to have caused it")
            count += 1
    for sym in ctx.symptoms:
        # a fault just past the job's window (filter.outside_job_window kept it 'near' for FINAL to weigh) that came
        # after the recorded failure as well: no clock doubt puts it before what it would have to explain
        own = own_time(sym)
        if sym.dropped and sym.fields.get("near_window") and "clock_in_doubt" not in sym.fields and own is not None \
                and own > failed + margin:
            del sym.fields["near_window"]
            sym.notes.append(f"also after the job's failure was recorded ({format_utc(failed)}): not near enough")
            count += 1
    return count


def _after_a_task_exit(sym: Symptom, exits: set[tuple[str, int]]) -> bool:
    """Whether this is a step's cancel ('*** STEP J.S ...': a job's is also a user's scancel) and a task's exit
    was reported earlier in its file."""
    ref = sym.evidence[0] if sym.evidence else None
    return ref is not None and "." in str(sym.fields.get("job", "")) \
        and any(file == ref.file and line < ref.line for file, line in exits)


@rule("filter.metric_xid_unlogged")
def metric_xid_unlogged(ctx: EngineContext, rule_: Rule) -> int:
    """A metric's Xid on a node whose kernel log, read whole from a kernel-only source, holds no Xid: context
    (see the rule's description)."""
    kinds = set(str_list(rule_, "metric_kinds"))
    metric = [sym for sym in ctx.active() if sym.kind in kinds and sym.role == "candidate" and sym.node]
    if not metric:
        return 0
    logged = {sym.node for sym in ctx.symptoms if sym.kind == "xid"}  # kept or set aside: the driver saw one
    read = {bf.node for bf in ctx.bundle.files if bf.source == SOURCE_KERNEL}
    count = 0
    for sym in metric:
        node = sym.node
        if node in logged or node not in read or node not in ctx.bundle.kernel_complete \
                or ctx.bundle.kernel_origin(node) not in TRUSTED_KERNEL_ORIGINS:
            continue
        _to_context(sym, f"{node}'s kernel log, collected whole from {ctx.bundle.kernel_origin(node)}, holds no Xid: "
                         "the driver logs every one, so this value is only in the metric's cache (injected into "
                         "DCGM, or older than the window)")
        count += 1
    return count


@rule("filter.after_worker_restart")
def after_worker_restart(ctx: EngineContext, rule_: Rule) -> int:
    """Candidates printed after an elastic agent's restart in a file that shows the failed attempt's own error
    before it: the next attempts' aftermath, cascades (see the rule's description)."""
    restarts: dict[str, int] = {}  # file -> line of its first restart
    for sym in ctx.symptoms:
        if sym.kind == "worker_restart" and sym.evidence:
            ref = sym.evidence[0]
            restarts[ref.file] = min(restarts.get(ref.file, ref.line), ref.line)
    if not restarts:
        return 0
    count = 0
    placed = [(sym, sym.evidence[0]) for sym in ctx.active() if sym.role == "candidate" and sym.evidence
              and sym.evidence[0].file in restarts]
    failed_before = {ref.file for _, ref in placed if ref.line < restarts[ref.file]}
    for sym, ref in placed:
        if ref.file in failed_before and ref.line > restarts[ref.file]:
            sym.role, sym.strength = "cascade", min(sym.strength, 20)
            sym.notes.append(f"printed after the elastic agent restarted the workers ({ref.file}:"
                             f"{restarts[ref.file]}), once the first attempt had failed: the restart's aftermath")
            count += 1
    return count


def _physical_candidate(sym: Symptom) -> bool:
    """A candidate fault of the infrastructure, or a host OOM kill (whoever's memory it was): what the job's
    collectives, progress or launcher can be seen to have outlived."""
    return sym.role == "candidate" and (sym.responsible == "infrastructure" or sym.category == "host_oom")


# a training-progress line: a loss value as trainers log it each step ('loss 2.920', 'lm loss: 9.2E+00',
# "{'loss': 2.1, ...}", 'train_loss=2.1', 'reduced_train_loss=…'); an error line that names a loss is none
_PROGRESS = re.compile(r"(?i)(?<![a-z])(?:[a-z]+[_ ])?loss['\"]?\s*[:=]?\s*['\"]?(?:tensor\()?[-+]?(?:\d|nan\b|inf\b)")
_NOT_PROGRESS = re.compile(r"(?i)error|exception|traceback|warn|fail|abort|timed? ?out|killed")


@rule("filter.printed_oom_report")
def printed_oom_report(ctx: EngineContext, rule_: Rule) -> int:
    """Slurm's report of the kernel's OOM kills (params.kinds), read only from the job's output, about a node whose
    kernel log came whole from a source only the kernel writes and holds no OOM kill of the kernel's: a print.
    Context, with a note."""
    kinds = set(str_list(rule_, "kinds"))
    count = 0
    for sym in ctx.active():
        node = sym.node
        if sym.kind not in kinds or sym.role != "candidate" or not node \
                or any(e.source != SOURCE_APP for e in sym.evidence) \
                or ctx.bundle.kernel_origin(node) not in TRUSTED_KERNEL_ORIGINS or node not in ctx.bundle.kernel_uncut:
            continue
        if any(s.node == node and s.category == "host_oom" and s.evidence and s.evidence[0].source == SOURCE_KERNEL
               for s in ctx.symptoms):
            continue
        _to_context(sym, f"{node}'s kernel log, collected whole from the journal or ring buffer, holds no OOM kill: "
                         "the report is the job's own print")
        count += 1
    return count


@rule("filter.recovered_link_flap")
def recovered_link_flap(ctx: EngineContext, rule_: Rule) -> int:
    """A port that went down where the job's own output tells of no broken connection the link explains: one back
    within params.max_flap_s (fields.back_after_s, set by its decoder) touched nothing the job used; one that stayed
    down (params.kinds) did not either where the job's output holds an error of the workload's own to end it.
    Context, with a note."""
    limit = float(rule_.params.get("max_flap_s", 5))
    kinds = set(str_list(rule_, "kinds"))
    downs = [sym for sym in ctx.active() if sym.role == "candidate" and sym.category == "network"
             and sym.evidence and sym.evidence[0].source == SOURCE_KERNEL
             and (_short_flap(sym, limit) or sym.kind in kinds)]
    if not downs or not any(bf.source == SOURCE_APP and bf.size for bf in ctx.bundle.files):
        return 0  # no output of the job's to tell whether a connection it used broke
    local = set(str_list(rule_, "local_kinds"))
    owner = ctx.ruleset.get("refine.causal_model")
    if owner is None:
        raise RuleError("filter.recovered_link_flap reads refine.causal_model's comm_error class, and that rule is not "
                        "loaded")
    model = CausalModel.from_params(owner.params, owner.where)  # the refine phase sets ctx.causal only later
    output = [sym for sym in ctx.active() if sym.evidence and sym.evidence[0].source == SOURCE_APP]
    # the program's own error (a device assert, an exception of its code) that the job met first: the peers' aborted
    # communicators and timeouts after it are its echo, not a broken link's
    own = sorted(t for sym in output if sym.role == "candidate" and model.program_error(sym)
                 and (t := latest_time(sym) or sym.time) is not None)
    # an error of the workload's own that ends a job: not its user stopping it or its time running out, which a job
    # stalled on a dead link meets as well
    workload = [latest_time(sym) or sym.time for sym in output if sym.role == "candidate"
                and sym.responsible == "workload" and sym.kind not in local
                and sym.category not in ("cancelled", "job_limit")]
    effect = timedelta(seconds=float(rule_.params.get("effect_s", 60)))
    # each word at the earliest it can have been written (an unstamped line's own time, not its upper bound)
    told = [sym.time or latest_time(sym) for sym in output if sym.kind not in local
            and (sym.category == "network" or "comm_error" in model.classes_of(sym))]
    count = 0
    for down in downs:
        # kept by a word of the job's that the broken connection can explain: any before the program's own first
        # error since the port went down (an error the job ran past before it explains nothing after it), and one
        # soon after the port went down (NCCL's transports report a dead QP within seconds)
        first_own = next((t for t in own if down.time is None or t >= down.time), None)
        if any(t is None or first_own is None or t < first_own
               or (down.time is not None and down.time <= t <= down.time + effect) for t in told):
            continue
        if _short_flap(down, limit):
            why = f"the port was back {down.fields['back_after_s']:g} s later"
        elif not told and any(t is None or down.time is None or t >= down.time for t in workload):
            # a port that stayed down: set aside only where the job's output is silent on the network altogether (a
            # stall that outlasts the job's own error still times its collectives out)
            why = "the job's output holds an error of its own"
        else:
            continue  # a port that stayed down, and nothing of the job's own to have ended it: kept
        _to_context(down, f"{why}, and it tells of no network error or stuck collective the link explains: the port "
                          "carried nothing the job used")
        count += 1
    return count


def _short_flap(sym: Symptom, limit: float) -> bool:
    back = sym.fields.get("back_after_s")
    return isinstance(back, (int, float)) and back <= limit


@rule("filter.progress_after_fault")
def progress_after_fault(ctx: EngineContext, rule_: Rule) -> int:
    """An infrastructure fault or host OOM kill the job's training went on past: a stamped progress line (a
    step's loss) more than the margin after it and before the job ended, in the tail of an application log of
    a node that ran in a step with the faulted one, says its collectives kept completing. Context, with a
    note; a file system outage lasts and is kept (as in filter.outlived_fault), and so is a fault the job's
    own watchdog puts at the start of its hang."""
    faults = [sym for sym in ctx.active()
              if _physical_candidate(sym) and sym.category != "storage" and latest_time(sym)]
    margin = timedelta(seconds=float(rule_.params.get("margin_s", 120)))
    end = ctx.job.end or ctx.window_end
    if not faults or end is None or min(t for s in faults if (t := latest_time(s))) + margin >= end:
        return 0  # nothing to outlive, or no room for a step after the earliest fault
    progress = _progress_lines(ctx, int(rule_.params.get("tail_bytes", 1 << 20)), end)
    count = 0
    for sym in faults:
        latest = latest_time(sym)
        if latest is None or (ctx.hang is not None and latest >= ctx.hang[0] - ctx.hang[1]):
            continue  # the watchdog says the collectives got stuck at (or after) it
        seen = [(when, rel) for when, rel, node in progress if _same_step(ctx, node, sym.node)]
        if not seen:
            continue
        when, where = max(seen)
        if when - latest <= margin:
            continue
        _to_context(sym, f"the job logged training progress {int((when - latest).total_seconds())} s after it "
                         f"({where}, {format_utc(when)}): not what stopped the job")
        count += 1
    return count


def _same_step(ctx: EngineContext, progress_node: Optional[str], fault_node: Optional[str]) -> bool:
    """Whether progress logged on ``progress_node`` (None: a combined file) speaks for ``fault_node``: always
    without step records; else only when some step ran on both (a combined file: when every step ran there)."""
    steps = [set(step.nodes) for step in ctx.job.steps if step.nodes]
    if not steps or fault_node is None:
        return True
    if progress_node is None:
        return all(fault_node in nodes for nodes in steps)
    return any(progress_node in nodes and fault_node in nodes for nodes in steps)


def _progress_lines(ctx: EngineContext, tail_bytes: int, end: datetime
                    ) -> list[tuple[datetime, str, Optional[str]]]:
    """The latest stamped training-progress line of each plain application log, inside the job (after its
    start, before its end: a next job's lines appended within the window's tolerance are not the job's), among
    its last ``tail_bytes``: (time, file, the file's node). Each file is read backwards a block at a time until
    one is found: the last steps sit just before the failure's output."""
    found: list[tuple[datetime, str, Optional[str]]] = []
    for bf in ctx.bundle.files:
        if bf.source != SOURCE_APP:
            continue
        timectx = _app_time_context(ctx, bf)
        cut = gutter_cutter(bf.path)
        for raw in _lines_backwards(bf.path, tail_bytes):
            if b"oss" not in raw:
                continue  # no 'loss' in any case: no need to decode it
            text = split_rank(decode(cut(raw[:4096])))[1]
            if not _PROGRESS.search(text) or _NOT_PROGRESS.search(text):
                continue
            when = _own_stamp(text, timectx)
            if when is None or when > end or (ctx.window_start is not None and when < ctx.window_start):
                continue
            found.append((when, bf.rel, bf.node if bf.node in ctx.job.node_set else None))
            break
    return found


def _lines_backwards(path: Path, limit: int, block: int = 64 << 10) -> Iterator[bytes]:
    """The whole lines of the last ``limit`` bytes of the regular file ``path``, last first, read a block at a
    time; nothing from a file that cannot be opened (extraction's coverage says why). A compressed file is
    decompressed from its start (keeping only its last ``limit`` bytes), up to GZ_TAIL_READ_BYTES."""
    if path.suffix == ".gz":
        yield from _gz_lines_backwards(path, limit)
        return
    try:
        handle = open_regular(path)
    except OSError:
        return
    with handle:
        end = os.fstat(handle.fileno()).st_size
        floor = max(0, end - limit)
        carry = b""
        while end > floor:
            start = max(floor, end - block)
            handle.seek(start)
            data = handle.read(end - start) + carry
            end = start
            lines = data.split(b"\n")
            carry = lines[0]  # may continue in the block before
            yield from reversed(lines[1:])
        if floor == 0 and carry:
            yield carry


GZ_TAIL_READ_BYTES = 256 << 20  # a compressed log that decompresses to more is not read for its tail


def _gz_lines_backwards(path: Path, limit: int) -> Iterator[bytes]:
    tail, total = b"", 0
    try:
        with open_evidence(path) as stream:
            while True:
                try:
                    chunk = stream.read(1 << 20)
                except EVIDENCE_READ_ERRORS:
                    break  # a truncated or corrupt archive: its tail is what came before the damage
                if not chunk:
                    break
                total += len(chunk)
                if total > GZ_TAIL_READ_BYTES:
                    return
                tail = (tail + chunk)[-(limit + 1):]
    except OSError:
        return
    lines = tail.split(b"\n")
    if total > limit:
        lines = lines[1:]  # the first is cut: not a whole line
    yield from reversed(lines)


@rule("filter.fault_long_before_end")
def fault_long_before_end(ctx: EngineContext, rule_: Rule) -> int:
    """A GPU or network fault stamped hours before a job that failed ended (see the rule's description)."""
    end = ctx.job.end
    if end is None or ctx.job.state not in set(str_list(rule_, "states")):
        return 0
    # a watchdog that says how long its collective hung (ran for N ms: up to hours where a job sets its timeout
    # so) stretches the time a fault may take to end the job by as much
    hung = max((int(str(s.fields["ran_ms"])) for s in ctx.active()
                if s.kind == "watchdog_timeout" and str(s.fields.get("ran_ms", "")).isdecimal()), default=0)
    limit = timedelta(seconds=float(rule_.params.get("max_before_end_s", 10800))) + timedelta(milliseconds=hung)
    categories = set(str_list(rule_, "categories"))
    count = 0
    for sym in ctx.active():
        when = own_time(sym)
        if sym.role != "candidate" or sym.responsible != "infrastructure" or sym.category not in categories \
                or when is None or end - when <= limit or "clock_in_doubt" in sym.fields:
            continue
        hours = (end - when).total_seconds() / 3600
        _to_context(sym, f"{hours:.1f} h before the job ended {ctx.job.state}: a fault that stops a job's processes or "
                         "its collectives ends it within its timeouts, and this job ran on")
        count += 1
    return count


@rule("filter.exception_long_before_end")
def exception_long_before_end(ctx: EngineContext, rule_: Rule) -> int:
    """A Python exception (or another of params.kinds) the job outlived by far (logged and handled, or a warning's
    traceback) did not end it: it stays as context instead of competing for the root cause."""
    end = ctx.job.end or ctx.window_end
    if end is None:
        return 0
    limit = timedelta(seconds=float(rule_.params.get("max_before_end_s", 900)))
    kinds = set(str_list(rule_, "kinds")) or {"python_exception"}
    count = 0
    for sym in ctx.active():
        if sym.kind not in kinds or sym.role != "candidate":
            continue
        latest = latest_time(sym)
        if latest is not None and end - latest > limit:
            _to_context(sym, f"the job ran on for {int((end - latest).total_seconds())} s after it")
            count += 1
    return count
