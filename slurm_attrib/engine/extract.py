"""Phase 1, extract: run every extract rule over the bundle's files and turn hits into symptoms."""

from __future__ import annotations

import csv
import functools
import json
import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any, Optional

from ..bundle import TRUSTED_KERNEL_ORIGINS, BundleFile
from ..model import (
    RAW_LINE_CAP,
    SOURCE_APP,
    SOURCE_KERNEL,
    TRUST_KERNEL,
    TRUST_UNVERIFIED,
    Coverage,
    EvidenceRef,
    Symptom,
    connector_of,
)
from ..ruleset import Rule
from ..scan import (
    ANY_RULE,
    EVIDENCE_READ_ERRORS,
    Line,
    Prefilter,
    ScanStats,
    anchor_regex,
    fold_bytes,
    open_evidence,
    scan_stream,
    will_count,
)
from ..timestamps import (
    JOURNAL_JSON_MAX,
    JOURNAL_RECORD_FORMATS,
    SYSLOG_FORMATS,
    ParsedStamp,
    TimeContext,
    format_utc,
    from_epoch_micros,
    journal_tag,
    journal_text,
    json_object,
    parse_iso,
    parse_line_time,
    since_boot,
)
from . import prefilter as prefilters
from .context import EngineContext
from .fanout import extract_files
from .leadgate import Screened, gated
from .nodes import job_node, match_node, place_ranks, resolve_node, resolve_peer
from .prefilter import folded_anchors, folds_case
from .ranks import (
    COLLECTED_HOST_PATTERN,
    Stream,
    after_log_prefix,
    global_rank,
    pg_rank,
    prefix_address,
    prefix_host,
    quote_end,
    shipped_stamp,
    split_rank,
    stream_key,
)
from .registry import DECODERS, RULES
from .timeinfer import LineStamps, infer_time, next_time, shift_time, time_context

INT_FIELDS = frozenset(("code", "rank", "exit_code", "pid", "local_rank", "seq", "link", "task", "signal"))


_ALIASED_GROUP = re.compile(r"\(\?P<\w+__\d+>")


# a field of a `journalctl -o verbose` / `-o export` record other than its MESSAGE: what journald noted about the
# writer (_CMDLINE, _COMM, _EXE, SYSLOG_IDENTIFIER ...), which a user shapes (`logger ... NVRM: Xid 48 ...` puts
# the forged words in _CMDLINE too), never a line the kernel wrote
_JOURNAL_METADATA = re.compile(r"[ \t]*(?!MESSAGE=)_{0,2}[A-Z][A-Z0-9_]{0,63}=")


# a `journalctl -o verbose` record's own lines: its header ('Fri 2025-04-04 10:14:52.318405 UTC [s=...;i=...]') and
# its indented 'FIELD=value' lines, MESSAGE's included
_JOURNAL_RECORD_LINE = re.compile(r"[ \t]+_{0,2}[A-Z][A-Z0-9_]{0,63}=|\w{3} \d{4}-\d\d-\d\d [\d:.]+ \S+ \[s=")


def _continues_a_journal_field(line: Line, text: str) -> bool:
    """Whether a kernel-source line that is none of a verbose journal record's own lines sits inside one: the
    next line of a field whose value held a newline (a user's `logger` message 'x\\nNVRM: Xid ...' prints its
    second line there), which is the field's writer's, not a line the kernel wrote."""
    if _JOURNAL_RECORD_LINE.match(text):
        return False
    for previous in line.preceding(64):
        if _JOURNAL_RECORD_LINE.match(previous):
            return True
        if _STAMPED_LINE.match(previous):
            return False  # a stamped line of another form before any record's line: not inside a record
    return False


# the start of a line a log format stamps (syslog's month, ISO dates, dmesg's uptime, a priority): not a field's
_STAMPED_LINE = re.compile(r"(?:\d{4}-\d\d-\d\d|[A-Z][a-z]{2} [ \d]\d |\[\s*\d+\.\d+\]|<\d{1,3}>)")


class AnchorIndex:
    """Which rules a hit line concerns: one regex over the anchors of a source's rules, so a line is
    tested against the rules whose anchors it holds instead of against every rule."""

    def __init__(self, rules: list[Rule]) -> None:
        self.rules = rules
        self._anchors = sorted({a for r in rules if r.match for a in r.match.anchors}, key=lambda a: (-len(a), a))
        # a rule whose regex ignores case ('(?i)') has its anchors found in any case too: the NGC banner's
        # 'System not yet initialized (error 802)' holds the anchor 'system not yet initialized'
        self._folds = [folds_case(r) for r in rules]
        self._folded = folded_anchors(rules)
        self._plain = [tuple(_case(a, fold) for a in _anchors(r) if not a.endswith("\n"))
                       for r, fold in zip(rules, self._folds)]
        self._line_end = [tuple(_case(a.rstrip("\n"), fold) for a in _anchors(r) if a.endswith("\n"))
                          for r, fold in zip(rules, self._folds)]
        self.aliased = frozenset(r.id for r in rules if r.match and _ALIASED_GROUP.search(r.match.pattern))
        self._selected_memo: dict[str, list[int]] = {}

    # The two regexes over all anchors are compiled when first needed (the ``re`` prefilter, an anchor
    # that ends a line): with Hyperscan most runs never need them, and every start would pay for them.
    @cached_property
    def _pattern(self) -> re.Pattern[str]:
        # a lookahead finds an anchor at every position, also one that starts inside another's match
        return re.compile("(?=(" + "|".join(_folding(re.escape(a.rstrip("\n")), a in self._folded)
                                            for a in self._anchors) + "))")

    @cached_property
    def _owners(self) -> dict[str, list[int]]:
        """Anchor as written -> the rules it selects (without the case-folding rules, see :meth:`_selected`)."""
        owners: dict[str, set[int]] = defaultdict(set)
        for index, rule in enumerate(self.rules):
            for anchor in rule.match.anchors if rule.match else ():
                if not self._folds[index]:
                    owners[anchor.rstrip("\n")].add(index)
        # a longer anchor found at a position also stands for every anchor it contains
        return {a: sorted(set().union(*(owners[b] for b in owners if b in a))) for a in owners}

    @cached_property
    def _folded_owners(self) -> list[tuple[str, int]]:
        return sorted((a.rstrip("\n").lower(), i) for i, r in enumerate(self.rules) if self._folds[i]
                      for a in _anchors(r))

    def _selected(self, found: str) -> list[int]:
        """The rules an anchor found as ``found`` selects: those whose anchors it holds as written, and the
        case-folding ones whose anchors it holds in any case (remembered per text found: a log repeats them)."""
        cached = self._selected_memo.get(found)
        if cached is None:
            exact = self._owners.get(found)
            if exact is None:  # found by a folded anchor in another case: the exact anchors it holds, looked up
                exact = sorted({i for a, owners in self._owners.items() if a in found for i in owners})
            lowered = found.lower()
            cached = sorted({*exact, *(i for a, i in self._folded_owners if a in lowered)})
            if len(self._selected_memo) < 4096:
                self._selected_memo[found] = cached
        return cached

    @cached_property
    def _any_anchor(self) -> re.Pattern[bytes]:
        return re.compile(b"|".join(fold_bytes(anchor_regex(a.encode()), a in self._folded) for a in self._anchors))

    def rules_for(self, text: str) -> list[Rule]:
        found: set[int] = set()
        owners = self._owners
        for match in self._pattern.finditer(text):
            anchor = match.group(1)
            found.update(self._selected(anchor) if self._folded else owners[anchor])
        return [self.rules[i] for i in sorted(found)]

    def candidates(self, line: Line, text: str) -> list[Rule]:
        """The rules to try on a hit line: those its anchors select, of the rules the prefilter named.

        A line holding an anchor of the source lets each rule whose anchor (newline dropped) is in
        its text try; whichever prefilter picked the line, that is the test, so both give the same
        symptoms. A rule's own anchor in the text implies the line held an anchor, except for an
        anchor that ends a line: then the line's bytes are asked."""
        if ANY_RULE in line.rules:
            return self.rules_for(text)
        return [self.rules[i] for i in sorted(line.rules) if self._admits(i, line, text)]

    def _admits(self, index: int, line: Line, text: str) -> bool:
        if self._folds[index]:
            text = text.lower()
        for anchor in self._plain[index]:  # plain loops: this runs for every rule of every hit line
            if anchor in text:
                return True
        for anchor in self._line_end[index]:
            if anchor in text:
                return line.holds(self._any_anchor)
        return False


def _anchors(rule: Rule) -> tuple[str, ...]:
    return rule.match.anchors if rule.match else ()


def _case(anchor: str, fold: bool) -> str:
    return anchor.lower() if fold else anchor


def _folding(pattern: str, fold: bool) -> str:
    """``pattern`` made to ignore case where ``fold``."""
    return f"(?i:{pattern})" if fold else pattern


class Extractor:
    """Holds the per-source rule lists and prefilters; one instance serves many diagnoses."""

    def __init__(self, rules: list[Rule]) -> None:
        self.line_rules: dict[str, list[Rule]] = defaultdict(list)
        self.python_rules: list[Rule] = []
        for rule in rules:
            if rule.match is None:
                self.python_rules.append(rule)
            else:
                for source in (rule.match.source, *rule.match.also_in):
                    self.line_rules[source].append(rule)
        self.indexes = {source: AnchorIndex(rs) for source, rs in sorted(self.line_rules.items())}
        self.plans = {rule.id: EmitPlan.of(rule) for rs in self.line_rules.values() for rule in rs}
        # each rule's regex behind its lead gate and its exclude screened (leadgate), made on the rule's first
        # candidate line: a run tries a few of the hundreds, and compiling all would cost every start ~0.3 ms a rule
        self.searchers: dict[str, Searcher] = {}
        self.prefilters: dict[str, Prefilter] = {
            source: prefilters.build(rs) for source, rs in sorted(self.line_rules.items())}

    def run(self, ctx: EngineContext) -> None:
        for rule in self.python_rules:
            count = RULES[rule.id](ctx, rule)
            if count:
                ctx.fired[rule.id] += count
        extract_files(ctx, ctx.bundle.files, self._scan_file, prepare=will_count)
        place_ranks(ctx.symptoms)
        correct_clocks(ctx)
        apply_clock_offsets(ctx)

    def _scan_file(self, ctx: EngineContext, bf: BundleFile) -> None:
        rules = self.line_rules.get(bf.source, [])
        scheduler = bf.source == "scheduler"  # sacct/*: scheduler.* Python rules count its files and lines
        if scheduler and not rules:
            return
        cov = ctx.coverage_for(connector_of(bf.source))
        if not scheduler:
            cov.files += 1
        if not rules:
            cov.reason = f"collected but not judged: no rule reads {bf.source} files yet"
            return
        timectx = time_context(ctx, bf.node)
        handler = _LineHandler(ctx, bf, self.indexes[bf.source], timectx, self.plans, self.searchers)
        stats = ScanStats()
        try:
            with open_evidence(bf.path) as stream:
                scan_stream(stream, self.prefilters[bf.source], handler, stats)
        except EVIDENCE_READ_ERRORS as exc:  # a compressed file corrupt from its first block, too
            stats.error = f"cannot read: {getattr(exc, 'strerror', None) or exc}"
        stats.symptom_lines = handler.symptom_lines
        _record_stats(cov, bf, stats, handler.found, count_lines=not scheduler)
        cov.notes.extend(handler.refused.notes(bf.rel))
        cov.notes.extend(handler.caps.notes(bf.rel))
        cov.notes.extend(handler.notes(bf.rel))
        ctx.scan.add(stats)


