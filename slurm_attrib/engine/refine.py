"""Phase 3, refine: correlate symptoms across nodes and time, decide root candidates versus
cascades, and demote cascades to supporting symptoms of the root (never deleting them).

Stages run in order: ``correlate`` (join facts: GPU identities, Xid chains, peers), ``classify``
(roles that depend on other symptoms), ``demote`` (choose the leading candidates, attach the rest).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Optional

from ..model import SOURCE_APP, SOURCE_DIAG, SOURCE_KERNEL, SOURCE_METRICS, TRUST_KERNEL, TRUST_UNVERIFIED, Symptom
from ..ruleset import Rule
from .causal import CausalModel
from .context import EngineContext
from .params import int_list, integer, seconds, str_list
from .registry import rule
from .timeinfer import latest_time


@rule("refine.gpu_identity")
def gpu_identity(ctx: EngineContext, rule_: Rule) -> int:
    """Attach the GPU UUID to symptoms that name a PCI address (from the driver's UUID line or
    the node facts) and the PCI address to app symptoms that name a CUDA device index, where the index
    can name only one GPU."""
    uuids: dict[tuple[Optional[str], str], str] = {}
    for sym in ctx.symptoms:
        if sym.kind == "gpu_uuid" and sym.gpu:
            uuids[(sym.node, sym.gpu)] = str(sym.fields.get("uuid"))
    count = 0
    for sym in ctx.active():
        facts = ctx.bundle.facts_for(sym.node)
        if sym.gpu is None and facts and isinstance(sym.fields.get("cuda_dev"), str):
            sym.gpu = _only_gpu(ctx, sym.node, str(sym.fields["cuda_dev"]))
        if sym.gpu and sym.kind != "gpu_uuid" and "uuid" not in sym.fields:
            uuid = uuids.get((sym.node, sym.gpu)) or (facts.uuid_for(sym.gpu) if facts else None)
            if uuid:
                sym.fields["uuid"] = uuid
                count += 1
    return count


def _only_gpu(ctx: EngineContext, node: Optional[str], cuda_dev: str) -> Optional[str]:
    """The PCI address CUDA device ``cuda_dev`` (NCCL's '[1]') must be on ``node``, or None. The index is
    the process's own numbering: CUDA counts only the devices CUDA_VISIBLE_DEVICES leaves it, in its own
    order (fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID), and Slurm's binding (--gpus-per-task,
    --gpu-bind) gives every task its own set: device 1 is not the node's GPU 1. Only device 0 where the
    job had one GPU on the node, or the node has one, names a GPU for certain."""
    if cuda_dev != "0":
        return None
    allocated = ctx.bundle.allocated_gpus(node)
    if allocated is not None:
        return next(iter(allocated)) if len(allocated) == 1 else None
    facts = ctx.bundle.facts_for(node)
    return facts.gpus[0][0] if facts is not None and len(facts.gpus) == 1 else None


# the process group a watchdog line names anywhere ('[PG ID 1 PG GUID 1 Rank 4] Process group watchdog thread
# terminated with exception: [Rank 4] Watchdog caught ...', '[PG 5 Rank 0]'), and the work's own timeout
_PG_NAMED = re.compile(r"\[PG (?:ID )?(\d{1,6})\b")
_TIMEOUT_MS = re.compile(r"Timeout\(ms\)=(\d{1,12})")


def _first_group(pattern: re.Pattern[str], text: str) -> str:
    """The first group of ``pattern``'s first match in ``text``, or "" (a search stops there; findall reads on)."""
    found = pattern.search(text)
    return found.group(1) if found is not None else ""


