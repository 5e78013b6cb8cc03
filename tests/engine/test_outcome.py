"""The FINAL rules read their policy from their YAML params (rules/final/*.yaml): the scheduler state
table, the states of a memory kill, the evidence kinds of a state, the success states, the shared
categories and who is responsible for each reading of an ambiguous line."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from slurm_attrib.engine.context import EngineContext
from slurm_attrib.engine.outcome import root_cause, scheduler_state
from slurm_attrib.errors import RuleError
from slurm_attrib.model import JobFacts, Symptom
from slurm_attrib.ruleset import Rule

from .conftest import SHIPPED, T0, make_context, make_symptom, shipped


def context(state: str, *symptoms: Symptom, rules: tuple[Rule, ...] = SHIPPED.rules,
            exit_code: str = "1:0") -> EngineContext:
    job = JobFacts(job_id="7", nodes=("node-01", "node-02"), state=state, exit_code=exit_code,
                   derived_exit_code=exit_code)
    return make_context(job, *symptoms, rules=rules)


def sym(kind: str, category: str = "unknown", responsible: str = "unknown", strength: int = 0,
        **fields: Any) -> Symptom:
    return make_symptom(kind, category, responsible, strength, **fields)


def test_a_state_decides_the_category_and_its_log_line_is_the_root() -> None:
    limit = sym("slurm_time_limit")
    ctx = context("TIMEOUT", limit)
    assert scheduler_state(ctx, shipped("final.scheduler_state")) == 1
    assert (ctx.outcome.category, ctx.outcome.responsible, ctx.outcome.root) == ("job_limit", "workload", limit)


def test_the_state_table_is_the_rules_data() -> None:
    rule = shipped("final.scheduler_state",
                   state_outcomes={"TIMEOUT": {"category": "preempted", "responsible": "scheduler"}},
                   evidence_kinds={"preempted": "slurm_preempted"})
    preempt = sym("slurm_preempted")
    ctx = context("TIMEOUT", sym("slurm_time_limit"), preempt)
    scheduler_state(ctx, rule)
    assert (ctx.outcome.category, ctx.outcome.responsible, ctx.outcome.root) == ("preempted", "scheduler", preempt)
    assert scheduler_state(context("CANCELLED"), rule) == 0  # a state not in the table: not decided here


def test_a_memory_kill_state_lets_a_host_oom_leader_decide() -> None:
    oom = sym("host_oom_kill", "host_oom", "infrastructure", 70)
    for memory_kill_states, category in ((["CANCELLED"], "host_oom"), (["OUT_OF_MEMORY"], "cancelled")):
        ctx = context("CANCELLED", oom)
        ctx.leaders = [oom]
        scheduler_state(ctx, shipped("final.scheduler_state", memory_kill_states=memory_kill_states))
        assert ctx.outcome.category == category


def test_a_malformed_state_table_names_the_rule_file() -> None:
    rule = shipped("final.scheduler_state", state_outcomes={"TIMEOUT": "job_limit"})
    with pytest.raises(RuleError, match=r"^rules/final/scheduler_state\.yaml:1: params\.state_outcomes\.TIMEOUT"):
        scheduler_state(context("TIMEOUT"), rule)


def test_blame_on_a_memory_kill_follows_root_cause_shared_categories() -> None:
    oom = sym("host_oom_kill", "host_oom", "infrastructure", 70)
    rules = tuple(shipped("final.root_cause", shared_categories=["host_oom"]) if r.id == "final.root_cause" else r
                  for r in SHIPPED.rules)
    for ruleset, culprits in ((SHIPPED.rules, ["node-02"]), (rules, [])):
        ctx = context("OUT_OF_MEMORY", oom, rules=ruleset)
        ctx.leaders = [oom]
        scheduler_state(ctx, shipped("final.scheduler_state"))
        assert ctx.outcome.culprit_nodes == culprits
    ctx = context("OUT_OF_MEMORY", oom, rules=tuple(r for r in SHIPPED.rules if r.id != "final.root_cause"))
    ctx.leaders = [oom]
    with pytest.raises(RuleError, match=r"final\.root_cause's params\.shared_categories"):
        scheduler_state(ctx, shipped("final.scheduler_state"))


@pytest.mark.parametrize(("kind", "category", "param", "value", "culprits"), [
    ("lustre_error", "storage", "shared_categories", ["storage"], []),
    ("lustre_error", "storage", "shared_categories", [], ["node-02"]),
    ("process_limit", "node_failure", "unplaced_kinds", ["process_limit"], []),
    ("process_limit", "node_failure", "unplaced_kinds", [], ["node-02"]),
])
def test_a_shared_category_or_unplaced_kind_blames_no_node(kind: str, category: str, param: str, value: list[str],
                                                           culprits: list[str]) -> None:
    root = sym(kind, category, "infrastructure", 80)
    ctx = context("FAILED", root)
    ctx.leaders = [root]
    root_cause(ctx, shipped("final.root_cause", **{param: value}))
    assert (ctx.outcome.status, ctx.outcome.culprit_nodes) == ("attributed", culprits)


@pytest.mark.parametrize(("success", "summary"), [
    (["COMPLETED"], "the job did not fail; nothing to attribute"),
    ([], "job completed (exit 0:0); the evidence names no root cause"),
])
def test_success_states(success: list[str], summary: str) -> None:
    ctx = context("COMPLETED", exit_code="0:0")
    root_cause(ctx, shipped("final.root_cause", success_states=success))
    assert (ctx.outcome.status, ctx.outcome.summary) == ("unattributed", summary)


def test_each_reading_is_responsible_as_params_say() -> None:
    cuda = sym("cuda_error", "gpu_hardware", "infrastructure", 60, readings=["gpu_hardware", "application", "odd"])
    ctx = context("FAILED", cuda)
    ctx.leaders = [cuda]
    root_cause(ctx, shipped("final.root_cause"))
    assert [(c.category, c.responsible) for c in ctx.outcome.candidates] == [
        ("gpu_hardware", "infrastructure"), ("application", "workload"), ("odd", "unknown")]
    ctx = context("FAILED", cuda)
    ctx.leaders = [cuda]
    root_cause(ctx, shipped("final.root_cause", responsible_of={"application": "scheduler"}))
    assert [c.responsible for c in ctx.outcome.candidates] == ["unknown", "scheduler", "unknown"]


def test_a_sole_leader_of_unknown_category_is_never_attributed() -> None:
    """An event whose kind names no cause (an Xid NVIDIA's catalog leaves open, without legacy causes):
    unattributed, no culprit; with readings it is ambiguous between them."""
    xid = sym("xid", "unknown", "unknown", 50, code=5)
    ctx = context("FAILED", xid)
    ctx.leaders = [xid]
    root_cause(ctx, shipped("final.root_cause"))
    assert (ctx.outcome.status, ctx.outcome.culprit_nodes, ctx.outcome.root) == ("unattributed", [], None)
    assert ctx.outcome.summary.endswith("its cause is not known from the line alone")
    xid8 = sym("xid", "unknown", "unknown", 50, code=8, readings=["application", "gpu_hardware"])
    ctx = context("FAILED", xid8)
    ctx.leaders = [xid8]
    root_cause(ctx, shipped("final.root_cause"))
    assert ctx.outcome.status == "ambiguous"
    assert [c.category for c in ctx.outcome.candidates] == ["application", "gpu_hardware"]


def test_a_node_failure_explained_by_a_named_part_is_that_parts() -> None:
    """NODE_FAIL after a GPU fell off the bus: gpu_hardware on that node; a weak or node-level fault
    leaves the verdict node_failure."""
    xid79 = sym("xid", "gpu_hardware", "infrastructure", 95, code=79)
    xid79.node = "node-02"
    ctx = context("NODE_FAIL", xid79)
    ctx.leaders = [xid79]
    assert scheduler_state(ctx, shipped("final.scheduler_state")) == 0
    root_cause(ctx, shipped("final.root_cause"))
    assert (ctx.outcome.category, ctx.outcome.culprit_nodes) == ("gpu_hardware", ["node-02"])
    weak = sym("step_launch_error", "node_failure", "infrastructure", 65)
    weak.node = "node-02"
    ctx = context("NODE_FAIL", weak)
    ctx.leaders = [weak]
    scheduler_state(ctx, shipped("final.scheduler_state"))
    assert (ctx.outcome.category, ctx.outcome.culprit_nodes) == ("node_failure", ["node-02"])


def test_a_node_failure_of_a_one_node_job_is_that_node() -> None:
    """Slurm's NODE_FAIL with nothing else said: a one-node job's node is the one that failed; with two
    nodes and no word which, no node is named."""
    one = make_context(JobFacts(job_id="8", nodes=("gpu-1-9",), state="NODE_FAIL", exit_code="0:0",
                                derived_exit_code="0:0"))
    scheduler_state(one, shipped("final.scheduler_state"))
    assert (one.outcome.status, one.outcome.category, one.outcome.culprit_nodes) == (
        "attributed", "node_failure", ["gpu-1-9"])
    two = context("NODE_FAIL")
    scheduler_state(two, shipped("final.scheduler_state"))
    assert (two.outcome.status, two.outcome.culprit_nodes) == ("unattributed", [])


def test_a_node_whose_bundle_never_arrived_is_named_whatever_the_state() -> None:
    """A FAILED job whose one node sent nothing: the verdict says so, since that node may hold the cause."""
    job = JobFacts(job_id="9", nodes=("gpu-p04", "gpu-p05"), state="FAILED", exit_code="1:0", derived_exit_code="0:0",
                   node_bundles=(("gpu-p04", "ok"), ("gpu-p05", "missing")))
    ctx = make_context(job)
    root_cause(ctx, shipped("final.root_cause"))
    assert ctx.outcome.status == "unattributed"
    assert "no node bundle arrived from gpu-p05" in ctx.outcome.annotations


def test_an_unplaced_kind_blames_no_node_of_a_node_fail_job() -> None:
    """NODE_FAIL's own path takes a leader's node unless its kind is unplaced (a user printing 'Too many open
    files' must not name the node Slurm lost)."""
    limit = make_symptom("process_limit", "node_failure", "infrastructure", 50, source="app", role="candidate")
    ctx = context("NODE_FAIL", limit)
    ctx.leaders = [limit]
    scheduler_state(ctx, shipped("final.scheduler_state"))
    assert ctx.outcome.culprit_nodes == []
    placed = make_symptom("auth_error", "node_failure", "infrastructure", 50, source="app", role="candidate")
    ctx = context("NODE_FAIL", placed)
    ctx.leaders = [placed]
    scheduler_state(ctx, shipped("final.scheduler_state"))
    assert ctx.outcome.culprit_nodes == ["node-02"]  # a credential error a node's own line places is that node's


@pytest.mark.parametrize(("state", "kind", "category"), [("FAILED", "slurm_config_mismatch", "node_failure"),
                                                         ("NODE_FAIL", "slurm_config_mismatch", "node_failure"),
                                                         ("FAILED", "platform_preempted", "preempted"),
                                                         ("FAILED", "task_prolog_failure", "node_failure"),
                                                         ("FAILED", "shm_refused", "node_failure"),
                                                         ("FAILED", "input_exhausted", "application")])
def test_a_printed_root_does_not_clear_a_kernel_fault(state: str, kind: str, category: str) -> None:
    """A root of a kind the job's output alone says (params.printable_kinds: a user can print it) yields to a fault
    the node's kernel logged."""
    printed = make_symptom(kind, category, "infrastructure" if category == "node_failure" else "scheduler", 60,
                           node="node-01", source="app", role="candidate")
    xid = make_symptom("xid", "gpu_hardware", "infrastructure", 80, node="node-01", source="kernel", role="candidate")
    xid.evidence = [dataclasses.replace(e, trust="kernel") for e in xid.evidence]  # the journal's kernel transport
    ctx = context(state, printed, xid)
    ctx.leaders = [printed]
    if state == "FAILED":
        root_cause(ctx, shipped("final.root_cause"))
    else:
        scheduler_state(ctx, shipped("final.scheduler_state"))
    assert ctx.outcome.culprit_nodes == ["node-01"]


def test_a_job_cancelled_after_it_hung_is_not_the_cancel() -> None:
    """A rank's report that a collective never completed (params.hung_reports), then a cancel by hand with no line
    of Slurm's on why: the cancel is the hang's consequence, the state decides nothing; Slurm's own cancel line
    keeps the cancel, and so does a job with no such report."""
    stall = make_symptom("collective_stall", source="app", role="cascade")
    ctx = context("CANCELLED", stall)
    assert scheduler_state(ctx, shipped("final.scheduler_state")) == 0
    assert not ctx.outcome.decided_by
    assert any("hung" in note and "cancelled" in note for note in ctx.outcome.annotations)
    said = make_symptom("slurm_cancelled", "cancelled", "workload", 50, source="app", role="candidate")
    ctx = context("CANCELLED", stall, said)
    scheduler_state(ctx, shipped("final.scheduler_state"))
    assert ctx.outcome.category == "cancelled"
    ctx = context("CANCELLED", make_symptom("srun_task_exit", source="app", role="cascade"))
    scheduler_state(ctx, shipped("final.scheduler_state"))
    assert ctx.outcome.category == "cancelled"


def test_what_a_cancel_makes_ranks_print_is_no_hang() -> None:
    """A closed socket is what the cancel makes the surviving ranks print, and a watchdog's report in the job's last
    moments may be too: neither makes the cancel the consequence of a hang."""
    closed = make_symptom("socket_error", source="app", role="cascade")
    ctx = context("CANCELLED", closed)
    scheduler_state(ctx, shipped("final.scheduler_state"))
    assert ctx.outcome.category == "cancelled"
    end = T0 + timedelta(hours=1)
    job = JobFacts(job_id="7", nodes=("node-01", "node-02"), state="CANCELLED", exit_code="0:15",
                   derived_exit_code="0:0", start=T0, end=end)
    late = make_symptom("watchdog_timeout", source="app", role="cascade", time=end - timedelta(seconds=1))
    ctx = make_context(job, late)
    scheduler_state(ctx, shipped("final.scheduler_state"))
    assert ctx.outcome.category == "cancelled"
    early = make_symptom("watchdog_timeout", source="app", role="cascade", time=end - timedelta(minutes=20))
    ctx = make_context(job, early)
    assert scheduler_state(ctx, shipped("final.scheduler_state")) == 0 and not ctx.outcome.decided_by