def _record_stats(cov: Coverage, bf: BundleFile, stats: ScanStats, found: int, count_lines: bool = True) -> None:
    stats.symptoms = found
    if count_lines:
        cov.lines += stats.lines
        cov.bytes += stats.bytes
    cov.symptoms += found
    if stats.error:
        cov.notes.append(f"{bf.rel}: {stats.error}")
    if stats.cut_lines:
        cov.notes.append(f"{bf.rel}: {stats.cut_lines} line(s) longer than 1 MiB cut; the rest not scanned")
    if stats.nul_bytes:
        cov.notes.append(f"{bf.rel}: {stats.nul_bytes} NUL byte(s) (binary garbage or a torn write)")


@dataclass(frozen=True)
class EmitPlan:
    """A rule's ``emit`` block read once, so a symptom costs no dictionary look-ups and conversions."""

    kind: str
    role: str
    category: str
    responsible: str
    strength: int
    summary: Optional[str]  # None: the summary is the symptom's kind (after any decoder renamed it)
    actions: tuple[str, ...]
    decoder: Optional[str]

    @classmethod
    def of(cls, rule: Rule) -> EmitPlan:
        emit = rule.emit
        decoder = emit.get("decoder")
        return cls(kind=str(emit.get("kind", rule.id)), role=str(emit.get("role", "context")),
                   category=str(emit.get("category", "unknown")),
                   responsible=str(emit.get("responsible", "unknown")), strength=int(emit.get("strength", 0)),
                   summary=str(emit["summary"]) if "summary" in emit else None,
                   actions=tuple(str(a) for a in emit["actions"]) if emit.get("actions") else (),
                   decoder=str(decoder) if decoder else None)


class SymptomCaps:
    """How many symptoms one file may make: ``per_rank`` of one rule per rank of an application log (the
    file's unprefixed lines are one rank) or per device and code of a kernel log (Xid 13 spam on one GPU
    must not crowd out the Xid 79 of another), ``per_rule`` of one rule in all. A job that prints `Bus
    error` 175,000 times costs its first lines' symptoms and a count, not 175,000 objects; the first lines
    in file order are the ones kept, so the result is the same whatever the worker count."""

    def __init__(self, per_rank: int, per_rule: int) -> None:
        self.per_rank, self.per_rule = per_rank, per_rule
        self._by_rank: dict[tuple[str, Any], int] = {}
        self._by_rule: dict[str, int] = {}
        self.dropped: dict[str, int] = {}

    def admit(self, rule_id: str, which: Any) -> bool:
        key = (rule_id, which)
        rank_count = self._by_rank.get(key, 0)
        rule_count = self._by_rule.get(rule_id, 0)
        if rank_count >= self.per_rank or rule_count >= self.per_rule:
            self.dropped[rule_id] = self.dropped.get(rule_id, 0) + 1
            return False
        self._by_rank[key] = rank_count + 1
        self._by_rule[rule_id] = rule_count + 1
        return True

    def notes(self, rel: str) -> list[str]:
        return [f"{rel}: {count} more line(s) of rule {rule_id} past the caps ({self.per_rank} per rank, "
                f"{self.per_rule} per file: engine.max_symptoms_per_rank / _per_rule), counted, not kept"
                for rule_id, count in sorted(self.dropped.items())]


# the words of KernelLines' coverage notes for the kernel-looking lines it refused, which outcome looks for per file
REFUSED_AS_EVIDENCE = "refused as evidence"
# the words of a refusal for the line's host (another node's, or a machine's outside the job): the only refusal that
# may hide a kernel line of the file's node, so a file with one is not taken as holding all of the node's lines
HOST_REFUSAL = "named inside"


class KernelLines:
    """Whether a kernel-rule match is the kernel's word about this file's node, and how far it is trusted.

    A syslog line names the program that wrote it (``host tag: message``). The kernel's tag is ``kernel``;
    a kernel message whose first word reads as a tag (``node-01 NVRM: Xid ...``, from a forwarder that
    dropped it) has the match starting inside that "tag". Text a rule matches *after* another program's
    tag (``alice[4242]: NVRM: Xid ...``, what ``logger`` writes) is that program's, not the kernel's: refused.
    A line whose host is another node of the job, inside a file of one node, is not about that node: refused.
    What is kept is ``kernel`` when only the kernel can have written it (a dmesg line, or a ``kernel:`` line
    in a kernel-only source), else ``unverified``: a tagless line, or any line of a mixed syslog file."""

    def __init__(self, ctx: EngineContext, bf: BundleFile) -> None:
        self.nodes = ctx.job.node_set
        self.own = bf.node if bf.node in self.nodes else None
        facts = ctx.bundle.facts_for(self.own)
        # what the node calls itself in its own syslog: its NodeName, and its hostname where that differs
        self.aliases = {name.split(".", 1)[0].lower() for name in (self.own, facts.hostname if facts else None)
                        if name} | _ANONYMOUS_HOSTS
        origin = ctx.bundle.kernel_origin(bf.node)
        self.trusted_file = origin == "" or origin in TRUSTED_KERNEL_ORIGINS  # "": a bundle made by hand
        # the epilog read it from the node's own journal or ring buffer: a host name in it that is not the
        # node's NodeName is the node's name for itself (a cloud VM's ip-10-0-1-17), not another machine
        self.own_origin = origin in TRUSTED_KERNEL_ORIGINS or origin == "kern-file"  # the node's own files
        # `journalctl -k` prints the kernel's own records as 'kernel:'; one with another identifier is a program's
        # write to /dev/kmsg (journald-kmsg.c takes its identifier from the text: 'NVRM: Xid ...' shows as NVRM)
        self.journal_file = origin == "journald"
        self.counts: dict[str, list[Any]] = {}  # reason -> [count, first line number]
        # (block, line start, its record's head, the line's lead): the last further line's record
        self._head_memo: Optional[tuple[bytes, int, Optional[str], str]] = None

    def trust(self, line: Line, text: str, stamp: ParsedStamp, match_start: int,
              programs: frozenset[str] = frozenset()) -> Optional[str]:
        """TRUST_KERNEL or TRUST_UNVERIFIED, or None (refused; counted for the coverage notes). A line that a
        program the rule reads (``match.programs``: a daemon such as nv-fabricmanager) tagged is that
        program's word: unverified, since any local user can write that tag too (``logger -t``)."""
        tag = stamp.tag
        if programs and tag is not None and tag.split("[", 1)[0] in programs:
            return None if self._host_refused(line, stamp) else TRUST_UNVERIFIED
        if stamp.facility not in (None, 0):  # a program's, whatever its tag says: the kernel writes facility 0 only
            self._refuse(f"written with syslog facility {stamp.facility}, not the kernel's (0)", line)
            return None
        if _COPIES_USER_TEXT.search(text, 0, match_start):
            self._refuse("after the head of a kernel message that copies a process's command line or file name", line)
            return None
        if _inside_quotes(text, stamp, match_start):
            self._refuse("inside a quoted string of a kernel message (a name or value it copied from a process)", line)
            return None
        kernels = not programs or not stamp.fmt or stamp.fmt in _KERNEL_RING_FORMATS or tag == "kernel"
        if kernels and (copied := _after_copied_text(text, stamp, match_start)) is not None:
            # (a daemon's own log, which a rule with match.programs reads, is no kernel message: its lines are read so
            # only where they are not the kernel's own: a dmesg capture's, an unstamped one's or the kernel's tag)
            self._refuse(f"inside a kernel message, after {copied}", line)
            return None
        indented = line.text[len(line.lead):][:1].isspace()
        head = self._record_head(line) if indented else None
        if indented and head is None and _out_of_reach_further_line(text, self.own_origin):
            # a further line whose record's first line is out of reach (a record cut into hundreds of lines, or a file
            # whose first lines the collector's cap cut away): what the record's head says cannot be read
            self._refuse("a further line of a record whose first line is out of reach", line)
            return None
        if head is not None and _stamped_itself(text) and _under_its_message(head, text):
            # journalctl and dmesg indent a record's further lines under its first, and they are its message's text:
            # one that carries a stamp of its own was written so, inside text the record copied (a log pasted
            # indented as a whole has no first line out of the indent)
            self._refuse("an indented further line of a record that carries a stamp of its own", line)
            return None
        if head is not None and (_COPIES_USER_TEXT.search(head) or _leaves_quote_open(head) or _programs_record(head)):
            # journalctl and dmesg indent a message's further lines under its first: a newline inside the text a
            # process chose (a mount option, an xattr, a program's own multi-line message) makes a line of its own
            # that only its record's head betrays
            self._refuse("a further line of a record whose head copies a process's text or is a program's", line)
            return None
        if kernels and _continues_copied_text(line, text, stamp):
            # dmesg read through syslog(2) (dmesg -S, BusyBox) stamps every line of a record alike: a newline in the
            # text a process chose starts a line that looks like a record of its own
            self._refuse("a line with its record's stamp after a line that copies a process's text", line)
            return None
        verified = self.trusted_file
        if (stamp.fmt in JOURNAL_RECORD_FORMATS or stamp.fmt == EXPORT_RECORD) and tag != "kernel":
            if tag is not None:  # the journal says which program wrote the record, wherever the match lies
                self._refuse(f"written by a program (tag {_short(tag)}), not by the kernel", line)
                return None
            verified = False
        elif stamp.fmt in ("journal_field", EXPORT_RECORD):
            # read line by line, an export or verbose record can be forged by a message that spans lines
            # (export writes such a message's bytes as they are): explains, never drains
            verified = False
        elif stamp.fmt in SYSLOG_FORMATS and tag != "kernel":
            if tag is not None and (self.journal_file or match_start >= len(text) - len(stamp.message)):
                self._refuse(f"written by a program (tag {_short(tag)}), not by the kernel", line)
                return None
            verified = False  # no tag, or the kernel's own text where a tag belongs (`logger -t NVRM` too)
        elif stamp.fmt == "dmesg_uptime" and (monotonic := _MONOTONIC_HEAD.match(stamp.message)) is not None \
                and monotonic.group(1).split(".", 1)[0].lower() in self.aliases and monotonic.group(2) != "kernel":
            # journalctl -o short-monotonic of the whole journal: '[ 856341.77] node-01 alice[42]: NVRM: ...' is
            # the node's own host name, then the program that wrote the line
            if match_start >= len(text) - len(stamp.message) + monotonic.end():
                self._refuse(f"written by a program (tag {_short(monotonic.group(2))}), not by the kernel", line)
                return None
            verified = False
        if self._host_refused(line, stamp):
            return None
        return TRUST_KERNEL if verified else TRUST_UNVERIFIED

    def _record_head(self, line: Line) -> Optional[str]:
        """:func:`_record_head`, remembered while the hits of a block stay under the same first line (no line
        between begins out of the indent): an indented log (a paste, a long record) would otherwise walk the same
        lines back for every hit in it. Within a block the first line is so followed however far above it is."""
        buffer = line.buffer
        memo = self._head_memo
        if memo is not None and memo[0] is buffer and memo[1] < line.start and memo[3] == line.lead \
                and _UNINDENTED_LINE.search(buffer, max(0, memo[1] - 1), line.start) is None:
            self._head_memo = (buffer, line.start, memo[2], line.lead)
            return memo[2]
        head = _record_head(line)
        self._head_memo = (buffer, line.start, head, line.lead)
        return head

    def _host_refused(self, line: Line, stamp: ParsedStamp) -> bool:
        """The line's own host is not the file's node (refused, and counted): another node of the job, or a
        host outside it (a forwarded line of another machine in this node's file) that is none of the
        node's own names (its NodeName, its facts' hostname, localhost), unless the epilog read the file
        from the node's own journal or ring buffer."""
        if self.own and isinstance(stamp.host, str) and stamp.host:
            named = match_node(self.nodes, stamp.host)
            if named is not None and named != self.own:
                self._refuse(f"host {named} {HOST_REFUSAL} {self.own}'s log", line)
                return True
            if named is None and not self.own_origin and stamp.host.split(".", 1)[0].lower() not in self.aliases \
                    and not _PLACEHOLDER_HOST.fullmatch(stamp.host):
                self._refuse(f"host {_short(stamp.host)}, not a node of the job, {HOST_REFUSAL} {self.own}'s log",
                             line)
                return True
        return False

    def _refuse(self, reason: str, line: Line) -> None:
        seen = self.counts.setdefault(reason, [0, line.lineno])
        seen[0] += 1

    def notes(self, rel: str) -> list[str]:
        return [f"{rel}: {count} kernel-looking line(s) {REFUSED_AS_EVIDENCE}: {reason} (first: line {first})"
                for reason, (count, first) in sorted(self.counts.items())]