@rule("refine.watchdog_desync")
def watchdog_desync(ctx: EngineContext, rule_: Rule) -> int:
    """Watchdog timeouts of one process group's collective N that disagree on the operation or its size:
    the ranks called different collectives (the workload's), see the rule's description."""
    groups: dict[tuple[str, str, str, tuple[str, ...]], list[Symptom]] = {}
    steps_of: dict[Optional[str], tuple[str, ...]] = {}  # a node's steps, looked up once: a step lists every node
    for sym in ctx.active():
        if sym.kind == "watchdog_timeout" and sym.fields.get("seq") is not None and sym.fields.get("op"):
            raw = sym.evidence[0].raw if sym.evidence else ""
            pg = _first_group(_PG_NAMED, raw)  # the rule's own group, or one before PyTorch's wrapper
            timeout = _first_group(_TIMEOUT_MS, raw)
            steps = steps_of.get(sym.node)
            if steps is None:
                steps = steps_of[sym.node] = tuple(step.id for step in ctx.job.steps if sym.node in step.nodes)
            groups.setdefault((pg, str(sym.fields["seq"]), timeout, steps), []).append(sym)
    end = ctx.job.end or ctx.window_end
    outlived = timedelta(seconds=seconds(rule_, "max_before_end_s"))
    strength = integer(rule_, "strength")
    count = 0
    for (pg, seq, _, _), found in sorted(groups.items()):
        latest = max((t for s in found if (t := latest_time(s)) is not None), default=None)
        if end is not None and latest is not None and end - latest > outlived:
            continue  # an earlier step's stall the job went on after: not what ended it
        views = {(str(s.fields["op"]), str(s.fields.get("numel_in", ""))) for s in found}
        ops = {op for op, _ in views}
        sizes = {size for _, size in views if size}
        if len(ops) < 2 and len(sizes) < 2:
            continue
        first, *rest = sorted(found, key=Symptom.sort_key)
        seen = ", ".join(f"{op}" + (f" of {size} elements" if size else "") for op, size in sorted(views))
        first.role, first.category, first.responsible = "candidate", "application", "workload"
        first.strength = strength
        first.summary = (f"ranks timed out on collective {seq}" + (f" of process group {pg}" if pg else "")
                         + f" but called different collectives ({seen}): the ranks went out of step")
        first.actions = ("find the code path some ranks took that the others did not (a condition on the rank "
                         "or on the data, a shape that depends on the batch); TORCH_DISTRIBUTED_DEBUG=DETAIL "
                         "names the first difference",)
        for sym in rest:
            sym.supports = first.id
        count += len(found)
    return count


@rule("refine.xid_chain")
def xid_chain(ctx: EngineContext, rule_: Rule) -> int:
    """``Xid 45 ... caused by previous Xid N`` and Xid 154 (recovery action) support the Xid they
    follow on the same GPU, and so does an Xid a process's own fault left behind (params.after_same_process)."""
    count = 0
    xids = [s for s in ctx.symptoms if s.kind == "xid"]
    after_process = {int(k): {int(c) for c in v} for k, v in (rule_.params.get("after_same_process") or {}).items()}
    window = float(rule_.params.get("same_process_window_s", 60))
    lines = int(rule_.params.get("same_process_lines", 20))
    for sym in xids:
        wanted = sym.fields.get("caused_by_xid")
        code = sym.fields.get("code")
        if isinstance(code, int) and code in after_process and sym.fields.get("pid") is not None and wanted is None:
            cause = _same_process_fault(xids, sym, after_process[code], window, lines)
        elif code != 154 and wanted is None:
            continue
        else:
            cause = _previous_xid(xids, sym, wanted if isinstance(wanted, int) else None)
        if cause is not None:
            sym.supports = cause.id or None
            sym.fields["follows"] = f"xid {cause.fields.get('code')}"
            if sym.fields.get("code") == 154 and isinstance(sym.fields.get("decoded"), dict):
                cause.notes.append(f"driver recovery action: {sym.summary}")
            if sym.role == "candidate":
                sym.role = "cascade"
            count += 1
    return count


@rule("refine.fallen_off_bus_with_xid79")
def fallen_off_bus_with_xid79(ctx: EngineContext, rule_: Rule) -> int:
    """The driver may print 'GPU has fallen off the bus' beside its Xid 79 line: one event, so the
    message supports the Xid instead of standing as a second candidate."""
    xid79 = [s for s in ctx.active() if s.kind == "xid" and s.fields.get("code") == 79]
    skew = ctx.tolerance(ctx.settings.skew_s)
    count = 0
    for sym in ctx.active():
        if sym.kind != "gpu_fallen_off_bus":
            continue
        # a lost-GPU line that names no GPU (NV_ERR_GPU_IS_LOST in an RPC) is the same node's Xid 79
        twin = next((x for x in xid79 if x.node == sym.node and sym.gpu in (x.gpu, None) and x.time and sym.time
                     and abs(x.time - sym.time) <= skew), None)
        if twin is not None:
            sym.role, sym.supports = "cascade", twin.id
            count += 1
    return count


