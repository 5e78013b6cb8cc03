"""Phase 1, extract: run every extract rule over the bundle's files and turn hits into symptoms."""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import datetime
from typing import Any, Optional

from ..bundle import BundleFile
from ..model import RAW_LINE_CAP, SOURCE_APP, Coverage, EvidenceRef, JobFacts, Symptom
from ..ruleset import Rule
from ..scan import Line, Prefilter, ScanStats, open_evidence, scan_stream
from ..slurm.parse import parsable_rows
from ..slurm.states import FAILED_STATES, normalise
from ..timestamps import ParsedStamp, TimeContext, format_utc, parse_iso, parse_line_time, zone_from_name
from . import prefilter as prefilters
from .context import EngineContext
from .registry import DECODERS, RULES
from .registry import rule as register_rule

_RANK_PREFIX = re.compile(r"\s*(?:\[rank(\d+)\]: ?|\[default(\d+)\]: ?|(\d+): )")
_PORT_SUFFIX = re.compile(r"(?:<\d+>|%[\w.]+|:\d+)+$")
INT_FIELDS = ("code", "rank", "exit_code", "pid", "local_rank", "seq", "link", "task", "signal")


Stream = tuple[Optional[int], Optional[int], Optional[int]]  # (srun label, [rankN], torchrun local rank)


def split_rank(text: str) -> tuple[Optional[Stream], str]:
    """Strip srun ``--label`` (``9: ``), PyTorch (``[rank9]:``) and torchrun (``[default9]:``, a LOCAL
    rank) prefixes; return which stream the line belongs to (None without a prefix) and the rest."""
    label = rank = local = None
    found = False
    while True:
        match = _RANK_PREFIX.match(text)
        if not match:
            return ((label, rank, local) if found else None), text
        found = True
        if match.group(1) is not None and rank is None:
            rank = int(match.group(1))
        elif match.group(2) is not None and local is None:
            local = int(match.group(2))
        elif match.group(3) is not None and label is None:
            label = int(match.group(3))
        text = text[match.end():]


def stream_key(stream: Optional[Stream]) -> Optional[tuple[Optional[int], Optional[int]]]:
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


class AnchorIndex:
    """Which rules a hit line concerns: one regex over the anchors of a source's rules, so a line is
    tested against the rules whose anchors it holds instead of against every rule."""

    def __init__(self, rules: list[Rule]) -> None:
        self.rules = rules
        anchors = sorted({a for r in rules if r.match for a in r.match.anchors}, key=lambda a: (-len(a), a))
        # a lookahead finds an anchor at every position, also one that starts inside another's match
        self._pattern = re.compile("(?=(" + "|".join(re.escape(a.rstrip("\n")) for a in anchors) + "))")
        owners: dict[str, set[int]] = defaultdict(set)
        for index, rule in enumerate(rules):
            for anchor in rule.match.anchors if rule.match else ():
                owners[anchor.rstrip("\n")].add(index)
        # a longer anchor found at a position also stands for every anchor it contains
        self._owners = {a: sorted(set().union(*(owners[b] for b in owners if b in a))) for a in owners}

    def rules_for(self, text: str) -> list[Rule]:
        found: set[int] = set()
        for match in self._pattern.finditer(text):
            found.update(self._owners[match.group(1)])
        return [self.rules[i] for i in sorted(found)]


class Extractor:
    """Holds the per-source rule lists and prefilters; one instance serves many diagnoses."""

    def __init__(self, rules: list[Rule]) -> None:
        self.line_rules: dict[str, list[Rule]] = defaultdict(list)
        self.python_rules: list[Rule] = []
        for rule in rules:
            if rule.match is None:
                self.python_rules.append(rule)
            else:
                self.line_rules[rule.match.source].append(rule)
        self.indexes = {source: AnchorIndex(rs) for source, rs in sorted(self.line_rules.items())}
        self.prefilters: dict[str, Prefilter] = {
            source: prefilters.build([a.encode() for r in rs if r.match for a in r.match.anchors])
            for source, rs in sorted(self.line_rules.items())
        }

    def run(self, ctx: EngineContext) -> None:
        for rule in self.python_rules:
            count = RULES[rule.id](ctx, rule)
            if count:
                ctx.fired[rule.id] += count
        for bf in ctx.bundle.files:
            self._scan_file(ctx, bf)

    def _scan_file(self, ctx: EngineContext, bf: BundleFile) -> None:
        if bf.source == "scheduler":
            return  # read by the scheduler.* Python rules
        cov = ctx.coverage_for(_connector(bf.source))
        cov.files += 1
        rules = self.line_rules.get(bf.source, [])
        if not rules:
            cov.reason = f"collected but not judged: no rule reads {bf.source} files yet"
            return
        timectx = time_context(ctx, bf.node)
        handler = _LineHandler(ctx, bf, self.indexes[bf.source], timectx)
        stats = ScanStats()
        try:
            with open_evidence(bf.path) as stream:
                scan_stream(stream, self.prefilters[bf.source], handler, stats)
        except OSError as exc:
            stats.error = f"cannot read: {exc.strerror or exc}"
        _record_stats(cov, bf, stats, handler.found)