# the names a node's own syslog may give it when its hostname is not set
_ANONYMOUS_HOSTS = frozenset({"localhost", "localhost.localdomain", "(none)", "-"})
# a host a person masked before posting the log ("...", "xxx", "<hostname>", "[redacted]"): no other machine
_PLACEHOLDER_HOST = re.compile(r"(?i)[\W_]*|x{2,}|<[^>]{0,40}>|\[[^\]]{0,40}\]|\{[^}]{0,40}\}|(?:my)?host(?:name)?|"
                               r"redacted|masked|hidden|node|server|machine")


def _short(text: str) -> str:
    return repr(text[:40])


# kernel messages that copy what a process chose (its command line, its file's name) into the kernel's own line:
# Yama's 'ptrace attach of "<cmdline>"[pid] was attempted by "<cmdline>"[pid]' (security/yama/yama_lsm.c), exec's
# "process '<path>' launched '<path>' with NULL argv" (fs/exec.c), a crash report's '<comm>[pid]: segfault at ... in
# <file>[...]' and 'traps: <comm>[pid] general protection fault ... in <file>' (arch/x86/mm/fault.c, kernel/traps.c),
# the audit records' comm=, exe= and proctitle= fields, NFSv4's 'state recovery failed for open file <dir/file>'
# (fs/nfs/nfs4state.c, the file's last two path components), the pids controller's 'fork rejected by pids controller
# in <cgroup path>' (kernel/cgroup/pids.c: a directory a user names under its own systemd slice), the mount API's
# '<fs>: Unknown parameter '<key>'' and 'Bad value for '<key>'' (fs/fs_context.c: any user mounts tmpfs or cgroup2 in
# a user namespace), overlayfs' 'failed to resolve '<path>'', and the memory controller's cgroup paths ('oom_memcg=',
# 'task_memcg=', 'Memory cgroup stats for ', 'Task in <path> killed'; mm/memcontrol.c), the OOM summary's cpuset
# ('oom-kill:...,cpuset=<cgroup name>,', before 4.19 '<comm> cpuset=<name> mems_allowed='; kernel/cgroup/cpuset.c: a
# cgroup v1 step's cgroup belongs to the job's user), tmpfs' 'Bad mount option <option>' before 5.4 (mm/shmem.c) and
# overlayfs' 'invalid redirect (<xattr>)' (a user's overlay in its namespace), and the heads hostile rounds found
# since: exec's 'process '<path>' started with executable stack', overlayfs' 'invalid origin (<dir>/<name>', x86's
# 'bad frame in' and 'control protection ip:' reports, the other architectures' crash reports (arm64's 'unhandled
# exception:', riscv's 'unhandled signal N code', powerpc's '<signal> (N) at ... nip', s390's 'User process fault:'),
# direct I/O's 'File: <path> PID:', cgroup2's, procfs' and
# overlayfs' 'unknown option "<opt>"' / 'unrecognized mount option "<opt>"'. A rule's words after such a
# head are the user's, wherever the line came from; the head is looked for before the match, in any wrapping (a JSON
# member, an export's field)
_COPIES_USER_TEXT = gated(re.compile(r'ptrace (?:attach|traceme|read|write) of "|\bprocess \''
                                     r'|invalid origin \(|\bbad frame in |\bcontrol protection ip:|\bFile: /'
                                     r'|\]: unhandled (?:exception: |signal \d{1,3} code )'
                                     r'|\]: [\w ]{1,40} \(\d{1,3}\) at [0-9a-f]{1,16} nip '
                                     r'|\bUser process fault: '
                                     r'|\b(?:unknown|[Uu]nrecognized mount) option "'
                                     r"|\[\d{1,10}\]: segfault at [0-9a-f]{1,16} |\btraps: \S{1,64}\[\d{1,10}\] "
                                     r"|\baudit[:(]|\btype=\d{1,5} audit\(|\b(?:comm|exe|proctitle|cmd)="
                                     r"|state recovery failed for open file |fork rejected by pids controller in "
                                     r"|Unknown parameter '|Bad value for '|failed to resolve '|\b(?:oom|task)_memcg="
                                     r"|Memory cgroup stats for |\bTask in /|\bcpuset=|Bad mount option "
                                     r"|invalid redirect \("))


def _programs_record(head: str) -> bool:
    """Whether a record's first line says a program wrote it (a syslog tag other than the kernel's, a facility
    other than 0)."""
    stamp = parse_line_time(head, TimeContext())
    return (stamp.tag is not None and stamp.tag != "kernel") or stamp.facility not in (None, 0)


def _record_head(line: Line) -> Optional[str]:
    """The first line of the record an indented line continues: the nearest line above that is not indented (over
    the record's other further lines, blank ones too, whatever stamps they carry), or None."""
    for text in line.preceding(RECORD_REACH):
        if text.strip() and not text[:1].isspace():
            return text
    return None


# how many lines a further line's record is followed back (or a record's lines forward): a record the kernel cut
# into more lines than this is not one a driver wrote. A line whose record's start lies beyond is refused where its
# stamps make it one record (the same microsecond) or where it cannot be a paste (_out_of_reach_further_line); the
# records of one second under a stamp of the second are each their own
RECORD_REACH = 256
# the least indent of a record's further line under journalctl or util-linux dmesg (the message's column after a
# stamp: '[    3.513145] ' is 15 wide); a log pasted indented (4 spaces, a tab, a YAML block) is indented less
MESSAGE_COLUMN_MIN = 12


def _message_offset(text: str, stamp: ParsedStamp, otherwise: int) -> int:
    """Where the stamp's message begins in ``text`` (the line it was read off), or ``otherwise`` where ``text`` does
    not end with it (a message a wrapper rewrote, a line read again without its lead)."""
    return len(text) - len(stamp.message) if text.endswith(stamp.message) else otherwise


def _inside_quotes(text: str, stamp: ParsedStamp, match_start: int) -> bool:
    """Whether a rule's match begins inside a single-quoted string of the kernel's message (an odd number of quotes
    between the message's start and the match): the kernel quotes what it copied from a process ('<fs>: Unknown
    parameter '<key>'', 'failed to resolve '<path>''), never its own report."""
    start = _message_offset(text, stamp, 0)
    return start <= match_start and text.count("'", start, match_start) % 2 == 1


# print_vma_addr's ' in <file>[<start>+<size>]' (mm/memory.c; since 6.x '<file>[<offset>,<start>+<size>]'), which every
# user-space crash report ends with (x86's
# segfault, bad frame, general protection and control-protection lines, arm64's unhandled exceptions, powerpc's
# show_signal_msg): the file is the process's own, named as it chose
_VMA_FILE_END = re.compile(r"\[(?:[0-9a-f]{1,16},)?[0-9a-f]{1,16}\+[0-9a-f]{1,16}\]")
# what opens a quoted value of a wrapper's record (a JSON member, a CSV cell, Fluent Bit's map): a quote after these
_VALUE_OPENERS = frozenset(':,>=[{')


# netfilter's packet log (net/netfilter/nf_log_syslog.c, ebt_log.c): the rule's --log-prefix, which whoever
# administers a network namespace chooses, is printed first, then ' IN=<if> OUT=<if> '
_PACKET_LOG = re.compile(r"IN=[^\s/:]{0,15} OUT=[^\s/:]{0,15} ")  # (an interface's name: no blank, '/' or ':')
# copying heads whose format goes on after the copied text: a line without that tail was cut inside the text
_TAIL_MISSING = re.compile(r"state recovery failed for open file (?![^\n]*, error = -?\d{1,5}\s*$)"
                           r"|\bFile: /(?![^\n]* PID: \d)|\bTask in /(?![^\n]* killed as a result of limit of )")
_PIDS_PATH = re.compile(r"fork rejected by pids controller in [^\n]*$")
# a line that begins out of the indent (a record's first line), after the newline before it
_UNINDENTED_LINE = re.compile(rb"\n[^ \t\r\n]")


def _quote_opened_by_text(text: str) -> Optional[int]:
    """Where the first double quote of ``text`` that opens no wrapper's value is (one after a word: 'unknown option
    "<option>"'), walking the quotes in pairs as a JSON member, a CSV cell or Fluent Bit's map opens and closes
    them; None when every quote pairs up as a wrapper's."""
    inside = False
    for index, char in enumerate(text):
        if char != '"' or (inside and index and text[index - 1] == "\\"):
            continue
        if not inside:
            opener = text[:index].rstrip()
            if opener and opener[-1] not in _VALUE_OPENERS:
                return index
        inside = not inside
    return None


_DOUBLE_QUOTED = re.compile(r'"[^"\n]*"')


def _leaves_quote_open(head: str) -> bool:
    """Whether a record's first line ends inside a quote the kernel opened around copied text (an odd number of
    apostrophes, or a double quote after a word that is not closed): its next lines are that text's."""
    stamp = parse_line_time(head, TimeContext())
    message = head[_message_offset(head, stamp, 0):]
    opened = _quote_opened_by_text(message)
    # an apostrophe inside a double-quoted value is that value's ('name="/home/u/it's"' in an audit record)
    return _DOUBLE_QUOTED.sub("", message).count("'") % 2 == 1 \
        or (opened is not None and message.count('"', opened) % 2 == 1)


def _out_of_reach_further_line(text: str, own_origin: bool) -> bool:
    """Whether an indented line with no first line in reach is a record's further line, not a log a person pasted
    indented (however deep): in a log the epilog read from the node, any line at a message's column; anywhere, a line
    indented exactly as wide as its own stamp and header, as a forged record is aligned under a real one of the
    same format (a paste is indented by 2, 4, 8 or a tab, whatever its stamps)."""
    indent = len(text) - len(text.lstrip(" "))
    if own_origin and indent >= MESSAGE_COLUMN_MIN:
        return True
    own = parse_line_time(text.lstrip(" "), TimeContext())
    if (own.time is None and own.uptime is None) or not own.message:
        return False
    return indent == len(text) - indent - len(own.message)


def _under_its_message(head: str, text: str) -> bool:
    """Whether the indented line sits under a stamped record's first line (``head``), indented to where that
    record's message begins, as journalctl and util-linux dmesg print a record's further lines (not a log pasted
    indented under a heading or a YAML key)."""
    stamp = parse_line_time(head, TimeContext())
    if (stamp.time is None and stamp.uptime is None) or not stamp.message or not head.endswith(stamp.message):
        return False
    return len(text) - len(text.lstrip(" ")) == _message_offset(head, stamp, 0)


def _stamped_itself(text: str) -> bool:
    """Whether an indented line's own text begins with a syslog or dmesg stamp (not a record's member or field, whose
    time is its record's)."""
    own = parse_line_time(text.lstrip(), TimeContext())
    return own.fmt not in ("", "journal_field", EXPORT_RECORD) and (own.time is not None or own.uptime is not None)