def _same_process_fault(xids: list[Symptom], sym: Symptom, codes: set[int], window_s: float,
                        lines: int) -> Optional[Symptom]:
    """The latest Xid of one of ``codes`` before ``sym`` on its GPU, raised for the same pid: both stamped, within
    ``window_s`` of it; otherwise in the same file within ``lines`` lines and for the same process name."""
    found = [other for other in xids if other is not sym and not other.dropped and other.node == sym.node
             and other.gpu == sym.gpu and other.fields.get("code") in codes
             and other.fields.get("pid") == sym.fields.get("pid") and Symptom.sort_key(other) < Symptom.sort_key(sym)
             and _close_by(other, sym, window_s, lines)]
    return max(found, key=Symptom.sort_key) if found else None


def _close_by(earlier: Symptom, later: Symptom, window_s: float, lines: int) -> bool:
    if earlier.time is not None and later.time is not None:
        return timedelta(0) <= later.time - earlier.time <= timedelta(seconds=window_s)
    if not earlier.evidence or not later.evidence or earlier.evidence[0].file != later.evidence[0].file:
        return False
    name = later.fields.get("process")
    return 0 < later.evidence[0].line - earlier.evidence[0].line <= lines \
        and (name is None or earlier.fields.get("process") in (None, name))


def _previous_xid(xids: list[Symptom], sym: Symptom, code: Optional[int]) -> Optional[Symptom]:
    best: Optional[Symptom] = None
    for other in xids:
        if other is sym or other.dropped or other.node != sym.node or other.gpu != sym.gpu \
                or other.fields.get("code") in (45, 154):
            continue
        if code is not None and other.fields.get("code") != code:
            continue
        if _not_after(other.time, sym.time) and (best is None or Symptom.sort_key(other) > Symptom.sort_key(best)):
            best = other
    return best


def _not_after(a: Optional[datetime], b: Optional[datetime]) -> bool:
    return a is None or b is None or a <= b


@rule("refine.causal_model")
def causal_model(ctx: EngineContext, rule_: Rule) -> int:
    """Load the causal model for the demote stage and note every pair of independent physical faults
    inside the decision window (it fires once per pair)."""
    single = ctx.job.nodes[0] if len(ctx.job.nodes) == 1 else None
    ctx.causal = model = replace(CausalModel.from_params(rule_.params, rule_.where), single_node=single)
    window = ctx.tolerance(model.decision_window_s)
    faults = sorted((s for s in ctx.active() if s.role == "candidate" and s.time and model.is_physical(s)),
                    key=Symptom.sort_key)
    budget = int(rule_.params.get("max_pair_checks", 200_000))  # 10,000 Xids in one window: 5e7 pairs
    pairs = checks = 0
    for i, first in enumerate(faults):
        for second in faults[i + 1:]:
            assert first.time is not None and second.time is not None
            if second.time - first.time > window:
                break
            checks += 1
            if checks > budget:
                ctx.notes.append(f"causal model: {len(faults)} physical faults; the pairs after the first {budget} "
                                 "checks were not compared (refine.causal_model params.max_pair_checks)")
                return pairs
            if model.independent_faults(first, second):
                first.notes.append(f"independent of {second.id} on {second.node} (causal model)")
                pairs += 1
    return pairs


@rule("refine.app_errors_explained_by_hardware")
def app_errors_explained(ctx: EngineContext, rule_: Rule) -> int:
    """A CUDA/application error on a node where a hardware fault happened shortly before is a
    consequence of that fault: it becomes a cascade supporting it. A hardware fault is a kernel-log
    infrastructure candidate at least ``params.min_cause_strength`` strong."""
    threshold = int(rule_.params.get("min_cause_strength", 60))
    lost = _DeviceLoss.of(rule_)
    hardware = sorted((s for s in ctx.active() if s.role == "candidate" and s.responsible == "infrastructure"
                       and s.evidence and s.evidence[0].source == "kernel" and s.strength >= threshold),
                      key=Symptom.sort_key)  # sorted once: the loop below changes only app symptoms
    if not hardware:
        return 0
    max_gap_s = float(rule_.params.get("max_gap_s", 300))
    killed = {pid: cause for cause in hardware if (pid := _killed_pid(cause)) is not None
              and all(e.trust != TRUST_UNVERIFIED for e in cause.evidence)}  # not a line any local user can write
    count = 0
    for sym in ctx.active():
        if sym.role != "candidate" or not sym.evidence or sym.evidence[0].source != "app":
            continue
        named = _APP_PID.search(sym.evidence[0].raw) if killed else None
        cause = killed.get(int(named.group(1) or named.group(2))) if named else None
        if cause is not None and ((sym.node is not None and cause.node != sym.node) or (
                cause.time is not None and sym.time is not None
                and abs((sym.time - cause.time).total_seconds()) > max_gap_s)):
            cause = None  # the same number on another node, or far from the kill, is another process
        cause = cause or _hardware_before(ctx, hardware, sym, max_gap_s, lost)
        if cause is not None:
            sym.role, sym.supports = "cascade", cause.id
            sym.notes.append(f"explained by {cause.kind} on {cause.node} ({cause.id})")
            count += 1
    return count


