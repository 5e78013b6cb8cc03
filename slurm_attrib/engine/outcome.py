"""FINAL (choose the outcome) and POST_OUTCOME (annotate it) rules."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Optional

from ..bundle import KERNEL_ORIGINS, TRUSTED_KERNEL_ORIGINS
from ..errors import RuleError
from ..model import SOURCE_APP, SOURCE_KERNEL, SOURCE_METRICS, TRUST_KERNEL, TRUST_UNVERIFIED, Symptom, iso
from ..nvidia.snapshot import GpuMemoryState, gpu_memory_states
from ..ruleset import Rule
from ..safeio import read_regular
from .context import EngineContext, Outcome
from .extract import HOST_REFUSAL, REFUSED_AS_EVIDENCE
from .filters import matches_when
from .params import list_map, record_map, str_list, str_map
from .refine import forgeable, lost_unreported
from .registry import rule


def _describe(sym: Symptom) -> str:
    where = sym.node or "an unknown node"
    if sym.gpu:
        where += f" gpu {sym.gpu}"
    if sym.rank is not None:
        where += f" rank {sym.rank}"
    return f"{sym.summary} ({where})"


def _decide(ctx: EngineContext, rule_: Rule, **values: object) -> int:
    outcome = Outcome(decided_by=rule_.id)
    for key, value in values.items():
        setattr(outcome, key, value)
    ctx.outcome = outcome
    return 1


@dataclass(frozen=True)
class _StatePolicy:
    """final.scheduler_state's params: Slurm state → (category, responsible) when the scheduler itself
    ended the job, the states Slurm's memory enforcement records, and per category the kind of the
    log line in which Slurm said why it ended the job."""

    outcomes: dict[str, tuple[str, ...]]
    memory_kill_states: tuple[str, ...]
    evidence_kinds: dict[str, str]
    hangs: dict[str, tuple[str, ...]]  # state -> kinds of a leading fault that make a job hang into it
    between_nodes: tuple[str, ...]  # kinds that hang only a job whose ranks talk between nodes
    hung_reports: dict[str, tuple[str, ...]]  # state -> kinds of a rank's report that the job hung before it

    @classmethod
    def of(cls, rule_: Rule) -> _StatePolicy:
        return cls(outcomes=record_map(rule_, "state_outcomes", ("category", "responsible")),
                   memory_kill_states=str_list(rule_, "memory_kill_states"),
                   evidence_kinds=str_map(rule_, "evidence_kinds"), hangs=list_map(rule_, "hangs"),
                   between_nodes=str_list(rule_, "hangs_between_nodes"), hung_reports=list_map(rule_, "hung_reports"))

    def hung_on(self, state: str, leader: Symptom, nodes: int) -> bool:
        """Whether the leading fault makes a job in ``state`` one that hung on it: a fault of the network (a kind of
        params.hangs_between_nodes, or a network card's fault of another kind, an IOMMU refusing its DMA) hangs
        only ranks that talk across nodes. A symptom whose kind covers several states of a part (nvidia-smi's
        collected output: a GPU lost, or only rows pending remap) names the state a job hangs on in fields.hang_kind."""
        kinds = self.hangs.get(state, ())
        return (leader.kind in kinds or leader.fields.get("hang_kind") in kinds) and (
            nodes > 1 or (leader.kind not in self.between_nodes and leader.category != "network"))


@rule("final.scheduler_state")
def scheduler_state(ctx: EngineContext, rule_: Rule) -> int:
    """A state the scheduler ended the job in (params.state_outcomes: TIMEOUT, PREEMPTED, CANCELLED,
    NODE_FAIL, OUT_OF_MEMORY...) decides the category, unless a strong infrastructure fault in the
    window explains why the job hung or was killed."""
    policy = _StatePolicy.of(rule_)
    state = ctx.job.state
    if state not in policy.outcomes or ctx.outcome.decided_by:
        return 0
    category, responsible = policy.outcomes[state]
    leader = ctx.leaders[0] if ctx.leaders else None
    threshold = int(rule_.params.get("hardware_overrides_at", 80))
    ended = _slurm_ended_at(ctx, timedelta(seconds=float(rule_.params.get("ending_line_within_s", 600))))
    if leader and ended is not None and leader.time is not None and \
            leader.time > ended + ctx.tolerance(ctx.settings.skew_s):
        # Slurm had already cancelled, preempted or lost the job: a fault after that did not end it
        ctx.outcome.annotations.append(f"{_describe(leader)} came after Slurm ended the job "
                                       f"({ended.strftime('%Y-%m-%dT%H:%M:%SZ')}): check that node, but it did "
                                       "not end this job")
        leader = None
    lost = _lost_nodes(ctx)
    if leader and state == "NODE_FAIL" and lost and leader.node and leader.node not in lost \
            and leader.responsible == "infrastructure" and leader.strength >= threshold:
        # a fault on a node that stayed up does not say why Slurm lost another one: both are candidates
        reports = _loss_reports(ctx)
        nodes = ", ".join(sorted({*lost, str(leader.node)}))
        return _decide(ctx, rule_, status="ambiguous", category="unknown", responsible="infrastructure",
                       candidates=[leader, *reports[:1]], culprit_nodes=[],
                       summary=f"{_describe(leader)}; and Slurm lost {', '.join(lost)}",
                       annotations=[*ctx.outcome.annotations, f"candidate nodes: {nodes}"])
    if leader and leader.responsible == "infrastructure" and leader.strength >= threshold and (
            state != "NODE_FAIL" or (leader.node and leader.category not in ("node_failure", "unknown"))):
        # a node that failed after its GPU fell off the bus failed for that: the part is named, not just the node
        ctx.outcome.annotations.append(f"the job then ended as {state}; the fault above explains it")
        return 0
    if leader and policy.hung_on(state, leader, len(ctx.job.nodes)) and not _in_last_moments(ctx, leader):
        # a job that hung on a file server that never came back ran into its time limit because of it
        ctx.outcome.annotations.append(f"the job then ended as {state}: it hung on the fault above")
        return 0
    hung = _hung_report(ctx, policy.hung_reports.get(state, ()))
    if hung is not None and (leader is None or leader.role == "cascade") and _state_evidence(
            ctx, policy.evidence_kinds.get(state) or policy.evidence_kinds.get(category)) is None:
        # a job whose ranks said a collective never completed, then cancelled by hand with no word of Slurm's on
        # why: it was cancelled because it hung, and what hung it is not in the evidence
        ctx.outcome.annotations.append(f"the job hung ({_describe(hung)}) and was then cancelled: the cancel is "
                                       "its consequence, not its cause")
        return 0
    if state == "NODE_FAIL" and leader is not None and _program_side(ctx, leader):
        # the program's own error before Slurm lost a node: the job may have died of either, the node's loss
        # is not blamed on the strength of the state alone
        reports = _loss_reports(ctx)
        named = ", ".join(_lost_nodes(ctx)) or "a node"
        return _decide(ctx, rule_, status="ambiguous", category="unknown", responsible="unknown",
                       candidates=[leader, *reports[:1]], culprit_nodes=[],
                       summary=f"{_describe(leader)}; and Slurm lost {named}")
    if state == "NODE_FAIL":
        return _node_failure(ctx, rule_, leader)
    culprits: list[str] = []
    root: Optional[Symptom] = None
    if state in policy.memory_kill_states and leader is not None and leader.category == "host_oom":
        # Slurm's memory enforcement kills the job and records CANCELLED (or OUT_OF_MEMORY)
        category, responsible = "host_oom", leader.responsible
        root, culprits = leader, _blamed(_root_cause_rule(ctx), leader)
    state_sym = next((s for s in ctx.symptoms if s.kind == "job_state"), None)
    wanted = policy.evidence_kinds.get(state) or policy.evidence_kinds.get(category)
    root = root or _state_evidence(ctx, wanted) or state_sym
    summary = f"job ended {state.lower()}" + (f": {_describe(root)}" if root and root is not state_sym else "")
    return _decide(ctx, rule_, status="attributed", category=category, responsible=responsible, root=root,
                   culprit_nodes=culprits, summary=summary)


def _in_last_moments(ctx: EngineContext, fault: Symptom) -> bool:
    """Whether ``fault`` is stamped in the job's last moments (within the clock tolerance of its end): there it is
    part of the ending, not what the job hung on for the minutes before a cancel or the time limit."""
    end, when = ctx.job.end, fault.time
    return end is not None and when is not None and when >= end - ctx.tolerance(ctx.settings.skew_s)


def _hung_report(ctx: EngineContext, kinds: tuple[str, ...]) -> Optional[Symptom]:
    """The first of the ranks' reports, kept by the filters, that a collective never completed, stamped (where it
    and the job's end are known) before the cancel: one in the last moments is the cancel's consequence."""
    if not kinds:
        return None
    return next((s for s in ctx.symptoms if s.kind in kinds and s.dropped is None
                 and not _in_last_moments(ctx, s)), None)


# slurmstepd's and srun's words that Slurm itself ended the job (req.c: CANCELLED AT <t> [DUE TO ...])
_ENDING_KINDS = ("slurm_time_limit", "slurm_preempted", "slurm_cancelled", "slurm_requeued", "srun_node_failure")


def _slurm_ended_at(ctx: EngineContext, within: timedelta) -> Optional[datetime]:
    """When Slurm says it ended the job: the earliest of its cancel lines' own times, of those ``within`` the job's
    recorded end. Slurm ends the job moments after it says so (KillWait, a step that takes a while to die); a line
    stamped long before the end is no word of Slurm's about this job's end (a step's own limit, after which the
    script went on, or a line the job printed itself) and must not set aside what happened after it."""
    end = ctx.job.end
    times = [s.time for s in ctx.active() if s.kind in _ENDING_KINDS and s.time is not None
             and not s.fields.get("time_inferred") and (end is None or s.time >= end - within)]
    return min(times) if times else None


def _lost_nodes(ctx: EngineContext) -> list[str]:
    """The nodes Slurm lost, as :func:`_lost_and_unconfirmed` finds them (without those srun's line alone names)."""
    return _lost_and_unconfirmed(ctx)[0]


def _lost_and_unconfirmed(ctx: EngineContext) -> tuple[list[str], list[str]]:
    """The nodes Slurm lost: named by srun's 'Node failure on X', or whose bundle never arrived, or (a job that ended
    NODE_FAIL) whose facts, written by the collector after the job, say it booted after the job began and no later
    than _REBOOT_AFTER_END after its end: it went down during the job and came back. Where some node's loss shows so,
    srun's line alone names no other: those it names are returned apart (unconfirmed), for the verdict to weigh."""
    named = {s.node for s in ctx.active() if s.kind == "srun_node_failure" and s.fields.get("host") and s.node}
    missing = set(ctx.job.missing_bundles)
    rebooted = set()
    start, end = ctx.job.start, ctx.job.end
    if ctx.job.state == "NODE_FAIL" and start is not None and end is not None:
        for node in ctx.job.nodes:
            facts = ctx.bundle.facts_for(node)
            boot = facts.boot_time if facts else None
            if boot is not None and start < boot <= end + _REBOOT_AFTER_END:
                rebooted.add(node)
    corroborated = missing | rebooted
    unconfirmed: set[str] = set()
    if corroborated and named - corroborated:
        # srun's line is in the job's output, which the job can print too ('echo srun: error: Node failure on X'):
        # where another node's loss shows in what no user writes (its bundle never came, it booted again), a node
        # only such a line names, whose bundle came and which did not reboot, is not taken for lost as well
        unconfirmed, named = named - corroborated, named & corroborated
    return sorted(n for n in named | corroborated if n), sorted(n for n in unconfirmed if n)


# how long after a NODE_FAIL job's end a node may have come back up and still be the one Slurm lost (a reboot takes
# minutes; Slurm marks the job when the node stops answering, before it is back)
_REBOOT_AFTER_END = timedelta(minutes=15)


def _state_evidence(ctx: EngineContext, wanted: Optional[str]) -> Optional[Symptom]:
    """The log line in which Slurm said why it ended the job (time limit, cancel, preemption)."""
    found = [s for s in ctx.active() if s.kind == wanted]
    return min(found, key=Symptom.sort_key) if found else None


# what makes Slurm lose nodes without any node failing: the credentials between the controller and the nodes (a
# node's own clock named by its line still blames that node); final.root_cause's params.unplaced_kinds too
_CLUSTER_WIDE_LOSS = frozenset({"auth_error"})


def _trusted_fault_over(ctx: EngineContext, owner: Rule, leader: Optional[Symptom]) -> Optional[Symptom]:
    """The fault a node's kernel logged (a line only the kernel writes; for a workload's leader, within the causal
    model's decision window of it), where the leader is of a kind a user can print (params.printable_kinds: a limit,
    a slurmctld line, a preemption notice) and only the job's output says so: that must not clear the node whose
    kernel reported a fault. The strongest such candidate, else None."""
    printable = str_list(owner, "printable_kinds")
    if leader is None or leader.kind not in printable or not all(e.source == SOURCE_APP for e in leader.evidence):
        return None
    # a program's own error (a workload's printable kind, or one whose side is open: a driver mismatch with both
    # readings) yields only to a fault near it; a printed claim about the node's setup (a limit, slurm.conf, a
    # /dev/shm it refused) to any the kernel logged during the job
    window = ctx.tolerance(ctx.causal.decision_window_s) if leader.responsible != "infrastructure" else None
    faults = [s for s in ctx.active() if s.role == "candidate" and s.responsible == "infrastructure" and s.node
              and s.kind not in printable and any(e.source == SOURCE_KERNEL and e.trust == TRUST_KERNEL
                                                  for e in s.evidence)
              and (window is None or s.time is None or leader.time is None or abs(s.time - leader.time) <= window)]
    return min(faults, key=lambda s: (-s.strength, *Symptom.sort_key(s))) if faults else None


def _node_failure(ctx: EngineContext, rule_: Rule, leader: Optional[Symptom]) -> int:
    reports = [s for s in ctx.active() if s.kind == "srun_node_failure" and s.fields.get("host") and s.node]
    missing = list(ctx.job.missing_bundles)
    unreadable = [f"{node} ({state})" for node, state in ctx.job.node_bundles if state not in ("ok", "missing")]
    culprits, unconfirmed = _lost_and_unconfirmed(ctx)
    root = min(reports, key=Symptom.sort_key) if reports else None
    if unconfirmed:
        # srun's word names a node whose bundle came and which did not reboot, while another node's loss shows in what
        # no user writes: both readings stand, and neither node is named on them
        named = ", ".join([*culprits, *unconfirmed])
        return _decide(ctx, rule_, status="ambiguous", category="node_failure", responsible="infrastructure",
                       candidates=reports[:1] if reports else [], culprit_nodes=[],
                       summary=f"node failure: Slurm lost {', '.join(culprits)}; srun's line names "
                               f"{', '.join(unconfirmed)}, whose bundle came",
                       annotations=[*ctx.outcome.annotations, f"candidate nodes: {named}"])
    launches = [s for s in ctx.active() if s.kind == "node_launch_failure"]
    if not culprits and launches:
        # a cloud node that never came up: Slurm's NODE_FAIL names no machine that ran the job
        root = min(launches, key=Symptom.sort_key)
        ctx.outcome.annotations.append("the node never came up (cloud capacity, quota or resume): none to blame")
        return _decide(ctx, rule_, status="attributed", category="node_failure", responsible="infrastructure",
                       root=root, culprit_nodes=[], summary=f"node failure: {root.summary}",
                       annotations=list(ctx.outcome.annotations))
    owner = _root_cause_rule(ctx)
    leader = _trusted_fault_over(ctx, owner, leader) or leader
    unplaced = leader is not None and leader.kind in str_list(owner, "unplaced_kinds")
    if not culprits and leader and leader.responsible == "infrastructure" and leader.node and not unplaced:
        if _unbacked_app_claim(ctx, leader) or _unverified_kernel_claim(ctx, leader) \
                or _snapshot_clears_memory(ctx, leader):
            # the same words that name no node in a job that failed (the job's own print, a line any local user
            # can write) name none when Slurm lost a node: which one it lost they do not say
            ctx.outcome.annotations.append(f"{_describe(leader)}: only words a user can write say so, and nothing "
                                           "the node's kernel, GPU snapshot or Slurm recorded confirms it: not named")
        else:
            culprits, root = [leader.node], leader
    if not culprits and leader and (unplaced or leader.kind in _CLUSTER_WIDE_LOSS):
        # the controller and the nodes could not authenticate each other (munge's rewound or expired
        # credential: clocks apart), or a limit or configuration the nodes share (params.unplaced_kinds: the
        # controller's slurm.conf against a node's report): Slurm marks nodes not responding, invalid or down and
        # ends the job, and no node broke
        ctx.outcome.annotations.append(f"{_describe(leader)}: the nodes were lost to it, none is to blame")
        return _decide(ctx, rule_, status="attributed", category="node_failure", responsible="infrastructure",
                       root=leader, culprit_nodes=[], summary=f"node failure: {leader.summary}",
                       annotations=list(ctx.outcome.annotations))
    if not culprits and len(ctx.job.nodes) == 1:
        # Slurm ends a job NODE_FAIL when one of its nodes stopped answering: with one node, that one
        culprits = list(ctx.job.nodes)
        ctx.outcome.annotations.append("the job ran on one node: Slurm's NODE_FAIL can only mean that node")
    if missing:
        ctx.outcome.annotations.append("no node bundle arrived from " + ", ".join(missing))
    if unreadable:
        ctx.outcome.annotations.append("incomplete node bundles: " + ", ".join(unreadable))
    named = ", ".join(culprits) if culprits else "a node the evidence does not name"
    return _decide(ctx, rule_, status="attributed" if culprits else "unattributed", category="node_failure",
                   responsible="infrastructure", root=root, culprit_nodes=culprits,
                   summary=f"node failure: {named} stopped answering",
                   annotations=list(ctx.outcome.annotations))


def _root_cause_rule(ctx: EngineContext) -> Rule:
    """final.root_cause, which owns the tables of who is blamed (params.shared_categories, unplaced_kinds,
    printable_kinds)."""
    owner = ctx.ruleset.get("final.root_cause")
    if owner is None:
        raise RuleError("final.scheduler_state blames nodes by final.root_cause's params.shared_categories and "
                        "unplaced_kinds, and that rule is not loaded")
    return owner


@rule("final.root_cause")
def root_cause(ctx: EngineContext, rule_: Rule) -> int:
    """One leader → attributed; several unrelated leaders → ambiguous; none → unattributed."""
    if ctx.outcome.decided_by:
        return 0
    notes = list(ctx.outcome.annotations)
    missing = list(ctx.job.missing_bundles)
    if missing:  # a node whose evidence never arrived may hold the cause the others only echo
        notes.append("no node bundle arrived from " + ", ".join(missing))
    if _succeeded(ctx, str_list(rule_, "success_states")) and ctx.leaders:
        # a job that ended well failed at nothing: what it met is worth a look on the node, not a verdict
        return _decide(ctx, rule_, status="unattributed", category="unknown", responsible="unknown",
                       culprit_nodes=[], summary="the job did not fail; nothing to attribute",
                       annotations=[*notes, *(f"seen during the job, not a failure: {_describe(s)}"
                                              for s in ctx.leaders)])
    near = _near_window_faults(ctx)
    if near:
        leaders = [*(_two_readings(ctx, rule_) or ctx.leaders), *near]
        return _decide(ctx, rule_, status="ambiguous", category=_common(leaders, "category"),
                       responsible=_common(leaders, "responsible"), candidates=leaders, culprit_nodes=[],
                       summary="a hardware fault just outside the job window may explain it: " + "; ".join(
                           _describe(s) for s in leaders),
                       annotations=[*notes, "a fault outside the job window cannot be placed in it: check the "
                                    "node's clock and zone (time_assumptions)"])
    readings = _two_readings(ctx, rule_)
    if readings:
        return _decide(ctx, rule_, status="ambiguous", category="unknown", responsible="unknown",
                       candidates=readings, culprit_nodes=[], root=None,
                       summary=f"{_describe(ctx.leaders[0])} fits " + " and ".join(
                           f"a {s.category} cause" for s in readings),
                       annotations=[*notes, "one line that several causes print alike; look for a kernel log "
                                    "(Xid) or a repeat on the same GPU to decide"])
    shared = str_list(rule_, "shared_categories")
    if len(ctx.leaders) > 1 and len({s.category for s in ctx.leaders}) == 1 and ctx.leaders[0].category in shared:
        # the same fault of a shared service (the file system) seen from several nodes: one outage, and the
        # service's, not any node's; no choice to make between them
        root = ctx.leaders[0]
        seen = ", ".join(sorted({s.node for s in ctx.leaders if s.node})) or "its nodes"
        return _decide(ctx, rule_, status="attributed", category=root.category,
                       responsible=_common(ctx.leaders, "responsible"), root=root, culprit_nodes=[],
                       summary=f"{_describe(root)} (and on {len(ctx.leaders) - 1} more: a shared service)",
                       annotations=[*notes, f"the same {root.category} fault seen from {seen}"])
    if len(ctx.leaders) > 1:
        nodes = sorted({s.node for s in ctx.leaders if s.node})
        return _decide(ctx, rule_, status="ambiguous", category=_common(ctx.leaders, "category"),
                       responsible=_common(ctx.leaders, "responsible"), candidates=list(ctx.leaders),
                       summary="several unrelated faults fit equally: " + "; ".join(
                           _describe(s) for s in ctx.leaders), culprit_nodes=[],
                       annotations=[*notes, f"candidate nodes: {', '.join(nodes)}"])
    if ctx.leaders and ctx.leaders[0].category == "unknown":
        # a fault whose kind names no cause (an Xid NVIDIA's catalog leaves open) explains nothing by itself
        return _decide(ctx, rule_, status="unattributed", category="unknown", responsible="unknown",
                       culprit_nodes=[],
                       summary=f"{_describe(ctx.leaders[0])}: its cause is not known from the line alone",
                       annotations=[*notes, "the leading event names no cause; look for what came just before "
                                    "it on the same node or GPU"])
    if ctx.leaders:
        root = _trusted_fault_over(ctx, rule_, ctx.leaders[0]) or ctx.leaders[0]
        culprits = _blamed(rule_, root)
        if culprits and root.fields.get("gpu_not_in_facts") and all(e.source == SOURCE_APP for e in root.evidence):
            culprits = []
            notes.append(f"only the job's output names GPU {root.gpu}, which is not among {root.node}'s GPUs in its "
                         "facts (lost during the job, or another machine's output the job printed): the node is not "
                         "named")
        elif culprits and _unbacked_app_claim(ctx, root):
            culprits = []
            part = "GPU" if root.category in _GPU_CATEGORIES else "network adapter"
            notes.append(f"only the application's output says {root.node}'s {part} failed, and that node's own "
                         f"kernel log, collected for the job, holds no {part} error: the node is not named")
        elif culprits and _snapshot_clears_memory(ctx, root):
            culprits = []
            notes.append(f"only the application's output says {root.node}'s GPU memory failed, and the node's GPU "
                         "snapshot taken after the job counts no uncorrectable ECC error since the driver loaded and "
                         "no row remap or page retirement waiting: the node is not named")
        elif culprits and _unverified_kernel_claim(ctx, root):
            # the fault may be the kernel's or a user's forgery: the evidence does not decide, and names nobody
            return _decide(ctx, rule_, status="ambiguous", category=root.category, responsible=root.responsible,
                           candidates=[root], culprit_nodes=[], summary=f"{_describe(root)}, if the kernel wrote it",
                           annotations=[*notes, f"only lines of {root.node}'s syslog file or shipped log, which any "
                                        "local program can write (`logger -t kernel`, a raw write to /dev/log), say "
                                        "so, and nothing the kernel alone writes confirms it: the node is not named"])
        return _decide(ctx, rule_, status="attributed", category=root.category, responsible=root.responsible,
                       root=root, culprit_nodes=culprits, summary=_describe(root), annotations=notes)
    return _decide(ctx, rule_, status="unattributed", category="unknown", responsible="unknown",
                   summary=_unattributed_summary(ctx, str_list(rule_, "success_states")), annotations=notes)


def _two_readings(ctx: EngineContext, rule_: Rule) -> list[Symptom]:
    """A sole leader whose own text cannot tell hardware from software (``fields.readings``, set by the
    rule that judged it: a CUDA 'unspecified launch failure' or 'unknown error' alone): one candidate per
    reading, responsible as ``params.responsible_of`` says."""
    if len(ctx.leaders) != 1:
        return []
    leader = ctx.leaders[0]
    readings = leader.fields.get("readings") or []
    responsible_of = str_map(rule_, "responsible_of")
    return [replace(leader, category=str(c), responsible=responsible_of.get(str(c), "unknown"), notes=[*leader.notes])
            for c in readings]


def _near_window_faults(ctx: EngineContext) -> list[Symptom]:
    """Infrastructure faults dropped only because they fell just outside the window, when no
    infrastructure fault inside it leads: they make the verdict ambiguous, never silently unattributed."""
    if any(s.responsible == "infrastructure" for s in ctx.leaders):
        return []
    found = [s for s in ctx.symptoms if s.fields.get("near_window")]  # set only when the window filter drops it
    if any(_program_side(ctx, s) for s in ctx.leaders):
        # the program's own error leads (a code error, its kernel's bad access, its tensors filling the GPU): a
        # fault outside the window makes the verdict ambiguous only where it can have caused that error
        found = [s for s in found if any(ctx.causal.explains(s, leader) for leader in ctx.leaders)]
    first_per_node: dict[Optional[str], Symptom] = {}
    for sym in sorted(found, key=lambda s: (-s.strength, *Symptom.sort_key(s))):
        first_per_node.setdefault(sym.node, sym)
    return sorted(first_per_node.values(), key=Symptom.sort_key)


_PROGRAM_SIDE = frozenset({"app_error", "gpu_oom_error"})  # CausalModel.program_error's classes, GPU OOM too


def _program_side(ctx: EngineContext, sym: Symptom) -> bool:
    """An error of the program's own making, its tensors filling the GPU included."""
    return ctx.causal.program_error(sym, _PROGRAM_SIDE)


def _loss_reports(ctx: EngineContext) -> list[Symptom]:
    """What says Slurm lost a node: srun's 'Node failure on X' lines, else the job's NODE_FAIL state."""
    return [s for s in ctx.active() if s.kind == "srun_node_failure"] or \
        [s for s in ctx.symptoms if s.kind == "job_state"]


_GPU_CATEGORIES = ("gpu_hardware", "gpu_memory", "nvlink")


def _unbacked_app_claim(ctx: EngineContext, root: Symptom) -> bool:
    """A GPU or adapter fault only the job's own output reports (its text is the user's to write: a printed
    line, a forged rank prefix or host prefix) on a node whose kernel log the epilog collected (a trusted origin its
    record says was read, not failed or cut; or the node's syslog file read whole: :func:`_whole_syslog_file`) and
    that shows no fault of that kind of its own, within the window or not. Only a fault that could have been the
    job's backs the claim: one still kept (not a line from days before), not about a GPU the job was not given or
    another than the claim names, a candidate of any GPU kind, or a record about a GPU of the claim's own kind (an
    Xid 63 row remap is context, and still says the GPU's memory failed) that is not of an error the hardware
    corrected (a corrected AER on the GPU's link backs no printed ECC error), and not a line any local user can
    write (``logger -t kernel``): a user who prints the error and forges or finds such a line names nobody by it."""
    kinds = _GPU_CATEGORIES if root.category in _GPU_CATEGORIES else (root.category,)
    if root.category not in (*_GPU_CATEGORIES, "network") or not root.node \
            or any(e.source != SOURCE_APP for e in root.evidence):
        return False
    origin = ctx.bundle.kernel_origin(root.node)
    collected = origin in TRUSTED_KERNEL_ORIGINS and root.node in ctx.bundle.kernel_uncut  # read, not failed or cut
    if not collected and not _whole_syslog_file(ctx, root.node, origin):
        return False
    # a GPU outside the job's (by UUID, or else likely so by index) backs no claim of the job's
    allocated = ctx.bundle.allocated_gpus(root.node) or ctx.bundle.allocated_by_index(root.node)
    return not any(s.node == root.node and s.category in kinds and s.evidence and s.dropped is None
                   and (s.role == "candidate" or (s.gpu is not None and s.category == root.category
                                                  and not _corrected(s)))
                   and s.evidence[0].source != SOURCE_APP
                   and (s.gpu is None or allocated is None or s.gpu in allocated)
                   and (s.gpu is None or root.gpu is None or s.gpu == root.gpu)
                   and not forgeable(s) for s in ctx.symptoms)


def _snapshot_clears_memory(ctx: EngineContext, root: Symptom) -> bool:
    """A GPU memory fault only the job's output reports (an 'uncorrectable ECC error encountered' any rank can print)
    on a node whose GPU snapshot (metrics/NODE.xml, ``nvidia-smi -q -x`` taken by the epilog after the job) shows the
    GPU the claim names, else the job's GPUs there, else every GPU it lists, with no uncorrectable ECC error counted
    since the driver loaded and no row remap or page retirement waiting: an uncorrectable error the GPU met would be
    counted there. A GPU the snapshot does not list or shows no count for (ECC off, N/A), one whose lifetime records
    show an uncorrectable error ever (a reset since zeroes the volatile counts), and a node that booted after the
    job began clear nothing."""
    if root.category != "gpu_memory" or not root.node or any(e.source != SOURCE_APP for e in root.evidence):
        return False
    facts = ctx.bundle.facts_for(root.node)
    boot, start = (facts.boot_time if facts else None), ctx.job.start
    if boot is not None and start is not None and boot > start:
        return False  # the node booted after the job began: the volatile counts do not reach back to it
    states: dict[str, GpuMemoryState] = {}
    for bf in ctx.bundle.files:
        if bf.source != SOURCE_METRICS or bf.node != root.node or not bf.rel.endswith(".xml"):
            continue
        try:
            states.update(gpu_memory_states(read_regular(bf.path, SNAPSHOT_BYTES)))
        except (OSError, ValueError):
            return False
    if not states:
        return False
    allocated = ctx.bundle.allocated_gpus(root.node) or ctx.bundle.allocated_by_index(root.node)
    listed = sorted({*states, *(pci for pci, _, _ in facts.gpus)}) if facts and facts.gpus else sorted(states)
    wanted = [root.gpu] if root.gpu else sorted(allocated) if allocated else listed
    # a GPU the facts list that the snapshot lacks fell off the bus or was lost: it clears nothing
    return all(gpu in states and states[gpu].clean for gpu in wanted)


SNAPSHOT_BYTES = 16 << 20  # an nvidia-smi -q -x of 8 GPUs is ~0.5 MB; its process lists are the rest


def _corrected(sym: Symptom) -> bool:
    """A record of an error the hardware corrected (a corrected PCIe AER, a correctable ECC count): it happens on
    healthy parts all day and says nothing failed."""
    return str(sym.fields.get("severity", "")).lower() in ("corrected", "ce", "correctable")


def _whole_syslog_file(ctx: EngineContext, node: str, origin: str) -> bool:
    """The node's syslog file (kern.log, /var/log/messages) as its collector read it whole: a file a user can write
    a forged line into but that holds every kernel line of the window, so what it lacks the kernel did not say. Not
    a shipper's record (a query that timed out or hit its cap keeps its state), not a node whose bundle never came,
    not a file whose record says it was cut, and not one in which a kernel-looking line was refused for its host (a
    real line under a host name the engine did not know would then read as no line at all). A line refused for what
    it is (a program's tag, text a kernel message copied) hides no kernel line: any user can write one into the file,
    and it must not lift the check."""
    if origin not in ("mixed-file", "kern-file") or node not in ctx.bundle.kernel_uncut:
        return False
    if node in ctx.job.missing_bundles:
        return False
    head = f"syslog/{node}"
    return not any(note.startswith(head) and REFUSED_AS_EVIDENCE in note and HOST_REFUSAL in note
                   for cov in ctx.coverage.values() for note in cov.notes)


def _unverified_kernel_claim(ctx: EngineContext, root: Symptom) -> bool:
    """A node fault that rests only on lines of the node's syslog file or shipped log (the collector found no
    kernel-only source: the journal's kernel transport, the ring buffer), where a local user's ``logger -t kernel
    "NVRM: Xid ..."`` (or a raw '<3>' write to /dev/log, which lands in kern.log) reads like the kernel's own, with
    no line of a trusted source, no GPU snapshot and no diagnostic of that node showing a fault of the same
    category that is itself a candidate, on the same GPU where both name one (a pending remap from correctable
    errors on another GPU confirms nothing). A node Slurm lost (the job ended NODE_FAIL) whose own bundle never
    arrived (the finalizer's record, not a line anyone printed) failed by more than anyone's words: that confirms a
    fault there; a bundle that is merely missing (a slow or broken collector) confirms nothing."""
    if not root.node or (ctx.bundle.kernel_origin(root.node) not in _USER_WRITABLE_ORIGINS
                         and not _read_from_a_program(ctx, root)):
        return False
    if root.node in lost_unreported(ctx) or not forgeable(root):
        return False
    return not any(s.node == root.node and s.category == root.category and s.role == "candidate" and s.evidence
                   and (not s.gpu or not root.gpu or s.gpu == root.gpu) and any(
        e.source not in (SOURCE_APP, SOURCE_KERNEL) or (e.source == SOURCE_KERNEL and e.trust != TRUST_UNVERIFIED)
        for e in s.evidence) for s in ctx.symptoms if s.dropped is None)


def _read_from_a_program(ctx: EngineContext, root: Symptom) -> bool:
    """Whether the symptom's rule reads a daemon's own tagged lines (``match.programs``: slurmd, nv-fabricmanager):
    any local user writes such a line with ``logger -t <daemon>``, whichever file or journal it was read from."""
    rule = ctx.ruleset.get(root.rule_id)
    return rule is not None and rule.match is not None and bool(rule.match.programs)


# kernel logs a local program can write into: every origin the bundle does not trust (a syslog file, kern.log too, a
# shipper's record), and a record that predates origins (its collector may have read one)
_USER_WRITABLE_ORIGINS = (*(o for o in KERNEL_ORIGINS if o not in TRUSTED_KERNEL_ORIGINS), "unrecorded")


def _blamed(owner: Rule, root: Symptom) -> list[str]:
    """Location is not blame: only an infrastructure root puts its node among the culprits; a workload
    error's node and rank are its location (root_cause.node/rank), never a culprit; nor is the node that
    saw a shared service (the file system) fail, nor the node where a limit configured alike for all of them
    (params.unplaced_kinds: ulimit -n, TasksMax) happened to run out first. ``owner``: final.root_cause,
    whose params say so."""
    if root.category in str_list(owner, "shared_categories") or root.kind in str_list(owner, "unplaced_kinds"):
        return []
    if root.fields.get("node_from_label") and all(e.source == SOURCE_APP for e in root.evidence):
        return []  # placed through srun's task number alone, which may be a per-node launcher's: not blame
    return [root.node] if root.node and root.responsible == "infrastructure" else []


def _common(symptoms: list[Symptom], attr: str) -> str:
    values = {getattr(s, attr) for s in symptoms}
    return values.pop() if len(values) == 1 else "unknown"


def _succeeded(ctx: EngineContext, success_states: tuple[str, ...]) -> bool:
    """The job ended in a success state with exit 0, its steps' worst exit included."""
    job = ctx.job
    return job.state in success_states and job.exit_code in ("0:0", "0") and job.derived_exit_code in ("0:0", "0")


def _unattributed_summary(ctx: EngineContext, success_states: tuple[str, ...]) -> str:
    """Why nothing was attributed; a job that ended in a success state with exit 0 did not fail (a job
    still RUNNING or COMPLETING has not ended, so it never did "not fail")."""
    job = ctx.job
    if _succeeded(ctx, success_states):
        return "the job did not fail; nothing to attribute"
    cascades = [s for s in ctx.active() if s.role == "cascade"]
    if cascades:
        kinds = sorted({s.kind for s in cascades})
        return (f"only downstream symptoms ({', '.join(kinds)}) on {len({s.node for s in cascades})} node(s); "
                "the evidence names no root cause" + _pointers(cascades))
    return f"job {job.state.lower() or 'failed'} (exit {job.exit_code}); the evidence names no root cause"


def _pointers(cascades: list[Symptom]) -> str:
    """Nodes that downstream symptoms point at (NCCL/IB peers, lagging ranks of a desync report):
    where to look next, not a verdict."""
    named: dict[str, set[str]] = {}
    for sym in cascades:
        peer = sym.fields.get("peer_node")
        if isinstance(peer, str):
            named.setdefault(peer, set()).add("named as nccl peer")
        for node in sym.fields.get("lagging_nodes") or ():
            named.setdefault(str(node), set()).add("lagging in a desync report")
    if not named:
        return ""
    return "; look at " + ", ".join(f"{node} ({' and '.join(sorted(why))})" for node, why in sorted(named.items()))


def run_declarative_post(ctx: EngineContext, rule_: Rule) -> int:
    """A YAML post-outcome rule: when the outcome matches ``when``, add ``actions``/``annotation``."""
    when = rule_.raw["when"]
    outcome = ctx.outcome
    for key in ("status", "category", "responsible"):
        if key in when and getattr(outcome, key) not in _listed(when[key]):
            return 0
    if "culprit" in when and bool(outcome.culprit_nodes) != bool(when["culprit"]):
        return 0
    root_when = when.get("root")
    if root_when and (outcome.root is None or not matches_when(root_when, outcome.root)):
        return 0
    for action in rule_.raw.get("actions") or ():
        if action not in outcome.actions:
            outcome.actions.append(str(action))
    if rule_.raw.get("annotation"):
        outcome.annotations.append(str(rule_.raw["annotation"]))
    return 1


def _listed(value: object) -> list[object]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


@rule("post.root_actions")
def root_actions(ctx: EngineContext, rule_: Rule) -> int:
    """The root symptom's own actions (the XID catalog's resolution buckets) come first."""
    root = ctx.outcome.root
    if root is None or not root.actions:
        return 0
    ctx.outcome.actions = [*root.actions, *(a for a in ctx.outcome.actions if a not in root.actions)]
    return 1


@rule("post.application_reported")
def application_reported(ctx: EngineContext, rule_: Rule) -> int:
    """An infrastructure root cause whose every evidence line is the application's: say so, with where
    the rank ran, and put the confirmation first among the next steps."""
    root = ctx.outcome.root
    if root is None or root.responsible != "infrastructure" or not root.evidence:
        return 0
    if any(e.source != SOURCE_APP for e in root.evidence):
        if all(e.trust == TRUST_UNVERIFIED or e.source == SOURCE_APP for e in root.evidence):
            ctx.outcome.annotations.append(
                "the root cause rests on unverified kernel lines (a syslog file, a shipped log, or no `kernel:` tag): "
                "a local program could have written them, so they never drain a node by themselves")
            return 1
        return 0
    where = _rank_location(root)
    ctx.outcome.annotations.append(
        f"reported by the application only ({where}): no kernel line or GPU telemetry in the bundle confirms "
        "a hardware fault, so it never drains a node by itself")
    if root.node:
        confirm = str_map(rule_, "confirm")
        template = confirm.get(root.category) or confirm.get("default", "")
        try:
            action = template.format(node=root.node, time=iso(root.time) or "the failure")
        except (KeyError, IndexError, ValueError):  # a site's template with other braces: shown as written
            action = template
        if action:
            ctx.outcome.actions = [action, *(a for a in ctx.outcome.actions if a != action)]
    return 1


def _rank_location(sym: Symptom) -> str:
    parts = [f"rank {sym.rank}" if sym.rank is not None else "rank unknown",
             f"on {sym.node}" if sym.node else "node not named in the evidence"]
    local = sym.fields.get("local_rank")
    if sym.gpu:
        parts.append(f"gpu {sym.gpu}")
    elif isinstance(local, int):
        parts.append(f"local rank {local} (the GPU its CUDA_VISIBLE_DEVICES gave it)")
    return ", ".join(parts)


@rule("post.repeat_offender")
def repeat_offender(ctx: EngineContext, rule_: Rule) -> int:
    """Flag a culprit node that the store already knows as the culprit of earlier faults. The history
    counts distinct faults (``node_history``; one Xid that ended several jobs is one), so a node is a
    repeat offender when it faulted ``min_jobs`` times, this one included."""
    history = dict(ctx.settings.node_history)
    jobs = dict(ctx.settings.node_history_jobs)
    threshold = int(rule_.params.get("min_jobs", 3))
    count = 0
    for node in ctx.outcome.culprit_nodes:
        past = history.get(node, 0)
        if past + 1 >= threshold:
            earlier = list(jobs.get(node, ()))
            listed = f": jobs {', '.join(earlier[:10])}{' ...' if len(earlier) > 10 else ''}" if earlier else ""
            events = f" ({past} distinct fault(s))" if earlier and len(earlier) != past else ""
            ctx.outcome.annotations.append(f"repeat offender: {node} was the culprit of {len(earlier) or past} "
                                           f"earlier job(s){events}{listed}")
            count += 1
    return count


@rule("post.xid_workflow")
def xid_workflow(ctx: EngineContext, rule_: Rule) -> int:
    """The same GPU with Xid 13/31/43 across jobs is a hardware suspect; a solo event is the application's."""
    codes = {int(c) for c in rule_.params.get("codes", (13, 31, 43))}
    threshold = int(rule_.params.get("min_jobs", 2))
    history = {(node, gpu): jobs for node, gpu, jobs in ctx.settings.gpu_xid_history}
    seen: dict[tuple[str, str], Symptom] = {}
    for sym in ctx.active():
        if sym.kind == "xid" and sym.fields.get("code") in codes and sym.node and sym.gpu:
            seen.setdefault((sym.node, sym.gpu), sym)
    for (node, gpu), sym in sorted(seen.items()):
        earlier = list(history.get((node, gpu), ()))
        code = sym.fields.get("code")
        if len(earlier) + 1 >= threshold:
            ctx.outcome.annotations.append(
                f"xid {code} on {node} gpu {gpu} again: the same GPU faulted in {len(earlier)} earlier job(s) "
                f"({', '.join(earlier[:10])}); NVIDIA's workflow makes it a hardware suspect")
            action = f"run field diagnostics on {node} gpu {gpu} (dcgmi diag -r 3, then NVIDIA field diag)"
            if action not in ctx.outcome.actions:
                ctx.outcome.actions.append(action)
        else:
            ctx.outcome.annotations.append(f"xid {code} on {node} gpu {gpu} is a solo event in the store's history: "
                                           "most likely the application (NVIDIA's workflow)")
    return len(seen)


@rule("post.coverage_gaps")
def coverage_gaps(ctx: EngineContext, rule_: Rule) -> int:
    """Say which evidence was missing when the verdict is not attributed."""
    if ctx.outcome.status == "attributed":
        return 0
    have_kernel = {f.node for f in ctx.bundle.files if f.source == "kernel"}
    missing = [n for n in ctx.job.nodes if n not in have_kernel]
    gaps = []
    shared = sorted(f.rel for f in ctx.bundle.files if f.source == "kernel" and f.node not in ctx.job.node_set)
    if missing and shared:  # a central syslog or pdsh output: its lines name their hosts
        gaps.append(f"no kernel log of its own from {_short_list(missing)} (only {_short_list(shared)})")
    elif missing:
        gaps.append("no kernel log from " + _short_list(missing))
    if not any(f.source == "app" for f in ctx.bundle.files):
        gaps.append("no application log")
    if not any(f.source == "metrics" for f in ctx.bundle.files):
        gaps.append("no GPU metrics snapshot")
    if gaps:
        ctx.outcome.annotations.append("missing evidence: " + "; ".join(gaps))
    return 1 if gaps else 0


def _short_list(items: list[str], limit: int = 8) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")