def _continues_copied_text(line: Line, text: str, stamp: ParsedStamp) -> bool:
    """Whether the line is a further line of a record whose first line copies a process's text and ends inside it
    (:func:`_cut_inside_copy`), or that ends as a packet log: dmesg read through syslog(2) (dmesg -S, BusyBox) prints
    each line of a record with the record's stamp, so a newline in copied text starts a line that looks like a
    record of its own. Lines are one record where their stamps agree to the microsecond (the same uptime, a time with
    its microseconds, a zero delta); a record longer than the reach is refused. A stamp of the second (dmesg -T) is
    shared by every record of that second: there a line above in the same second counts only when it is such a cut
    copy (:func:`_open_copy_in_the_second`), never for an apostrophe of its own ('can't change power state')."""
    own = key = _record_key(text, stamp)
    if own is None:
        return stamp.fmt.startswith("dmesg") and _open_copy_in_the_second(line, text, stamp)
    # a line of the same record shows the same second and fraction near its start (or a zero delta): the others,
    # nearly every line, are passed over without their stamps parsed
    fraction = _FRACTION.search(text, 0, _message_offset(text, stamp, 64))
    mark = fraction.group(0) if fraction is not None and own != _ZERO else None
    if mark is not None and not _near_with(line, mark.encode()):
        return False  # neither neighbour shows the stamp: a record of one line (nearly every line)
    head: Optional[str] = None
    for previous in line.preceding(RECORD_REACH):
        if key != _ZERO and mark is not None and mark not in previous[:160]:
            break
        previous_key = _record_key(previous, parse_line_time(previous, TimeContext()))
        if key != _ZERO and previous_key != key:
            break
        head, key = previous, previous_key  # the same record: a zero delta joins the line before, whatever it is
        if key is None:
            break
    else:
        if _beyond_reach(line):
            return True  # a record longer than any a driver prints: its first line is out of reach
    if head is not None and _cut_inside_copy(head, same_record=True):
        return True
    for following in line.iter_following(RECORD_REACH):
        if mark is not None and mark not in following[:160] and "+0.000000" not in following[:40]:
            break
        if _record_key(following, parse_line_time(following, TimeContext())) not in (own, _ZERO):
            break
        if _PACKET_LOG.search(following):
            return True  # a packet log's prefix with newlines in it: the record's packet fields come after
    return False


def _open_copy_in_the_second(line: Line, text: str, stamp: ParsedStamp) -> bool:
    """Whether a line above, with this line's very stamp of the second, copies a process's text and was cut inside it:
    a quote left open, a format's tail missing after the copied name (:func:`_cut_inside_copy`).
    (Copied text that closes a quote of its own before its newline is not seen so: a residue of stamps that cannot
    tell records apart.)"""
    prefix = text[:_message_offset(text, stamp, 0)] if stamp.message else ""
    if not prefix.strip():
        return False
    for previous in line.preceding(RECORD_REACH):
        if not previous.startswith(prefix):
            return False
        if _cut_inside_copy(previous, same_record=False):
            return True
    return False  # the lines of a second are records of their own: only a cut copy among them counts


def _beyond_reach(line: Line) -> bool:
    """Whether the look-back holds RECORD_REACH lines above the line (a walk that ran through them all stopped at
    the reach, not at the file's start)."""
    return sum(1 for _ in line.preceding_spans(RECORD_REACH)) >= RECORD_REACH


def _cut_inside_copy(head: str, same_record: bool) -> bool:
    """Whether a line copies a process's text (a copying head) and ends inside it: a quote left open, a format's
    tail missing after the copied name (NFS's ', error = N', direct I/O's ' PID: ', the memory controller's
    ' killed as a result of limit of ', a crash report's '[start+size]'). A pids-controller path ends its line when
    whole too: it counts only where the lines are one record by their stamps. A line that merely holds an
    apostrophe ('can't recover', 'device's health') or a copying head whose line is whole (an audit record, an OOM
    report's cgroup fields) cuts nothing."""
    if not _COPIES_USER_TEXT.search(head):
        return False
    return _leaves_quote_open(head) or _TAIL_MISSING.search(head) is not None \
        or _CRASH_REPORT_CUT.search(head) is not None or (same_record and _PIDS_PATH.search(head) is not None)


# a user-space crash report whose line ends before print_vma_addr's '[start+size]': its file's name went on
_CRASH_REPORT_CUT = re.compile(r"(?:\]:? (?:segfault|bad frame|general protection|control protection|unhandled)"
                               r"|\btraps: )(?![^\n]*" + _VMA_FILE_END.pattern + r")[^\n]* in [^\n]*$")


def _near_with(line: Line, mark: bytes) -> bool:
    """Whether the line just before or just after shows ``mark`` near its start (read in the buffer, undecoded)."""
    buffer = line.buffer
    for begin, stop in (*line.preceding_spans(1), *line.following_spans(1)):
        if buffer.find(mark, begin, min(begin + 200, stop)) >= 0:
            return True
    return False


def _record_key(text: str, stamp: ParsedStamp) -> Optional[tuple[str, str]]:
    """What one printk record's lines share in a dmesg read through syslog(2): the uptime, or a time to the
    microsecond; a delta of zero stands for its record's ('[  +0.000000] '); None for a stamp that cannot tell
    records apart."""
    if stamp.uptime is not None:
        return ("uptime", repr(stamp.uptime))
    if stamp.time is not None and stamp.time.microsecond:
        return ("time", stamp.time.isoformat())
    if (stamp.fmt == "dmesg_delta" and _ZERO_DELTA.match(text)) or _ZERO_DELTA_COLUMN.match(text):
        return _ZERO
    return None


_ZERO_DELTA = re.compile(r"\[\s{0,12}\+0\.0{6}\] ")
# dmesg -d's delta column after a stamp of the second ('[Tue Jun 11 09:40:12 2024 <    0.000000>] ')
_ZERO_DELTA_COLUMN = re.compile(r"\[[^\]<\n]{1,40} <\s{0,12}0\.0{6}>\] ")
_ZERO = ("delta", "0")
_FRACTION = re.compile(r"(?:\d{1,2}:\d{2}:\d{2}|\d{1,10})\.\d{6,9}")  # a stamp's second and its fraction


# where a log store's record holds the kernel's message: its message member ('"MESSAGE"=>"', '"line":"'; inside a
# JSON or Ruby-inspect record a quote of the message's own is escaped, so the message cannot forge one) or an
# export's 'MESSAGE='
_MESSAGE_MEMBER = re.compile(r'"(?:MESSAGE|message|msg|log|line|_raw|text)"\s{0,4}(?::|=>)\s{0,4}"|\bMESSAGE=')
# what a tool puts before a message it relays: kubectl's '--prefix' ('[pod/<pod>/<container>] ')
_TOOL_PREFIX = re.compile(r"\[pod/[\w.-]{1,253}/[\w.-]{1,63}\] ")
# a header at the head of a relayed message: a syslog header or a host and the kernel's tag, a dmesg stamp
_RELAYED_HEAD = re.compile(r'(?:(?:[A-Z][a-z]{2} [ \d]\d [\d:]{8}(?:\.\d{1,9})?|\d{4}-\d{2}-\d{2}T\S{8,40}) )?'
                           r'[\w.-]{1,255} kernel(?:\[\d{1,10}\])?(?::\s?|\s"?)'
                           r'|\[\s{0,12}\d{1,10}\.\d{1,9}\] ?|\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d [\d:]{8} \d{4}\] ?')


def _message_start(text: str, stamp: ParsedStamp, match_start: int) -> int:
    """Where the kernel's message begins in ``text``: after the stamp the line was read with, and after a host and
    the kernel's tag a stamp format left at the head of its message. A record a log store wrote (an export, a JSON
    or Fluent Bit record, logcli's label set) holds the message in a member of its own, behind whatever headers
    the relaying tools added: after those."""
    start = _message_offset(text, stamp, 0) if stamp.message else 0
    if stamp.fmt == EXPORT_RECORD or text[start:start + 1] in ("{", "["):
        for member in _MESSAGE_MEMBER.finditer(text, start, match_start):
            start = member.end()
    labels = _LOGCLI_LABELS.match(text, start)
    if labels is not None and labels.end() <= match_start:
        start = labels.end()
    for pattern in (_TOOL_PREFIX, _RELAYED_HEAD, _RELAYED_HEAD):
        head = pattern.match(text, start)
        if head is not None and head.end() <= match_start:
            start = head.end()
    return start


def _after_copied_text(text: str, stamp: ParsedStamp, match_start: int) -> Optional[str]:
    """Why a rule's match that begins inside the kernel's message, not at its start, lies in text the kernel copied
    from a process (a path, a file or mount option's name), whatever the message's head: None when nothing says so.
    A driver's report begins its record or follows the kernel's own words ('amdgpu 0000:dd:00.0: amdgpu: ',
    '{1}[Hardware Error]: ', a wrapper's '"msg": "'), never a path, an apostrophe, a word it is glued to, or a double
    quote that opens no record's value (cgroup2's 'unknown option "<option>"', the exec-stack warning's
    'process '<path>'', direct I/O's 'File: <path> PID:', overlayfs' 'invalid origin (<dir>/<name>'). A crash
    report's ' in <file>[start+size]' names the process's file, so a match after its ' in ' is the file's name."""
    if _PACKET_LOG.search(text, match_start):
        return "a packet log's prefix (netfilter's ' IN=... OUT=...' follows)"
    start = _message_start(text, stamp, match_start)
    if match_start <= start:
        return None
    before = text[start:match_start]
    if "/" in before:
        return "a path"
    if "'" in before:
        return "a quoted name"
    last = before[-1]
    if last.isalnum() or last in "(_-.":
        return "a word it is glued to"
    if _quote_opened_by_text(before) is not None:
        return "a double-quoted name"
    if " in " in before and _VMA_FILE_END.search(text, match_start):
        return "the ' in <file>[...]' of a crash report"
    return None


_NUMBERED_STEP = re.compile(r"\.\d{1,9}$")
# bash's xtrace of a command ('+ ', '++ ' per nesting level, then the command's first word)
_XTRACE = re.compile(r"\+{1,16} (?=[\w./$'\"\[])")
# a line grep (-H, -r, -n, -c) prints from a log file: the file's path, its line number, then the line
_FILE_QUOTE = re.compile(r"(?:\.{0,2}/)?(?:[\w.@+-]{1,128}/){0,32}[\w.@+-]{0,128}\."
                         r"(?:log|txt|out|err|stdout|stderr)(?:\.\d{1,4})?(?::\d{1,9})?[:-](?=\S)")


_PDSH_HOST = re.compile(COLLECTED_HOST_PATTERN)
# The head of a kernel line that carries a time stamp in a form no format reads (a month in a locale the
# table lacks, a date order of its own such as date(1)'s "Wed 20 Nov 2024 02:15:01 PM"): a word or date,
# then a clock, at the line's start
# (or a record whose head no format reads: a syslog priority before a date or version, seconds since the
# epoch, a JSON object)
# after an uptime stamp, journalctl -o short-monotonic's host and program ('node-01 kernel: ', 'node-01 alice[42]: ')
_MONOTONIC_HEAD = re.compile(r"([A-Za-z0-9][\w.-]{0,62}) ([A-Za-z_][\w.@-]{0,63}(?:\[\d{1,10}\])?): ")
_STAMP_SHAPED = re.compile(r"\s*(?:<\d{1,3}>\d|\{\s*\"|\d{9,11}\.\d{1,9}\s|"
                           r"(?:\[\s*)?(?:\S{1,12}\.? +\d{1,2},? +|\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}[ T]|"
                           r"\S{1,6} +\S{1,12}\.? +\d{1,2} +|"
                           r"(?:[^\W\d_]{2,9}\.?,? +)?\d{1,2}\.? +[^\W\d_]{3,9}\.?,? +\d{4},? +)"
                           r"\d{1,2}:\d{2}(?::\d{2})?\b)")


MAX_ERROR_NOTES = 8  # kinds of error a file's notes name one by one (_LineHandler.notes)