# the process the kernel killed for a hardware memory error it could not recover (mm/memory-failure.c kill_proc:
# 'Memory failure: 0x1f3a2c: Sending SIGBUS to python:88412 due to hardware memory corruption', 4.x 'Killing ...';
# arch/x86 'MCE: Killing python:88412 due to hardware memory corruption fault at ...'), and the same process as the
# job's launcher reports its end ('Signal 7 (SIGBUS) received by PID 88412', '(pid: 88412)'): wherever the launcher's
# line is, that error is the memory's
_KILLED = re.compile(r"(?:Sending SIGBUS to|Killing) [^\s:]{1,64}:(\d{1,9}) due to hardware memory corruption")
_APP_PID = re.compile(r"\bSIG(?:BUS|KILL)\)? received by PID (\d{1,9})\b|\bexitcode\s*:\s*-(?:7|9) \(pid: (\d{1,9})\)")


def _killed_pid(cause: Symptom) -> Optional[int]:
    """The pid a kernel memory-failure line says it killed, or None."""
    text = str(cause.fields.get("sigbus") or cause.fields.get("mce_kill") or "")
    found = _KILLED.search(text)
    return int(found.group(1)) if found else None


@dataclass(frozen=True)
class _DeviceLoss:
    """params.device_loss_*: the faults that take a GPU away (their kinds, and their Xid codes), and how
    long after an application error on its node such a fault may be stamped and still explain it."""

    kinds: frozenset[str]
    xid_codes: frozenset[int]
    after: timedelta

    @classmethod
    def of(cls, rule_: Rule) -> _DeviceLoss:
        return cls(kinds=frozenset(str_list(rule_, "device_loss_kinds")),
                   xid_codes=frozenset(int_list(rule_, "device_loss_xid_codes")),
                   after=timedelta(seconds=seconds(rule_, "device_loss_after_s")))

    def covers(self, cause: Symptom, sym: Symptom) -> bool:
        """``cause`` took a GPU away on the node of ``sym``, an error that names no cause of its own (an
        'unspecified launch failure'; an illegal address is the code's, and stays so when a fault follows)."""
        lost = cause.kind in self.kinds or (cause.kind == "xid" and cause.fields.get("code") in self.xid_codes)
        return lost and cause.node == sym.node and bool(sym.fields.get("indeterminate"))


def _hardware_before(ctx: EngineContext, hardware: list[Symptom], sym: Symptom,
                     max_gap_s: float, lost: _DeviceLoss) -> Optional[Symptom]:
    """The first hardware fault on the symptom's node between ``max_gap_s`` before its earliest
    possible time and its latest possible time (plus clock skew); ``hardware`` is in sort_key order.
    A fault that took the GPU away may also come up to ``lost.after`` later than an error that names no
    cause: the application's clock and the kernel's are not the same clock."""
    skew = ctx.tolerance(ctx.settings.skew_s)
    latest: Optional[datetime] = None
    for cause in hardware:
        if not ctx.causal.explains(cause, sym):
            continue
        if cause.time is None or sym.time is None:
            return cause
        if cause.time < sym.time - ctx.tolerance(max_gap_s):
            continue  # too old
        latest = latest or latest_time(sym)
        allowed = max(skew, lost.after) if lost.covers(cause, sym) else skew
        if latest is None or cause.time <= latest + allowed:
            return cause
    return None


@rule("refine.network_peer")
def network_peer(ctx: EngineContext, rule_: Rule) -> int:
    """An NCCL/IB error that names a peer points at that node; the error itself is a cascade on the
    node that printed it."""
    count = 0
    for sym in ctx.active():
        peer = sym.fields.get("peer_node")
        if sym.kind == "nccl_ib_completion_error" and isinstance(peer, str):
            sym.notes.append(f"the peer named in the error is {peer}")
            count += 1
    return count