def _connector(source: str) -> str:
    return {"kernel": "kernel_log", "app": "app_log", "metrics": "gpu_metrics", "scheduler": "sacct",
            "diag": "gpu_diag"}.get(
        source, source)


def _record_stats(cov: Coverage, bf: BundleFile, stats: ScanStats, found: int) -> None:
    cov.lines += stats.lines
    cov.bytes += stats.bytes
    cov.symptoms += found
    if stats.error:
        cov.notes.append(f"{bf.rel}: {stats.error}")
    if stats.cut_lines:
        cov.notes.append(f"{bf.rel}: {stats.cut_lines} line(s) longer than 1 MiB cut; the rest not scanned")
    if stats.nul_bytes:
        cov.notes.append(f"{bf.rel}: {stats.nul_bytes} NUL byte(s) (binary garbage or a torn write)")


def time_context(ctx: EngineContext, node: Optional[str]) -> TimeContext:
    """The TimeContext for a node's lines: job window, the node's zone and boot time."""
    facts = ctx.bundle.facts_for(node)
    if facts and facts.timezone:
        zone_name, source = facts.timezone, f"facts/{node}.yaml"
    else:
        zone_name, source = ctx.job.timezone or "UTC", ctx.job.timezone_source
    try:
        zone = zone_from_name(zone_name)
    except ValueError:
        ctx.assumptions.add(f"unknown time zone {zone_name!r}; UTC assumed")
        zone_name, source, zone = "UTC", "default", zone_from_name("UTC")
    label = f"{zone_name} (from {source})" if source != "default" else f"{zone_name} (no zone in the node facts or job)"
    return TimeContext(window_start=ctx.window_start, window_end=ctx.window_end, zone=zone,
                       zone_name=label, boot_time=facts.boot_time if facts else None)


class _LineHandler:
    """Called for every prefilter hit of one file."""

    def __init__(self, ctx: EngineContext, bf: BundleFile, index: AnchorIndex, timectx: TimeContext) -> None:
        self.ctx, self.bf, self.index, self.timectx = ctx, bf, index, timectx
        self.found = 0
        self._seen: dict[Any, tuple[int, ParsedStamp]] = {}  # last stamped hit line per stream_key

    def _infer(self, line: Line, stream: Optional[Stream]) -> Optional[ParsedStamp]:
        """Like :func:`_infer_time`, but stops at the last hit line of the same stream whose stamp is
        already known, so a burst of unstamped hits costs what lies between them, not 200 lines each."""
        known = self._seen.get(stream_key(stream))
        limit = min(200, line.lineno - known[0] - 1) if known else 200
        found = _infer_time(line, stream, self.timectx, limit, want_any=known is None)
        if found is None and known is not None:
            found = known[1]
        if found is not None:
            self._seen[stream_key(stream)] = (line.lineno, found)
        return found

    def __call__(self, line: Line) -> None:
        stream, text = split_rank(line.text) if self.bf.source == SOURCE_APP else (None, line.text)
        stamp: Optional[ParsedStamp] = None
        for rule in self.index.rules_for(text):
            assert rule.match is not None
            match = rule.match.regex.search(text)
            if match is None or (rule.match.exclude and rule.match.exclude.search(text)):
                continue
            if stamp is None:
                stamp = self._stamp(line, text, stream)
            groups = match.groupdict()
            if "time taken from a preceding line" in stamp.assumptions:
                upper = _next_time(line, stream, self.timectx)
                groups["time_inferred"] = "preceding line"
                if upper is not None:
                    groups["time_upper"] = format_utc(upper)
            self._emit(rule, line, text, stream, stamp, groups)

    def _stamp(self, line: Line, text: str, stream: Optional[Stream]) -> ParsedStamp:
        stamp = parse_line_time(text, self.timectx)
        if stamp.time is not None:
            self._seen[stream_key(stream)] = (line.lineno, stamp)
        elif self.bf.source == SOURCE_APP or stamp.fmt == "dmesg_delta":
            inferred = self._infer(line, stream)
            if inferred is not None:
                return ParsedStamp(time=inferred.time, message=stamp.message, fmt=stamp.fmt, host=stamp.host,
                                   uptime=stamp.uptime,
                                   assumptions=(*inferred.assumptions, "time taken from a preceding line"))
        return stamp

    def _emit(self, rule: Rule, line: Line, text: str, stream: Optional[Stream], stamp: ParsedStamp,
              groups: dict[str, Any]) -> None:
        fields = {k: _typed(k, v) for k, v in sorted(groups.items()) if v is not None}
        rank, local = global_rank(stream, self.bf.node, self.ctx.job)
        if rank is None and isinstance(fields.get("rank"), int):
            rank = fields["rank"]
        if local is not None:
            fields["local_rank"] = local
        node = resolve_node(self.ctx, self.bf.node, rank if local is None or rank is not None else None,
                            fields.get("host"))
        evidence = EvidenceRef(source=self.bf.source, node=node, file=self.bf.rel, line=line.lineno,
                               offset=line.offset, time=stamp.time, raw=line.text[:RAW_LINE_CAP])
        emit = rule.emit
        sym = Symptom(kind=str(emit.get("kind", rule.id)), rule_id=rule.id, node=node, time=stamp.time,
                      evidence=[evidence], rank=rank, fields=fields, role=str(emit.get("role", "context")),
                      category=str(emit.get("category", "unknown")),
                      responsible=str(emit.get("responsible", "unknown")),
                      strength=int(emit.get("strength", 0)))
        if "peer" in fields:
            peer = resolve_peer(self.ctx, str(fields["peer"]))
            if peer:
                fields["peer_node"] = peer
        self.ctx.assumptions.update(stamp.assumptions)
        decode = emit.get("decoder")
        if decode and not DECODERS[str(decode)](self.ctx, sym, line, {"text": text, "rule": rule, "stream": stream}):
            return
        if not sym.summary:
            sym.summary = render_summary(str(emit.get("summary", sym.kind)), sym)
        if not sym.actions and emit.get("actions"):
            sym.actions = tuple(str(a) for a in emit["actions"])
        self.ctx.symptoms.append(sym)
        self.ctx.fired[rule.id] += 1
        self.found += 1