class _LineHandler:
    """Called for every prefilter hit of one file."""

    def __init__(self, ctx: EngineContext, bf: BundleFile, index: AnchorIndex, timectx: TimeContext,
                 plans: Optional[dict[str, EmitPlan]] = None,
                 searchers: Optional[dict[str, Searcher]] = None) -> None:
        self.ctx, self.bf, self.index, self.timectx = ctx, bf, index, timectx
        self.plans = plans or {}
        self.searchers = {} if searchers is None else searchers  # the extractor's, shared by its files
        self.refused = KernelLines(ctx, bf)
        self.kernel = bf.source == SOURCE_KERNEL
        self.app = bf.source == SOURCE_APP
        self.caps = SymptomCaps(ctx.settings.max_symptoms_per_rank, ctx.settings.max_symptoms_per_rule)
        self.stamps = LineStamps(timectx)
        self.found = 0
        self.symptom_lines = 0  # hit lines that made at least one symptom: the prefilter's precision
        self._seen: dict[Any, tuple[int, ParsedStamp]] = {}  # last stamped hit line per stream_key
        self.aliased = index.aliased  # rules whose regex names a field in several branches ("host__2")
        self.memo: dict[str, Any] = {}  # the decoders' own, for this file (registry.decoder)
        self.unjudged: dict[str, list[int]] = {}  # error -> [lines, first line number]

    def _infer(self, line: Line, stream: Optional[Stream]) -> Optional[ParsedStamp]:
        """Like :func:`infer_time`, but stops at the last hit line of the same stream whose stamp is
        already known, so a burst of unstamped hits costs what lies between them, not 200 lines each."""
        known = self._seen.get(stream_key(stream))
        limit = min(200, line.lineno - known[0] - 1) if known else 200
        found = infer_time(line, stream, self.timectx, limit, want_any=known is None, stamps=self.stamps)
        if found is None and known is not None:
            found = known[1]
        if found is not None:
            self._seen[stream_key(stream)] = (line.lineno, found)
        return found

    def __call__(self, line: Line) -> None:
        before = self.found
        try:
            self._judge(line)
        except ValueError as exc:
            # what a line's own text can make a conversion refuse (int() of a 5,000-digit number): that line is
            # lost, not the bundle, and the coverage says which
            error = f"{type(exc).__name__}: {str(exc)[:160]}"
            if error not in self.unjudged and len(self.unjudged) >= MAX_ERROR_NOTES:
                error = "other errors"  # the text is the line's: so many kinds of it are one note
            seen = self.unjudged.setdefault(error, [0, line.lineno])
            seen[0] += 1
        self.symptom_lines += self.found > before

    def notes(self, rel: str) -> list[str]:
        """The lines a rule could not judge, one note per error."""
        return [f"{rel}: {count} line(s) not judged, {error} (first: line {first})"
                for error, (count, first) in sorted(self.unjudged.items())]

    def _judge(self, line: Line) -> None:
        # a kernel line quoted by whoever pasted the log ('> [ 12.5] NVRM: ...') is read as the line it quotes, and
        # so are its neighbours (a record's field lines, a call trace)
        if not self.app and (quoted := quote_end(line.text)):
            line.lead = line.text[:quoted]
        stream, text = self.stamps.hit(line) if self.app else (None, line.text[len(line.lead):])
        if not self.app and (_JOURNAL_METADATA.match(text) or _continues_a_journal_field(line, text)):
            return  # a journal record's field other than MESSAGE: '_CMDLINE=logger ... NVRM: Xid ...' is a user's
        node = self.bf.node
        if self.app and stream is None and text[:1].isalnum():
            node, stream, text = self._collected(node, line, text)
        elif self.app and "ip=" in line.text[:200]:
            address = prefix_address(line.text)  # a Ray worker's line names its node's address
            node = (job_node(self.ctx, address) if address else None) or node
        elif self.app and "mpirank:" in line.text[:80]:
            host = prefix_host(line.text)  # the SageMaker toolkit's rank prefix names the rank's host
            node = (job_node(self.ctx, host) if host else None) or node
        if self.app and _XTRACE.match(text):
            return  # the shell's echo of a command it runs ('+ grep -q "uncorrectable ECC" log'), not its output
        if self.app and (from_file := _FILE_QUOTE.match(text)) is not None:
            # grep -H's 'logs/rank1.log:<line>' (and grep -n's 'path:N:'): a line of a file, which may be another
            # run's or another rank's; read, placed by nothing but its own words
            self._match(line, text[from_file.end():], None, None)
            return
        if not self.app and text[:2] == '{"' and (message := _journal_message(text) or _record_message(text)) \
                is not None:
            # `journalctl -o json`, or a log store's JSON record (Filebeat, Fluentd, an Elasticsearch export): the
            # rules read its message, and its other fields say when and who wrote it (wrapped_record)
            self._match(line, message, None, node, stamped=text)
            return
        if not self._match(line, text, stream, node) and self.app:
            rest = after_log_prefix(text)  # '2023-10-12 17:31:02,118 - STDERR - ERROR - TypeError: ...'
            if rest is not None and not _LOGGED_LEVEL.search(text[:len(text) - len(rest)]):
                inner, rest = split_rank(rest)
                self._match(line, rest, inner or stream, node, stamped=text)

    def _match(self, line: Line, text: str, stream: Optional[Stream], node: Optional[str],
               stamped: Optional[str] = None) -> bool:
        """Try the line's candidate rules on ``text``; True when one's regex matched it. ``stamped``: the text
        whose stamp is the line's, where ``text`` is what follows a log prefix."""
        matched = False
        stamp: Optional[ParsedStamp] = None
        for rule in self.index.candidates(line, text):
            assert rule.match is not None
            searcher = self.searchers.get(rule.id)
            if searcher is None:
                searcher = self.searchers[rule.id] = _searcher(rule)
            regex, exclude = searcher
            match = regex.search(text)
            if match is None or (exclude is not None and exclude.search(text)):
                continue
            matched = True
            if self.app and not self.caps.admit(rule.id, stream_key(stream)):
                continue  # before the stamp and the symptom: the user decides how many such lines there are
            if stamp is None:
                stamp = self._stamp(line, stamped or text, stream)
                if self.kernel:
                    if stamped is not None:
                        stamp = json_record_stamp(stamped, stamp, self.timectx)
                    elif stamp.fmt == "" and text.lstrip()[:1] == '"' and _PRETTY_MEMBER.match(text):
                        whole = pretty_record(line, stamp, self.timectx)
                        inner = wrapped_record(text, stamp, match.start(), self.timectx) \
                            if whole.tag == NO_WRITER else whole  # a syslog header in the message names it
                        stamp = inner if inner is not stamp and inner.tag else whole
                    else:
                        stamp = wrapped_record(text, stamp, match.start(), self.timectx)
            trust = ""
            if self.kernel:
                trust = self.refused.trust(line, text, stamp, match.start(), rule.match.programs) or ""
                if not trust:
                    continue
            groups = match.groupdict()
            if self.kernel and stamp.time is None and (stamp.fmt == EXPORT_RECORD
                                                       or (not stamp.fmt and _STAMP_SHAPED.match(text))):
                groups["unread_stamp"] = "yes"  # a stamp this engine cannot read: filter.outside_job_window
            own = _said_time(groups.get("at"), stamp, self.timectx)
            if own is not None:
                stamp = own
            elif self.kernel:
                stamp = _monotonic_over_wall(stamp, self.timectx, groups)
            elif "time taken from a preceding line" in stamp.assumptions:
                upper = next_time(line, stream, self.timectx, self.stamps)
                groups["time_inferred"] = "preceding line"
                if upper is not None and (stamp.time is None or upper >= stamp.time):
                    # (a next stamp earlier than the preceding one, another rank's buffered line flushed late,
                    # bounds nothing)
                    groups["time_upper"] = format_utc(upper)
            self._emit(rule, line, text, stream, stamp, groups, trust, node)
        return matched

    def _label_is_rank(self, label: int, file_node: Optional[str], fields: dict[str, Any]) -> bool:
        """Whether srun's ``--label`` task number can be read as the program's rank: where the job's rank map
        puts several ranks on a node, srun may have started one launcher per node (torchrun, accelerate) whose
        workers all print under the launcher's task number. A node's own file that the rank map contradicts
        says so; in a combined file the mapping is kept as the line's place but marked: it names no culprit and
        witnesses nothing on that node."""
        job = self.ctx.job
        mapped = job.rank_node(label)
        if mapped is None or job.one_rank_per_node:
            return True
        if file_node is not None:
            return mapped == file_node
        fields["node_from_label"] = True
        return True

    def _rank_and_task(self, label: int, rank: int) -> tuple[Optional[str], Optional[str]]:
        """The node the rank map runs ``rank`` on, and how srun's task ``label`` agrees with it: "rank" (the task
        ran there as that rank, one task per rank), "launcher" (only if the task was a per-node launcher, the
        step's ``label``-th node), None (neither: the prefix names a rank of another node). (None, "rank") when
        the rank map is silent."""
        job = self.ctx.job
        placed = job.rank_node(rank)
        if placed is None or placed == job.rank_node(label):
            return placed, "rank"
        order = self._step_nodes()
        if label < len(order) and order[label] == placed:
            return placed, "launcher"
        return placed, None if job.rank_node(label) is not None or label < len(order) else "rank"

    def _step_nodes(self) -> tuple[str, ...]:
        """The nodes srun gave its tasks to, in order: the job's one numbered step's when sacct names exactly one
        (the batch and extern steps are not srun's), else the job's."""
        steps = [step for step in self.ctx.job.steps if step.nodes and _NUMBERED_STEP.search(step.id)]
        return steps[0].nodes if len(steps) == 1 else self.ctx.job.nodes

    def _launcher_node(self, label: int, local: int, fields: dict[str, Any]) -> Optional[str]:
        """The node of srun's task ``label`` whose line carries torchrun's local-rank prefix ('2: [default1]:'), in
        a file of many nodes' output: torchrun runs one launcher per node (srun --ntasks-per-node=1), and srun
        gives its tasks to the step's nodes in their order, so task N ran on the step's N-th node. A rank map that
        puts fewer than ``local``+1 ranks on that node contradicts it; then the line keeps no node. Several
        launchers per node would put task N elsewhere, so the node is the line's place, not a node to blame."""
        job = self.ctx.job
        order = self._step_nodes()
        if label >= len(order):
            return None
        node = order[label]
        if job.ranks and local >= len(job.node_ranks(node)):
            return None
        # srun may also have run several launchers per node, or the step only some nodes: a place, not blame
        fields["node_from_launcher_task"], fields["node_from_label"] = label, True
        return node

    def _collected(self, node: Optional[str], line: Line, text: str) -> tuple[Optional[str], Optional[Stream], str]:
        """A line as pdsh or clush hand it on (the DeepSpeed and Horovod launchers run ranks through them):
        ``node-03: [rank9]: Traceback ...``. Only a job node's name or address counts as the prefix, so
        ``RuntimeError: ...`` stays the message it is; the rest is read for its rank prefix as usual."""
        prefix = _PDSH_HOST.match(text)
        named = job_node(self.ctx, prefix.group(1)) if prefix else None
        if prefix is None or named is None:
            return node, None, text
        line.lead = text[:prefix.end()]
        stream, rest = split_rank(text[prefix.end():])
        return named, stream, rest

    def _stamp(self, line: Line, text: str, stream: Optional[Stream]) -> ParsedStamp:
        stamp = self.stamps.stamp(text)
        if stamp.fmt == "journal_field":
            return journal_record(line, stamp, self.timectx)
        if stamp.time is None and self.app:
            shipped = shipped_stamp(line.text[len(line.lead):])  # after pdsh's 'node-03: ', where it was taken off
            if shipped:  # the program's line had no time of its own: the shipper's says when it was read
                found = self.stamps.stamp(shipped)
                stamp = ParsedStamp(time=found.time, message=stamp.message, fmt=found.fmt, host=None, uptime=None,
                                    assumptions=(*found.assumptions, "time from the log shipper's stamp"))
        if stamp.time is not None:
            self._seen[stream_key(stream)] = (line.lineno, stamp)
        elif self.app or stamp.fmt == "dmesg_delta":
            inferred = self._infer(line, stream)
            if inferred is not None:
                return ParsedStamp(time=inferred.time, message=stamp.message, fmt=stamp.fmt, host=stamp.host,
                                   uptime=stamp.uptime, tag=stamp.tag,
                                   assumptions=(*inferred.assumptions, "time taken from a preceding line"))
        return stamp

    def _emit(self, rule: Rule, line: Line, text: str, stream: Optional[Stream], stamp: ParsedStamp,
              groups: dict[str, Any], trust: str, file_node: Optional[str]) -> None:
        """``file_node``: the node whose output the line is (the file's, or a pdsh prefix's)."""
        fields = _fields_of(groups)
        if rule.id in self.aliased:  # "host__2": one field in another wording's branch (group names are unique)
            fields = _unalias(fields)
        if file_node is None and stream is not None and stream[0] is not None and stream[1] is None \
                and stream[2] is not None:
            file_node = self._launcher_node(stream[0], stream[2], fields)
        rank, local = global_rank(stream, file_node, self.ctx.job)
        labelled = stream is not None and stream[1] is None and stream[2] is None
        if labelled and rank is not None and not self._label_is_rank(rank, file_node, fields):
            rank = None  # srun's task number, not the program's rank: one launcher per node (torchrun under srun)
        if rank is None:
            rank = fields["rank"] if isinstance(fields.get("rank"), int) else pg_rank(text)
        elif stream is not None and stream[1] is not None and (named := pg_rank(text)) is not None and named != rank:
            # the default process group's rank in PyTorch's own words outranks a '[rankN]:' prefix that says
            # otherwise: torchrun's '--role rank --tee' writes its LOCAL rank so ('[rank0]: ... [PG ID 0 ... Rank 4]')
            fields["prefix_rank"], rank = rank, named
        elif stream is not None and stream[1] is not None and stream[2] is None and rank is not None \
                and file_node in self.ctx.job.node_set and self.ctx.job.rank_node(rank) not in (None, file_node) \
                and rank < len(here := self.ctx.job.node_ranks(file_node)):
            # a node's own file whose '[rankN]:' the rank map puts on another node, N a rank this node has: torchrun's
            # '--role rank' prefix, the LOCAL rank on this node (as srun's task number in _label_is_rank); an N
            # beyond this node's ranks is the global rank of a file that holds every task's lines (the batch
            # host's output named for its node), and the rank map places it
            fields["prefix_rank"], rank = rank, here[rank]
            local = fields["prefix_rank"]
        if stream is not None and stream[0] is not None and stream[1] is not None and rank is not None:
            placed, agrees = self._rank_and_task(stream[0], rank)
            if placed is not None and agrees is None:
                # srun's label names the task that printed the line, and its '[rankN]:' a rank that runs elsewhere:
                # a line of another rank's (a log of an earlier attempt, tailed) or a forged prefix; placed on neither
                fields["rank_not_the_tasks"], rank = placed, None
            elif agrees == "launcher" and placed != file_node:
                fields["node_from_label"] = True  # only if the task was a per-node launcher: a place, not blame
        if local is not None:
            fields["local_rank"] = local
        # a kernel line's own host (syslog, pdsh) names its node in a file of many nodes (a central syslog);
        # in a node's own file another node's line never gets here (KernelLines.trust)
        host = fields.get("host") or (stamp.host if self.kernel else None)
        node = resolve_node(self.ctx, file_node, rank if local is None or rank is not None else None, host,
                            kernel=self.kernel)
        if labelled and rank is not None and host and not fields.get("node_from_label") \
                and (placed := self.ctx.job.rank_node(rank)) is not None and node != placed:
            # srun's label puts the task on one node and the line's text names another as its host: the label is
            # srun's, the text the program's (a relayed or forged line), so the line is placed on neither
            fields["host_not_the_tasks"] = placed
            node = None
        evidence = EvidenceRef(source=self.bf.source, node=node, file=self.bf.rel, line=line.lineno,
                               offset=line.offset, time=stamp.time, raw=line.text[:RAW_LINE_CAP], trust=trust)
        plan = self.plans.get(rule.id) or EmitPlan.of(rule)
        sym = Symptom(kind=plan.kind, rule_id=rule.id, node=node, time=stamp.time, evidence=[evidence], rank=rank,
                      fields=fields, role=plan.role, category=plan.category, responsible=plan.responsible,
                      strength=plan.strength)
        if "peer" in fields:
            peer = resolve_peer(self.ctx, str(fields["peer"]))
            if peer:
                fields["peer_node"] = peer
        self.ctx.assumptions.update(stamp.assumptions)
        if plan.decoder and not DECODERS[plan.decoder](self.ctx, sym, line, {"text": text, "rule": rule,
                                                                             "stream": stream, "memo": self.memo}):
            return
        if not self.app and not self.caps.admit(rule.id, (sym.kind, sym.gpu, sym.fields.get("code"))):
            return  # after the decoder, which tells one GPU's Xid from another's
        if not sym.summary:
            sym.summary = render_summary(sym.kind if plan.summary is None else plan.summary, sym)
        if not sym.actions and plan.actions:
            sym.actions = plan.actions
        self.ctx.symptoms.append(sym)
        self.ctx.fired[rule.id] += 1
        self.found += 1