def _strongest_first(symptoms: list[Symptom]) -> list[Symptom]:
    return sorted(symptoms, key=lambda s: (-s.strength, *Symptom.sort_key(s)))


def forgeable(sym: Symptom) -> bool:
    """A claim that rests only on kernel-looking lines any local program can have written (a syslog file, a shipped
    log: trust ``unverified``), with no GPU snapshot or diagnostic behind it."""
    kernel = [e for e in sym.evidence if e.source == SOURCE_KERNEL]
    return bool(kernel) and all(e.trust == TRUST_UNVERIFIED for e in kernel) \
        and all(e.source in (SOURCE_KERNEL, SOURCE_APP) for e in sym.evidence)


def lost_unreported(ctx: EngineContext) -> set[str]:
    """The nodes of a job that ended NODE_FAIL whose bundle never arrived (the finalizer's record, not a line anyone
    printed): they failed by more than anyone's words, which confirms a claim about them."""
    if ctx.job.state != "NODE_FAIL":
        return set()
    return set(ctx.job.missing_bundles)


def _confirmed_fault(sym: Symptom) -> bool:
    """An infrastructure fault that a line only the kernel writes (the journal's kernel transport, the ring buffer)
    or the collector's own GPU snapshot or diagnostic says."""
    return sym.responsible == "infrastructure" and any(
        (e.source == SOURCE_KERNEL and e.trust == TRUST_KERNEL) or e.source in (SOURCE_DIAG, SOURCE_METRICS)
        for e in sym.evidence)


def _kernel_written_first(ctx: EngineContext, candidates: list[Symptom]) -> list[Symptom]:
    """Where an infrastructure fault is confirmed (:func:`_confirmed_fault`), candidates that rest only on lines a
    program can forge do not compete for the lead: a forged Xid stamped before a real fault must neither lead the
    verdict nor make it ambiguous. A workload's event the kernel logs (an OOM kill the job itself caused) does not
    set them aside, nor does it set aside a claim about a node Slurm lost."""
    if len(candidates) < 2 or not any(_confirmed_fault(s) for s in candidates):
        return candidates
    lost = lost_unreported(ctx)
    kept = [s for s in candidates if not forgeable(s) or s.node in lost]
    for sym in candidates:
        if sym not in kept:
            sym.notes.append("rests only on lines any local program can write, beside a confirmed fault (a line only "
                             "the kernel writes, the collector's GPU snapshot): it does not compete for the lead")
    return kept or candidates


@rule("refine.select_root")
def select_root(ctx: EngineContext, rule_: Rule) -> int:
    """Choose the leading root candidates.

    The earliest candidate leads, except that a stronger candidate (by more than
    ``params.override_margin``) that follows within the clock-skew tolerance takes the lead:
    a kernel fault and the CUDA error it causes can be logged out of order. Candidates on other
    nodes of the same strength tier within ``ambiguity_s`` of the leader and not explained by it,
    independent physical faults on other nodes within the decision window, and unplaced candidates
    (:func:`_unplaced`) stay as co-leaders (the verdict is then ambiguous).
    """
    candidates = _kernel_written_first(ctx, [s for s in ctx.active() if s.role == "candidate"
                                            and s.supports is None])
    if not candidates:
        return 0
    timed = sorted((s for s in candidates if s.time is not None), key=Symptom.sort_key)
    margin = int(rule_.params.get("override_margin", 15))
    if timed:
        leader = _strongest_of_its_burst(ctx, timed)
        latest = latest_time(leader)
        if latest is not None and leader.time is not None:
            latest = max(latest, leader.time)  # a bound below the symptom's own time bounds nothing
        horizon = latest + ctx.tolerance(ctx.settings.skew_s) if latest else None
        close = [s for s in timed if s.time is not None and (horizon is None or s.time <= horizon)] or [leader]
        if leader.fields.get("time_inferred"):
            # The leader's own time is only a bound: among what may have happened first, the strongest,
            # precisely stamped, located candidate leads.
            leader = min(close, key=lambda s: (-s.strength, bool(s.fields.get("time_inferred")), s.node is None,
                                                 *Symptom.sort_key(s)))
        else:
            strongest = _strongest_first(close)[0]
            # a kernel fault and the error it caused, logged out of order; the program's own error (or one whose
            # side is unknown) yields only to a fault that can have caused it
            if strongest.strength > leader.strength + margin and not _causes_another_kind(ctx, leader, strongest) \
                    and (leader.responsible == "infrastructure" or ctx.causal.explains(strongest, leader)):
                leader = strongest
    else:
        leader = _strongest_first(candidates)[0]
    tier = int(rule_.params.get("tier_width", 10))
    floor = int(rule_.params.get("unplaced_min_strength", 40))
    leader = _at_the_hang(ctx, leader, timed)
    leader = _bystander_yields(ctx, leader, candidates, floor)
    leaders = [leader, *_co_leaders(ctx, leader, timed, tier), *_unplaced(ctx, leader, candidates, floor),
               *_untimed_twins(leader, candidates)]
    leaders += _own_code_errors(ctx, leader, timed, float(rule_.params.get("code_error_window_s", 300)), leaders)
    leaders += _fault_just_after(ctx, leader, timed, leaders)
    leaders += _fatal_after_unseen_link(ctx, leader, timed, leaders,
                                        float(rule_.params.get("unseen_link_window_s", 120)))
    for sym in leaders:
        sym.fields["leading"] = True
    ctx.leaders = leaders
    return len(leaders)