def _typed(key: str, value: str) -> Any:
    if key in INT_FIELDS:
        try:
            return int(value)
        except ValueError:
            return value
    return value.strip()


def _infer_time(line: Line, rank: Optional[Stream], timectx: TimeContext, limit: int = 200,
                want_any: bool = True) -> Optional[ParsedStamp]:
    """The stamp of the nearest preceding line of the same rank (or, with ``want_any``, of any line)."""
    fallback: Optional[ParsedStamp] = None
    wanted = stream_key(rank)
    for count, previous in enumerate(line.preceding(limit)):
        if fallback is not None and count > 50:
            break
        prev_rank, rest = split_rank(previous)
        same = stream_key(prev_rank) == wanted
        if not same and (fallback is not None or not want_any):
            continue
        stamp = parse_line_time(rest, timectx)
        if stamp.time is None:
            continue
        if same:
            return stamp
        if fallback is None and want_any:
            fallback = stamp
    return fallback


def _next_time(line: Line, rank: Optional[Stream], timectx: TimeContext) -> Optional[datetime]:
    """The stamp of the next line of the same rank (else of any rank): an upper bound for an
    unstamped line."""
    fallback: Optional[datetime] = None
    wanted = stream_key(rank)
    for count, following in enumerate(line.following(100)):
        if fallback is not None and count > 20:
            break
        next_rank, rest = split_rank(following)
        same = stream_key(next_rank) == wanted
        if not same and fallback is not None:
            continue
        stamp = parse_line_time(rest, timectx)
        if stamp.time is None:
            continue
        if same:
            return stamp.time
        fallback = fallback or stamp.time
    return fallback


def resolve_node(ctx: EngineContext, file_node: Optional[str], rank: Optional[int],
                 host: Any) -> Optional[str]:
    """Host named in the line, else the rank's node, else the node the file belongs to."""
    if isinstance(host, str) and host:
        named = match_node(ctx.job.nodes, host)
        if named:
            return named
    if rank is not None:
        mapped = ctx.job.rank_node(rank)
        if mapped:
            return mapped
    if file_node is None and len(ctx.job.nodes) == 1:
        return ctx.job.nodes[0]  # a one-node job: whatever happened, happened there
    return file_node


def match_node(nodes: tuple[str, ...], name: str) -> Optional[str]:
    """``node-03`` or ``node-03.cluster.example`` → ``node-03`` when it is one of ``nodes``."""
    if name in nodes:
        return name
    short = name.split(".", 1)[0]
    return short if short in nodes else None