# a logging prefix at a level below ERROR: the program logged the line and went on (a handled exception's text)
_LOGGED_LEVEL = re.compile(r"\b(?:DEBUG|INFO|WARNING|WARN)\b")

EXPORT_RECORD = "export_record"  # a line a log store exported (CSV row, JSON object): its own fields say who and when
# a syslog header inside a line, after whatever a tool put before it (logcli's "<stamp> {labels} ", a CSV cell,
# CloudWatch's columns): a month and day or an ISO date, a clock, a host and a program's tag
_INNER_HEADER = re.compile(r"(?:(?<=[\s\"',{])|^)(?:[A-Z][a-z]{2} [ \d]\d |\d{4}-\d{2}-\d{2}T)\d{2}:\d{2}:\d{2}\S* "
                           r"\S{1,255} (?:\w{1,10}\.\w{1,10} )?[^\s:\[\]]{1,64}(?:\[\d{1,10}\])?: ")
# Loki logcli's label set after its stamp ('{host="EVE", syslog_identifier="alice"} '), and one pair of it
_LOGCLI_LABELS = re.compile(r'(?:^|(?<=\s))\{((?:[\w.]{1,64}="(?:[^"\\]|\\.){0,512}"(?:, )?){0,32})\} ')
_LOGCLI_PAIR = re.compile(r'([\w.]{1,64})="((?:[^"\\]|\\.){0,512})"')
# what a tool that wraps a line puts first: no stamp it knows, or a bare date-time without a host or a tag
_WRAPPER_FORMATS = frozenset({"", "iso8601", "python_logging", "bracket_iso"})
# the stamps of the kernel's own ring as dmesg and /dev/kmsg print it: no daemon's log file is written so
_KERNEL_RING_FORMATS = frozenset({"dmesg_uptime", "dmesg_ctime", "dmesg_reltime", "dmesg_delta", "dmesg_iso", "kmsg"})
# Fluent Bit's stdout output plugin: '[3] kmsg.0: [1733139527, {"priority"=>4, ..., "msg"=>"NVRM: ..."}]', since
# v2.1 the stamp in a pair with the metadata ('[[1733139527.470994000, {}], {...}]'); its file output plugin's
# default format is the same record without the counter, the map as JSON ('kmsg.0: [1755569066.431207000, {...}]')
_FLUENT_BIT = re.compile(r"(?:\[\d{1,9}\] )?[\w.-]{1,64}: \[\[?(?P<epoch>\d{9,11})(?:\.(?P<frac>\d{1,9}))?"
                         r"(?:, \{[^{}]*\}\])?, \{")
# the kmsg input's priority: the record's syslog priority, its facility above the level (the kernel's is 0)
_FLUENT_PRIORITY = re.compile(r'"priority"\s*(?:=>|:)\s*(\d{1,4})\b')
_HOST_KEYS = ("_HOSTNAME", "hostname", "host_name", "host.name", "host", "kubernetes.host", "resource_name")
_TAG_KEYS = ("SYSLOG_IDENTIFIER", "syslog_identifier", "syslog.identifier", "ident", "identifier", "programname",
             "program", "log.syslog.appname", "appname", "app_name", "process.name", "tag")
# the syslog facility a record names (ECS's log.syslog.facility.code, Filebeat's syslog.facility, the journal's own):
# the kernel writes facility 0 ('kern') only
_FACILITY_KEYS = ("SYSLOG_FACILITY", "syslog_facility", "log.syslog.facility.code", "syslog.facility",
                  "log.syslog.facility.name", "facility")
_KERNEL_FACILITIES = frozenset({"0", "kern", "kernel"})
# the message of a log store's JSON record
_MESSAGE_KEYS = ("MESSAGE", "message", "msg", "log", "_raw")
_TIME_KEYS = ("@timestamp", "timestamp", "time", "date", "_time", "__REALTIME_TIMESTAMP")
_KIBANA_TIME = re.compile(r"([A-Z][a-z]{2}) (\d{1,2}), (\d{4}) @ (\d{2}:\d{2}:\d{2}(?:\.\d+)?)")


def wrapped_record(text: str, stamp: ParsedStamp, match_start: int, timectx: TimeContext) -> ParsedStamp:
    """What a kernel-looking line wrapped by a log store's export says about itself: a syslog header inside it
    (logcli's '<stamp> {labels} Oct 16 03:22:40 host alice: ...', a Splunk '_raw' cell) is the line's own
    stamp, host and program; a JSON object (Fluentd, Filebeat/Elasticsearch, Loki's jsonl) or a CSV row
    (Kibana, Splunk) names them in its fields. The stamp of a plain line is returned as it is."""
    if stamp.fmt not in _WRAPPER_FORMATS:
        return stamp  # a kernel line's own stamp (dmesg, syslog, journal): what follows it is the message
    fluent = _FLUENT_BIT.match(text) if text[:1] == "[" or ": [" in text[:80] else None
    if fluent is not None and fluent.end() <= match_start:
        # Fluent Bit's stdout or file output: its kmsg input stamps the record with the boot time plus the kernel's
        # own stamp (the event's time); its priority's facility is the only word on who wrote it
        micros = int(fluent["epoch"]) * 1_000_000 + int((fluent["frac"] or "0")[:6].ljust(6, "0"))
        priority = _FLUENT_PRIORITY.search(text, fluent.end(), match_start)
        facility = int(priority.group(1)) >> 3 if priority is not None else None
        timed = ParsedStamp(time=from_epoch_micros(micros), message=stamp.message, fmt=EXPORT_RECORD, host=None,
                            uptime=None, assumptions=stamp.assumptions, tag=None, facility=facility)
        # the file output writes the map as JSON: a systemd input's record names its writer there (a tail input's
        # line with dmesg --json's keys is still the shipped file's, not the ring buffer's)
        return _json_record(text[fluent.end() - 1:].rstrip().removesuffix("]"), timed, timectx, dmesg=False) \
            or timed
    head = text[:match_start]
    labels = _LOGCLI_LABELS.search(head)
    if labels is not None:  # Loki logcli's '<stamp> {k="v", ...} <line>': the labels say who, the line is text
        named = dict(_LOGCLI_PAIR.findall(labels.group(1)))
        if any(k in named for k in ("syslog_identifier", "transport", "_transport", "unit", "app")):
            transport = named.get("transport") or named.get("_transport")
            tag = journal_tag({"_TRANSPORT": transport, "SYSLOG_IDENTIFIER": named.get("syslog_identifier")
                               or named.get("app") or named.get("unit")})
            return ParsedStamp(time=stamp.time, message=stamp.message, fmt=EXPORT_RECORD,
                               host=named.get("host") or named.get("hostname"), uptime=None,
                               assumptions=stamp.assumptions, tag=tag or "-")
        head = head[labels.end():]
        text = text[labels.end():]
        match_start -= labels.end()
    elif head.lstrip()[:2] == '{"':  # a JSON record: its own fields say who; a header inside a value is text
        return _json_record(text[head.index('{"'):], stamp, timectx) or stamp
    # the first header: the one the tool wrapped; a later one is inside that program's own message
    inner = (_INNER_HEADER.match(head) if labels is not None else None) or _INNER_HEADER.search(head, 1)
    if inner is not None:
        found = parse_line_time(text[inner.start():], timectx)
        if found.fmt in SYSLOG_FORMATS:
            return found
    brace = head.find('{"')
    if brace >= 0 and labels is None:
        return _json_record(text[brace:], stamp, timectx) or stamp
    if text[:1] == '"':
        return _csv_record(text, stamp, timectx) or stamp
    return stamp