def _strongest_of_its_burst(ctx: EngineContext, timed: list[Symptom]) -> Symptom:
    """The earliest candidate, or the strongest of those its own file logged within _BURST of it for the same node
    and rank that it cannot have caused: two rules' readings of one line, or the lines of one failure report
    (NCCL's warning and PyTorch's exception, written to stdout and stderr and merged in whatever order), came at one
    moment, so their order says nothing of which came first; a cause of another class (a file server, then a hung
    task) keeps the lead."""
    first = timed[0]
    where = first.evidence[0] if first.evidence else None
    if where is None or first.time is None:
        return first
    same = [s for s in timed if s.evidence and s.time is not None and s.evidence[0].file == where.file
            and (s.node, s.rank) == (first.node, first.rank) and abs(s.time - first.time) <= _BURST
            and (s is first or not _causes_another_kind(ctx, first, s))]
    return _strongest_first(same)[0]


# how close two candidates of one file are to be one report's lines whatever order the file shows them in
_BURST = timedelta(seconds=1)


def _fatal_after_unseen_link(ctx: EngineContext, leader: Symptom, timed: list[Symptom], leaders: list[Symptom],
                             window_s: float) -> list[Symptom]:
    """A link that went down (a port, a NIC) whose loss the job's output never shows (no network error of the
    program's: no completion error, no socket reset, no NCCL network failure) may be a port the job did not use; a
    fault on another node within ``window_s`` after it that kills what runs on it (a GPU fallen off the bus) may be
    what stopped the job: the first such co-leads, and the verdict says both rather than the earlier alone."""
    causal = ctx.causal
    if leader.time is None or not causal.classes_of(leader) & {"link_fault"} \
            or causal.classes_of(leader) & _FATAL_CLASSES:
        return []
    if any(s.category == "network" and s.evidence and s.evidence[0].source == SOURCE_APP for s in ctx.active()):
        return []  # the job's own output shows a network failure: the link may well be it
    span = ctx.tolerance(window_s)
    for sym in timed:
        if sym in leaders or sym.time is None or sym.node in (None, leader.node) or sym.role != "candidate":
            continue
        if timedelta(0) <= sym.time - leader.time <= span and sym.responsible == "infrastructure" \
                and causal.classes_of(sym) & _FATAL_CLASSES and not causal.explains(leader, sym):
            return [sym]
    return []


def _causes_another_kind(ctx: EngineContext, cause: Symptom, effect: Symptom) -> bool:
    """``cause`` can produce ``effect`` and they are faults of different classes (a file server that stopped
    answering, then a node's hung-task panic): the earlier one keeps the lead however strong the later is. Two
    reports of one fault (a GPU's port error and its Xid 79) are one class: the stronger names it better."""
    causal = ctx.causal
    return causal.explains(cause, effect) and not causal.classes_of(cause) & causal.classes_of(effect)


def _at_the_hang(ctx: EngineContext, leader: Symptom, timed: list[Symptom]) -> Symptom:
    """Where the job's stuck collectives began at a known time (:attr:`EngineContext.hang`), a fault that kills
    what runs on it, stamped at that time, leads over an earlier candidate that lasts (a file system that
    stopped answering minutes before): the one at the moment the job stopped explains the stop."""
    if ctx.hang is None or leader.time is None:
        return leader
    began, margin = ctx.hang
    if leader.time >= began - margin:
        return leader
    at_hang = [s for s in timed if s.time is not None and abs(s.time - began) <= margin
               and s.responsible == "infrastructure" and ctx.causal.classes_of(s) & _FATAL_CLASSES]
    return at_hang[0] if at_hang else leader