def resolve_peer(ctx: EngineContext, peer: str) -> Optional[str]:
    """An NCCL/IB peer (``10.0.0.3<54862>``, ``fe80::1%ib0<5>``, ``node-03``) → a job node."""
    bare = _PORT_SUFFIX.sub("", peer.strip()) if "<" in peer or "%" in peer else peer.strip()
    return match_node(ctx.job.nodes, bare) or ctx.job.node_for_address(bare)


class _Defaults(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return ""


def render_summary(template: str, sym: Symptom) -> str:
    values = _Defaults(sym.fields)
    values.update(kind=sym.kind, node=sym.node or "?", rank="?" if sym.rank is None else sym.rank,
                  gpu=sym.gpu or "?")
    try:
        return template.format_map(values)[:300]
    except (ValueError, IndexError, KeyError, AttributeError):
        return template[:300]


def latest_time(sym: Symptom) -> Optional[datetime]:
    """The latest the symptom can have happened: its own stamp, or the upper bound of an unstamped
    line (the next stamped line of the same rank); None when an unstamped line has no bound."""
    upper = sym.fields.get("time_upper")
    if isinstance(upper, str):
        return parse_iso(upper)
    return None if sym.fields.get("time_inferred") else sym.time


@register_rule("scheduler.job_state")
def job_state(ctx: EngineContext, rule_: Rule) -> int:
    """The job's final state and exit codes from job.yaml / sacct, as a symptom with its evidence."""
    job = ctx.job
    if not job.state and job.job_id == "unknown":
        return 0
    line = _job_yaml_line(ctx, "state")
    raw = f"state: {job.state} exit_code: {job.exit_code} derived_exit_code: {job.derived_exit_code}"
    evidence = EvidenceRef(source="scheduler", node=None, file="job.yaml", line=line, offset=0,
                           time=job.end, raw=raw)
    ctx.symptoms.append(Symptom(kind="job_state", rule_id=rule_.id, node=None, time=job.end, evidence=[evidence],
                                fields={"state": job.state, "exit_code": job.exit_code,
                                        "derived_exit_code": job.derived_exit_code},
                                role="context", summary=f"slurm job state {job.state or '?'} "
                                f"exit {job.exit_code} derived {job.derived_exit_code}"))
    return 1


def _job_yaml_line(ctx: EngineContext, key: str) -> int:
    try:
        with open_evidence(ctx.bundle.root / "job.yaml") as handle:
            for number, raw in enumerate(handle.read(1 << 20).splitlines(), start=1):
                if raw.lstrip().startswith(key.encode() + b":"):
                    return number
    except OSError:
        pass
    return 0


@register_rule("scheduler.sacct_steps")
def sacct_steps(ctx: EngineContext, rule_: Rule) -> int:
    """Failed steps from ``sacct --parsable2`` output in the bundle (``sacct/*.txt``, header line
    first), each with its file and line as evidence."""
    count = 0
    for bf in ctx.bundle.files:
        if bf.source != "scheduler" or not bf.rel.endswith(".txt"):
            continue
        cov = ctx.coverage_for("sacct")
        cov.files += 1
        try:
            with open_evidence(bf.path) as handle:
                lines = handle.read(4 << 20).decode("utf-8", errors="replace").splitlines()
        except OSError as exc:
            cov.notes.append(f"{bf.rel}: cannot read: {exc.strerror or exc}")
            continue
        cov.lines += len(lines)
        found = _sacct_records(ctx, rule_, bf.rel, lines)
        cov.symptoms += found
        count += found
    return count


def _sacct_records(ctx: EngineContext, rule_: Rule, rel: str, lines: list[str]) -> int:
    found = 0
    for parsed in parsable_rows(lines):
        row = parsed.cells
        step, state = row.get("jobid", ""), normalise(row.get("state", ""))
        if "." not in step or state not in FAILED_STATES:
            continue
        evidence = EvidenceRef(source="scheduler", node=None, file=rel, line=parsed.number, offset=0, time=None,
                               raw=parsed.line[:RAW_LINE_CAP])
        fields = {"step": step, "state": state, "exit_code": row.get("exitcode", ""),
                  "nodelist": row.get("nodelist", "")}
        ctx.symptoms.append(Symptom(kind="step_state", rule_id=rule_.id, node=None, time=None, evidence=[evidence],
                                    fields=fields, role="context",
                                    summary=f"step {step} {state.lower()} exit {fields['exit_code']}"))
        found += 1
    return found