CLOCK_CONFLICT_S = 120  # a wall stamp further than this from boot time + the kernel's own uptime is not the line's


def _monotonic_over_wall(stamp: ParsedStamp, timectx: TimeContext, groups: dict[str, Any]) -> ParsedStamp:
    """A kernel line stamped twice, by the syslog daemon's wall clock and by the kernel's '[uptime]', whose two
    times disagree by more than CLOCK_CONFLICT_S with the node's boot time known: the kernel's counts from boot
    (the wall clock was stepped since, or the daemon read the ring buffer late), so its time is the line's. Only
    for a line whose wall stamp is in the boot the facts name: one stamped before it is an earlier boot's (a
    node that crashed and rebooted), whose uptime counts from another boot (filter.previous_boot)."""
    if stamp.time is None or stamp.uptime is None or timectx.boot_time is None \
            or stamp.time < timectx.boot_time - timedelta(seconds=CLOCK_CONFLICT_S):
        return stamp
    kernel = timectx.boot_time + timedelta(seconds=stamp.uptime)
    off = (stamp.time - kernel).total_seconds()
    if abs(off) <= CLOCK_CONFLICT_S:
        return stamp
    groups["wall_stamp_off_s"] = str(int(off))
    note = f"time from the kernel's uptime and the boot time: the wall stamp was {int(off)} s off"
    return stamp._replace(time=kernel, assumptions=tuple(sorted({*stamp.assumptions, note})))


def _journal_message(text: str) -> Optional[str]:
    """The MESSAGE of a ``journalctl -o json`` record, decoded (its quotes and escapes as the kernel wrote them,
    the end of the message where a rule's ``$`` expects it), or None for any other line."""
    record = json_object(text) if '"__REALTIME_TIMESTAMP"' in text else None
    return None if record is None else journal_text(record.get("MESSAGE"))


def _record_message(text: str) -> Optional[str]:
    """The message of a log store's one-line JSON record ({"@timestamp": ..., "message": "..."}), or None for a
    line that is not one or names no message."""
    record = json_object(text)
    if record is None:
        return None
    flat = _flatten(record)
    message = next((flat[k] for k in _MESSAGE_KEYS if isinstance(flat.get(k), str)), None)
    return None if message is None else message.rstrip("\r\n")


def json_record_stamp(record: str, stamp: ParsedStamp, timectx: TimeContext) -> ParsedStamp:
    """What a kernel line's JSON record says about it, where the rules read the record's message: the
    journal's own stamp and program (``journalctl -o json``) as read, a log store's record's fields."""
    if stamp.fmt not in _WRAPPER_FORMATS:
        return stamp
    return _json_record(record, stamp, timectx) or stamp


# a member line of a pretty-printed JSON object: its key ('"message" : ', '"_source" : {')
_PRETTY_MEMBER = re.compile(r'\s*"[^"\n]{1,64}"\s*:')
PRETTY_RECORD_LINES = 200  # a pretty-printed record's lines on either side of its message
PRETTY_RECORD_CHARS = 1 << 20
NO_WRITER = "no-writer"  # the tag of a pretty-printed record that names no writer (refused unless its text does)


def pretty_record(line: Line, stamp: ParsedStamp, timectx: TimeContext) -> ParsedStamp:
    """A kernel-looking member line ('"message" : "NVRM: ..."') of a pretty-printed JSON document (an Elasticsearch
    or Splunk search answer saved as is, ``dmesg --json``): the record it belongs to (the outermost object around
    it that is not a member of another, bounded by its braces however the document is indented) is parsed whole,
    and its fields say when it was written and by whom, as one-line records' do. A record that does not parse, or
    is longer than the look around it, names an unknown writer: the line is no one's word."""
    above: list[str] = []
    climbed = 0  # the objects around the line left on the way up: the way down closes as many, then the record
    depth = 0
    root = None
    for text in line.preceding(PRETTY_RECORD_LINES):
        body = text.strip()
        closes, opens = body.startswith(("}", "]")), body.endswith(("{", "["))
        if (closes and opens) or (body.endswith("{") and body[:-1].rstrip().endswith("[")):
            if depth == 0:
                root = "{"  # '},{' or '"hits" : [ {': the line's record begins at this brace
                break
            if not closes:
                depth -= 1  # '[ {' above a record the walk has closed: it opens an array and that record
        elif closes:
            depth += 1
        elif opens:
            if depth > 0:
                depth -= 1
            elif body.endswith("[") or _PRETTY_MEMBER.match(text) is None:
                root = body[body.rindex("{"):] if body.endswith("{") else None  # a bare '{': the record's
                break
            else:
                climbed += 1  # '"_source" : {': an object the line's record holds
        above.append(text)
    below: list[str] = []
    depth = climbed + 1
    for text in line.iter_following(PRETTY_RECORD_LINES):
        body = text.strip()
        if body.startswith(("}", "]")):
            depth -= 1
            if depth == 0:
                below.append("}")
                break
        if body.endswith(("{", "[")):
            depth += 1
        below.append(text)
    record, duplicated = _parse_record("\n".join([root or "", *reversed(above), line.text, *below]),
                                       PRETTY_RECORD_CHARS) if root is not None and depth == 0 else (None, False)
    if record is None:
        return stamp._replace(fmt=EXPORT_RECORD, tag="unparsed-record")
    found = _record_stamp(record, duplicated, stamp, timectx)
    if found.fmt == EXPORT_RECORD and found.tag is None and found.facility is None:
        # a record that names no writer at all (an object in an array of a program's own record, whatever its
        # depth): nothing says the kernel wrote it
        return found._replace(tag=NO_WRITER)
    return found


def _json_record(text: str, stamp: ParsedStamp, timectx: TimeContext, dmesg: bool = True) -> Optional[ParsedStamp]:
    record, duplicated = _parse_record(text, JOURNAL_JSON_MAX)
    if record is None:
        return None
    return _record_stamp(record, duplicated, stamp, timectx, dmesg)


# the members of a 'dmesg --json' record (util-linux): a record with any other is a log store's
_DMESG_JSON_KEYS = frozenset({"pri", "fac", "time", "msg", "caller", "seq"})


def _record_stamp(record: dict[str, Any], duplicated: bool, stamp: ParsedStamp, timectx: TimeContext,
                  dmesg: bool = True) -> ParsedStamp:
    """What a JSON record's fields say about its line: when (its time fields), on which host, and who wrote it (its
    identifier and transport, its facility; a writer field given twice with different values names no one)."""
    flat = _flatten(record)
    uptime = record.get("time")
    if dmesg and isinstance(uptime, (int, float)) and not isinstance(uptime, bool) \
            and isinstance(record.get("msg"), str) and set(record) <= _DMESG_JSON_KEYS:
        return _dmesg_json(flat, float(uptime), stamp, timectx)
    host = next((flat[k] for k in _HOST_KEYS if isinstance(flat.get(k), str)), None)
    transport = flat.get("_TRANSPORT") or flat.get("TRANSPORT") or flat.get("transport") \
        or flat.get("labels.transport")  # Fluent Bit's systemd input with Strip_Underscores drops the '_'
    tag = journal_tag({"_TRANSPORT": transport, "SYSLOG_IDENTIFIER": next(
        (flat[k] for k in _TAG_KEYS if isinstance(flat.get(k), str)), None)})
    if duplicated:
        tag = "duplicated-fields"  # a program sent a field the journal sets (fluent-bit #501): whose is whose?
    facility = next((flat[k] for k in _FACILITY_KEYS if isinstance(flat.get(k), (str, int))), None)
    if facility is not None and str(facility).strip().lower() not in _KERNEL_FACILITIES:
        tag = f"{tag or '-'}(facility {str(facility)[:20]})"  # a program's record, whatever else it says
    when = stamp.time or _record_time(flat, timectx)
    return ParsedStamp(time=when, message=stamp.message, fmt=EXPORT_RECORD, host=host, uptime=None,
                       assumptions=stamp.assumptions, tag=tag, facility=stamp.facility)


_WRITER_KEYS = frozenset({*_TAG_KEYS, *_FACILITY_KEYS, "_TRANSPORT", "TRANSPORT", "transport", "_COMM", "COMM"})


def _parse_record(text: str, limit: int) -> tuple[Optional[dict[str, Any]], bool]:
    """``text`` read as one JSON object no longer than ``limit`` characters (as :func:`json_object` reads it), and
    whether a field that says who wrote it appears twice in one object with different values: json.loads keeps the
    last, which may be the one a program sent (Fluent Bit's systemd input passes a field a program repeats)."""
    duplicated = False

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal duplicated
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out and key in _WRITER_KEYS and out[key] != value:
                duplicated = True
            out[key] = value
        return out

    record = json_object(text, limit, pairs)
    return (record, duplicated) if record is not None else (None, False)


def _dmesg_json(flat: dict[str, Any], uptime: float, stamp: ParsedStamp, timectx: TimeContext) -> ParsedStamp:
    """A record of ``dmesg --json`` (util-linux): 'time' the seconds since boot, 'pri' the priority (its facility
    above the level; ``-x`` names it in 'fac'), 'msg' the kernel's text. Placed with the node's boot time, as
    dmesg's '[uptime]' is."""
    pri, fac = flat.get("pri"), flat.get("fac")
    facility = pri >> 3 if isinstance(pri, int) and not isinstance(pri, bool) else None
    if isinstance(fac, str) and fac.strip():
        facility = 0 if fac.strip().lower() in _KERNEL_FACILITIES else -1  # a name the kernel never writes
    time, note = since_boot(timectx, round(uptime * 1e6)) if 0 <= uptime < 1e9 \
        else (None, "uptime not resolved: boot time unknown")
    return ParsedStamp(time, stamp.message, "dmesg_json", None, uptime, (*stamp.assumptions, note), None, facility)


def _flatten(record: dict[str, Any], prefix: str = "", depth: int = 0) -> dict[str, Any]:
    """{"host": {"name": "x"}} -> {"host.name": "x", "name": "x"}: the keys an export nests its fields under
    (_source, labels, host, process), by their dotted path and by their own name (the first one wins)."""
    out: dict[str, Any] = {}
    for key, value in record.items():
        if isinstance(value, dict) and depth < 4:
            for sub, inner in _flatten(value, f"{prefix}{key}.", depth + 1).items():
                out.setdefault(sub, inner)
        else:
            out.setdefault(f"{prefix}{key}", value)
            out.setdefault(key, value)
    if prefix == "":
        for key in list(out):
            short = key.rsplit(".", 2)
            if len(short) == 3:
                out.setdefault(f"{short[1]}.{short[2]}", out[key])  # _source.host.name -> host.name
    return out