# faults that kill the processes they touch whether or not the job's output says so (a GPU that fell off the
# bus, a host OOM kill, a node that failed): never a bystander, the program's error co-leads instead
_FATAL_CLASSES = frozenset({"gpu_fault", "fabric_fault", "host_fault", "host_hw_fault", "node_fault"})


def _bystander_yields(ctx: EngineContext, leader: Symptom, candidates: list[Symptom], floor: int) -> Symptom:
    """An infrastructure fault that explains nothing the job logged (no communication error, no device error
    in the program's output, nothing but the task exits every failure ends in) is a bystander when the
    program reports an error of its own that the fault cannot cause (a ValueError on another node, an
    exception that no link going down produces): the job died of the program's error, which leads; the
    fault stays a candidate the report lists. Time alone (which was logged first) does not decide that. A
    fault that kills what runs on it (a GPU, a node) is no bystander (:func:`_own_code_errors`), nor is one the
    job's own output reports that none of its errors can have caused (an I/O error on its checkpoint's path
    beside the FileNotFoundError that followed)."""
    causal = ctx.causal
    if leader.responsible != "infrastructure" or causal.classes_of(leader) & _FATAL_CLASSES:
        return leader
    program = [s for s in candidates
               if s.strength >= floor and causal.program_error(s) and not causal.explains(leader, s)]
    if not program:
        return leader
    if leader.evidence and leader.evidence[0].source == SOURCE_APP and not any(causal.explains(s, leader)
                                                                              for s in program):
        return leader  # the job's own output reports the fault (its file system failed its call): no bystander
    for sym in ctx.active():
        if sym is leader or sym.role not in ("candidate", "cascade") or not sym.evidence:
            continue
        if sym.evidence[0].source == SOURCE_APP and causal.classes_of(sym) - {"exit"} and causal.explains(leader, sym):
            return leader  # the fault shows in the job's own output: it is no bystander
    return min(program, key=Symptom.sort_key)


def _co_leaders(ctx: EngineContext, leader: Symptom, timed: list[Symptom], tier: int) -> list[Symptom]:
    if leader.time is None:
        return []
    window = ctx.tolerance(ctx.settings.ambiguity_s)
    decision = ctx.tolerance(max(ctx.settings.ambiguity_s, ctx.causal.decision_window_s))
    out: list[Symptom] = []
    seen_nodes = {leader.node}
    for sym in timed:
        if sym is leader or sym.node in seen_nodes or sym.time is None:
            continue
        if sym.node is None:
            continue
        both_infrastructure = leader.responsible == "infrastructure" and sym.responsible == "infrastructure"
        independent = ctx.causal.independent_faults(leader, sym)  # a host OOM kill too, whoever's fault it is
        if not (both_infrastructure or independent) or ctx.causal.explains(leader, sym):
            continue
        gap = abs(sym.time - leader.time)
        same_tier = both_infrastructure and gap <= window and sym.strength >= leader.strength - tier
        if same_tier or (gap <= decision and independent):
            out.append(sym)
            seen_nodes.add(sym.node)
    return out


def _own_code_errors(ctx: EngineContext, leader: Symptom, timed: list[Symptom], window_s: float,
                     leaders: list[Symptom]) -> list[Symptom]:
    """An error of the program's own making (:meth:`CausalModel.program_error`: a KeyError on a missing column,
    its kernel's illegal access) within ``window_s`` of an infrastructure leader or a physical fault (a host OOM kill,
    whichever process it hit) that cannot have caused it: the job may have died of either, so the first such
    error co-leads."""
    if (leader.responsible != "infrastructure" and not ctx.causal.is_physical(leader)) or leader.time is None:
        return []
    span = ctx.tolerance(window_s)
    for sym in timed:
        if sym in leaders or sym.time is None or sym.role != "candidate" or not ctx.causal.program_error(sym):
            continue
        if abs(sym.time - leader.time) <= span and not ctx.causal.explains(leader, sym):
            return [sym]
    return []