def _record_time(flat: dict[str, Any], timectx: TimeContext) -> Optional[datetime]:
    for key in _TIME_KEYS:
        value = flat.get(key)
        if isinstance(value, str) and value:
            kibana = _KIBANA_TIME.fullmatch(value.strip())
            if kibana:
                value = f"{kibana[1]} {kibana[2]} {kibana[4]}"
                return parse_line_time(f"{value} x", timectx).time
            found = parse_iso(value.replace(" ", "T", 1) if value[4:5] == "-" else value, timectx)
            if found is not None:
                return found
    return None


def _csv_record(text: str, stamp: ParsedStamp, timectx: TimeContext) -> Optional[ParsedStamp]:
    """A CSV row of a log store's export: the first cell a time, a short cell without blanks the host, the
    last cell the message (whose own syslog header, when it has one, wrapped_record has read already)."""
    try:
        cells = next(csv.reader([text]))
    except (csv.Error, StopIteration):
        return None
    if len(cells) < 2:
        return None
    when = _record_time({"time": cells[0]}, timectx)
    words = [c for c in cells[1:-1] if c and " " not in c and len(c) <= 255]
    host = words[0] if words else None
    # a second such cell is the program (Kibana's process.name, Splunk's sourcetype or app): only 'kernel' is
    # the kernel's; without one the row names no program and stays unverified
    tag = words[1] if len(words) > 1 else None
    return ParsedStamp(time=when, message=cells[-1], fmt=EXPORT_RECORD, host=host, uptime=None,
                       assumptions=stamp.assumptions, tag=tag)


_BINARY_FIELD = re.compile(r"[ \t]*[A-Z_][A-Z0-9_]{0,63}[ \t]*$")
_RAW_BYTES = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffd]")  # a binary field's length bytes
_JOURNAL_FIELD = re.compile(r"[ \t]*([A-Z_][A-Z0-9_]{0,63})=(.*)")
# json-pretty's field lines: '\t"_TRANSPORT" : "kernel",' (the value JSON: a string, a number, a list of bytes)
_PRETTY_FIELD = re.compile(r'[ \t]*"([A-Z_][A-Z0-9_]{0,63})" : (.*?),?[ \t]*$')
JOURNAL_RECORD_LINES = 120  # a record of journalctl -o export / verbose is read no further either way


def journal_record(line: Line, stamp: ParsedStamp, timectx: TimeContext) -> ParsedStamp:
    """The ``MESSAGE=`` line of a ``journalctl -o export`` or ``-o verbose`` record, with what its record says:
    when (``__REALTIME_TIMESTAMP``, else the verbose head line), on which host (``_HOSTNAME``) and from which
    program (:func:`~slurm_attrib.timestamps.journal_tag`). A record ends at a blank line (export) or at a
    line that is no field (the next verbose head)."""
    fields: dict[str, object] = {}
    head: Optional[ParsedStamp] = None
    forged = False
    pretty = _PRETTY_FIELD.match(line.text[len(line.lead):]) is not None
    field_of = _pretty_field if pretty else _export_field
    for text in line.preceding(JOURNAL_RECORD_LINES):
        found = field_of(text)
        if found is None:
            if _BINARY_FIELD.match(text) or _RAW_BYTES.search(text):
                forged = True  # export writes a field with newlines as 'NAME', a 64-bit length and raw bytes
            elif text.strip():
                head = parse_line_time(text, timectx)
            break
        name, value = found
        if name in fields and name.startswith("_"):
            forged = True  # the journal sets each trusted field once: a second one is a message's text
        fields.setdefault(name, value)
        if name == "__CURSOR" and not pretty:
            break
    for text in line.iter_following(JOURNAL_RECORD_LINES):
        found = field_of(text)
        if found is None or (found[0] == "__CURSOR" and not pretty):
            break
        fields.setdefault(*found)
    realtime = fields.get("__REALTIME_TIMESTAMP")
    time = head.time if head is not None and head.fmt == "journal_verbose" else None
    if isinstance(realtime, str) and realtime.isdecimal() and len(realtime) <= 20:
        time = from_epoch_micros(int(realtime))
    host = fields.get("_HOSTNAME")
    return ParsedStamp(time=time, message=stamp.message, fmt=stamp.fmt, host=host if isinstance(host, str) else None,
                       uptime=None, assumptions=stamp.assumptions,
                       tag="journal-binary-data" if forged else journal_tag(fields))


def _export_field(text: str) -> Optional[tuple[str, str]]:
    """(name, value) of an export or verbose record's field line, or None."""
    found = _JOURNAL_FIELD.match(text)
    return (found.group(1), found.group(2)) if found else None


def _pretty_field(text: str) -> Optional[tuple[str, str]]:
    """(name, value) of a json-pretty field line, a JSON string decoded (any other value as written), or None."""
    found = _PRETTY_FIELD.match(text)
    if found is None:
        return None
    raw = found.group(2)
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    return found.group(1), value if isinstance(value, str) else raw


def correct_clocks(ctx: EngineContext) -> None:
    """Put every symptom of a node whose clock the collector found off (collection.yaml's clock skew) on the
    controller's clock, its evidence and its upper bound with it: its kernel and its processes stamp with the
    same clock, and every later phase orders and windows by these times. Run before the symptoms are sorted."""
    skews = ctx.bundle.clock_skews
    if not skews:
        return
    for sym in ctx.symptoms:
        skew = skews.get(sym.node) if sym.node else None
        if not skew or sym.time is None:
            continue
        shift_time(sym, timedelta(seconds=-skew))


def _unalias(fields: dict[str, Any]) -> dict[str, Any]:
    """``host__2`` → ``host`` (the first branch that set it wins), typed by its real name."""
    out: dict[str, Any] = {}
    for key, value in fields.items():
        name = key.partition("__")[0]
        out.setdefault(name, _typed(name, value) if name != key and isinstance(value, str) else value)
    return out


CLOCK_OFFSET_MIN_S = 60.0  # a smaller offset is the skew tolerance's to absorb
# the daemon's own line: its name with its pid (openlog's LOG_PID), or a journal record of its own command
_DAEMON_WROTE = re.compile(r"\b(?:chronyd|ntpd)\[\d{1,10}\]: |\"_COMM\"\s*:\s*\"(?:chronyd|ntpd)\"")


def apply_clock_offsets(ctx: EngineContext) -> None:
    """Move the stamps of a node whose time daemon said its clock was off (kernel.clock_offset): by the slewed
    offset all of them, by a step's offset those stamped before the step. One statement per node decides, the
    first the daemon itself wrote (with its pid); the daemon's own line stays as stamped. Such a line is only
    unverified (a user can write it with logger), so a stamp it would move across the job window's edge is not
    moved: it is marked ``clock_in_doubt`` and a fault so marked never decides alone (filter.outside_job_window).
    Run before the symptoms are sorted."""
    symptoms = ctx.symptoms
    offsets: dict[str, tuple[float, Optional[datetime]]] = {}
    for sym in symptoms:
        if sym.kind != "clock_offset" or not sym.node or sym.node in offsets or sym.time is None:
            continue
        if not sym.evidence or not _DAEMON_WROTE.search(sym.evidence[0].raw):
            continue
        fields = sym.fields
        value = fields.get("wrong") or fields.get("stepped") or fields.get("ntp_step")
        try:
            seconds = float(str(value))
        except ValueError:
            continue
        if abs(seconds) >= CLOCK_OFFSET_MIN_S:
            offsets[sym.node] = (seconds, None if fields.get("wrong") else sym.time)
    if not offsets:
        return
    for sym in symptoms:
        found = offsets.get(sym.node) if sym.node and sym.kind != "clock_offset" else None
        if found is None or sym.time is None or (found[1] is not None and sym.time >= found[1]):
            continue
        shift = timedelta(seconds=found[0])
        if ctx.in_window(sym.time) != ctx.in_window(sym.time + shift):
            sym.fields["clock_in_doubt"] = found[0]
            sym.notes.append(f"the time daemon on {sym.node} said its clock was off by {found[0]:+g} s: read so, "
                             "this would lie on the other side of the job window's edge; kept as stamped, in doubt")
            continue
        shift_time(sym, shift)
        sym.notes.append(f"stamp moved by {found[0]:+g} s: the time daemon on {sym.node} said its clock was off")


def _said_time(said: Optional[str], stamp: ParsedStamp, timectx: TimeContext) -> Optional[ParsedStamp]:
    """A line without a stamp of its own whose message names when it happened (a rule's ``at`` group:
    Slurm's ``CANCELLED AT 2024-05-01T10:00:03``, in the node's zone) has that time, not a neighbour's."""
    if not said or (stamp.time is not None and "time taken from a preceding line" not in stamp.assumptions):
        return None
    when = parse_iso(said, timectx)
    if when is None:
        return None
    return ParsedStamp(time=when, message=stamp.message, fmt=stamp.fmt, host=stamp.host, uptime=stamp.uptime,
                       tag=stamp.tag, assumptions=("time from the message's own date-time",))


Searcher = tuple[re.Pattern[str], Optional[Screened]]  # a rule's regex and exclude, as _LineHandler searches them


def _searcher(rule: Rule) -> Searcher:
    """The rule's regex behind its gate (the same spans and groups; re skips the positions no match begins at: a
    match at the end of a line, 16 -> 5 us for app.cuda_error's twenty branches) and its exclude screened on its
    literals (the same answer; most matched lines hold none of them)."""
    assert rule.match is not None
    exclude = rule.match.exclude
    return gated(rule.match.regex), (Screened(exclude) if exclude is not None else None)


def _fields_of(groups: dict[str, Any]) -> dict[str, Any]:
    """A match's groups that took part, in name order, typed as :func:`_typed` types them (written out: this
    runs for every symptom line, a dozen groups each)."""
    fields: dict[str, Any] = {}
    for key in sorted(groups):
        value = groups[key]
        if value is None:
            continue
        if key in INT_FIELDS:
            try:
                fields[key] = int(value)
            except ValueError:
                fields[key] = value
        else:
            fields[key] = value.strip()
    return fields


def _typed(key: str, value: str) -> Any:
    if key in INT_FIELDS:
        try:
            return int(value)
        except ValueError:
            return value
    return value.strip()


class _Defaults(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return ""


# a parenthesised part of a summary template ('(tried to allocate {requested})'), its placeholders
_TEMPLATE_ASIDE = re.compile(r" ?\(([^(){}]*\{\w+\}[^()]*)\)")
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


@functools.lru_cache(maxsize=1024)
def _asides(template: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The template's asides (with the blank before them) and the placeholders of each: a template is one rule's,
    its asides found once, not for every symptom it renders."""
    return tuple((m.group(0), tuple(_PLACEHOLDER.findall(m.group(1)))) for m in _TEMPLATE_ASIDE.finditer(template))


def render_summary(template: str, sym: Symptom) -> str:
    """The summary from its template and the symptom's fields. An aside in parentheses whose fields the line did
    not give is left out rather than printed empty ('cuda out of memory on rank 3', not '... (tried to allocate )')."""
    values = _Defaults(sym.fields)
    values.update(kind=sym.kind, node=sym.node or "?", rank="?" if sym.rank is None else sym.rank,
                  gpu=sym.gpu or "?")
    for aside, names in _asides(template):
        for name in names:
            if values[name] not in ("", None):
                break
        else:  # (a loop, not all() of a generator: every symptom's summary is rendered)
            template = template.replace(aside, "", 1)
    try:
        return template.format_map(values)[:300]
    except (ValueError, IndexError, KeyError, AttributeError):
        return template[:300]