def _fault_just_after(ctx: EngineContext, leader: Symptom, timed: list[Symptom],
                      leaders: list[Symptom]) -> list[Symptom]:
    """A program error (or an error one of whose readings is the program's) that leads by seconds over a fault that
    kills what runs there and could have caused it (an illegal memory access, then the GPU falling off the bus on the
    same node 6 s later: the driver notices a dead GPU after the kernel that ran on it failed): which came first is
    not decided by the logs' order, both lead. An error whose own line reads as either side (fields.readings: a
    fabric-memory call refused across nodes) is joined by such a fault on any node of the job."""
    maybe_program = ctx.causal.program_error(leader) or "application" in (leader.fields.get("readings") or ())
    if leader.time is None or not maybe_program or leader.fields.get("code_error"):
        return []
    window = ctx.tolerance(ctx.causal.decision_window_s)
    for sym in timed:
        if sym in leaders or sym.time is None or sym.responsible != "infrastructure":
            continue
        if leader.time <= sym.time <= leader.time + window and ctx.causal.classes_of(sym) & _FATAL_CLASSES \
                and (ctx.causal.explains(sym, leader) or bool(leader.fields.get("readings"))):
            return [sym]
    return []


def _unplaced(ctx: EngineContext, leader: Symptom, candidates: list[Symptom], floor: int) -> list[Symptom]:
    """Candidates with no time at all (not even a neighbour's bound), at least ``floor`` strong, that the
    leader cannot cause and that could not have caused it: which came first is unknown, so neither leads
    alone. One per category. With no time anywhere the strongest leads, and only an error that says the
    device worked (a CUDA OOM with the allocator's figures) or a fault of the program's own code co-leads
    beside an untimed infrastructure fault."""
    out: list[Symptom] = []
    untimed_fault = leader.time is None and leader.responsible == "infrastructure"
    if leader.time is None and not untimed_fault:
        return []
    for sym in candidates:
        if sym.time is not None or sym is leader or sym.strength < floor:
            continue
        if untimed_fault and not (sym.category == "gpu_oom" or sym.fields.get("code_error")):
            continue
        if sym.category == leader.category or ctx.causal.explains(leader, sym) or ctx.causal.explains(sym, leader):
            continue
        if any(o.category == sym.category for o in out):
            continue
        out.append(sym)
    return out


def _untimed_twins(leader: Symptom, candidates: list[Symptom]) -> list[Symptom]:
    """An untimed infrastructure fault and the same fault, as strong, on another node, also untimed (a switch that
    took every port down at once, logged by each host): nothing says which node's came first or whose it is, so
    neither node is named alone. One per node."""
    if leader.time is not None or leader.responsible != "infrastructure" or leader.node is None:
        return []
    out: list[Symptom] = []
    for sym in candidates:
        if sym.time is None and sym.kind == leader.kind and sym.strength >= leader.strength and sym.node \
                and sym.node != leader.node and all(o.node != sym.node for o in out):
            out.append(sym)
    return out


@rule("refine.demote_cascades")
def demote_cascades(ctx: EngineContext, rule_: Rule) -> int:
    """Every other cascade and candidate becomes a supporting symptom of the (first) leader."""
    if not ctx.leaders:
        return 0
    root = ctx.leaders[0]
    leaders = {id(leader) for leader in ctx.leaders}  # by identity: `in` would compare every field
    count = 0
    for sym in ctx.active():
        if id(sym) in leaders or sym.role not in ("candidate", "cascade") or sym.supports:
            continue
        if sym.role == "candidate" and ctx.causal.is_physical(sym) and not ctx.causal.explains(root, sym):
            sym.notes.append(f"an independent fault: {root.id} cannot cause it (causal model); later or weaker")
            continue
        sym.supports = root.id
        if sym.role == "candidate":
            sym.notes.append(f"a later or weaker candidate than {root.id}")
        count += 1
    return count


@rule("refine.dcgm_corroboration")
def dcgm_corroboration(ctx: EngineContext, rule_: Rule) -> int:
    """DCGM samples (``params.corroborating_kinds``) on the GPU of a kernel candidate support it; the
    candidate notes the sample."""
    kinds = str_list(rule_, "corroborating_kinds")
    kernel = [s for s in ctx.active() if s.role == "candidate" and s.gpu and s.evidence
              and s.evidence[0].source == "kernel"]
    count = 0
    for sym in ctx.active():
        if sym.kind not in kinds or sym.gpu is None:
            continue
        target = next((k for k in sorted(kernel, key=Symptom.sort_key)
                       if k.node == sym.node and k.gpu == sym.gpu), None)
        if target is not None:
            sym.supports = target.id
            target.notes.append(f"corroborated by {sym.summary}")
            count += 1
    return count
