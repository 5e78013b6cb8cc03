"""Refine rules that read their policy from params: which DCGM kinds corroborate a kernel fault, and
how strong a kernel fault must be to explain an application error."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from slurm_attrib.engine.causal import CausalModel
from slurm_attrib.engine.refine import app_errors_explained, dcgm_corroboration, select_root
from slurm_attrib.model import JobFacts, Symptom

from .conftest import T0, make_context, make_symptom, shipped

JOB = JobFacts(job_id="7", nodes=("node-01", "node-02"))
GPU = "0000:3b:00"


def xid(strength: int = 80) -> Symptom:
    return make_symptom("xid", "gpu_hardware", "infrastructure", strength, source="kernel", gpu=GPU,
                        role="candidate", code=79)


def test_dcgm_kinds_that_corroborate_are_the_rules_data() -> None:
    fault = xid()
    sample, other = make_symptom("dcgm_xid", gpu=GPU), make_symptom("dcgm_power", gpu=GPU)
    ctx = make_context(JOB, fault, sample, other)
    assert dcgm_corroboration(ctx, shipped("refine.dcgm_corroboration")) == 1
    assert sample.supports == fault.id == "s0001" and other.supports is None
    ctx = make_context(JOB, fault, make_symptom("dcgm_xid", gpu=GPU), other)
    assert dcgm_corroboration(ctx, shipped("refine.dcgm_corroboration", corroborating_kinds=["dcgm_power"])) == 1
    assert other.supports == fault.id


def _explaining(strength: int, threshold: int) -> bool:
    cuda = make_symptom("cuda_error", "gpu_hardware", "infrastructure", 60, source="app", role="candidate",
                        time=T0 + timedelta(seconds=5))
    ctx = make_context(JOB, xid(strength), cuda)
    causal_rule = shipped("refine.causal_model")
    ctx.causal = CausalModel.from_params(causal_rule.params, causal_rule.where)
    app_errors_explained(ctx, shipped("refine.app_errors_explained_by_hardware", min_cause_strength=threshold))
    return cuda.role == "cascade"


def test_a_kernel_fault_explains_app_errors_from_params_min_cause_strength() -> None:
    assert shipped("refine.app_errors_explained_by_hardware").params["min_cause_strength"] == 60
    assert _explaining(strength=60, threshold=60)
    assert not _explaining(strength=59, threshold=60)
    assert _explaining(strength=40, threshold=40)




def _explained_when_kernel_is_later(seconds: int, code: int, node: str = "node-02", indeterminate: bool = True) -> bool:
    fault = make_symptom("xid", "gpu_hardware", "infrastructure", 90, source="kernel", gpu=GPU, role="candidate",
                         node=node, time=T0 + timedelta(seconds=seconds), code=code)
    cuda = make_symptom("cuda_error", "gpu_hardware", "infrastructure", 60, source="app", role="candidate",
                        indeterminate=indeterminate)
    ctx = make_context(JOB, fault, cuda)
    causal_rule = shipped("refine.causal_model")
    ctx.causal = CausalModel.from_params(causal_rule.params, causal_rule.where)
    app_errors_explained(ctx, shipped("refine.app_errors_explained_by_hardware"))
    return cuda.role == "cascade"


def test_a_lost_gpu_explains_its_nodes_errors_across_two_clocks() -> None:
    """The kernel's Xid 79 stamped 75 s after the application's 'unspecified launch failure' (another clock)
    still explains it on its node; a fault that does not take the GPU away, one on another node, or an
    error that names the code's fault (tests/rules/.../hardware_after_app_error) is not explained."""
    assert _explained_when_kernel_is_later(75, 79)
    assert not _explained_when_kernel_is_later(75, 31)
    assert not _explained_when_kernel_is_later(200, 79)
    assert not _explained_when_kernel_is_later(75, 79, node="node-01")
    assert _explained_when_kernel_is_later(1, 31)
    assert not _explained_when_kernel_is_later(75, 79, indeterminate=False)


def _leaders(*symptoms: Symptom) -> list[str]:
    job = JobFacts(job_id="7", nodes=("node-01", "node-02"), state="FAILED", exit_code="1:0", derived_exit_code="0:0")
    ctx = make_context(job, *symptoms)
    model = shipped("refine.causal_model")
    ctx.causal = CausalModel.from_params(model.params, model.where)
    select_root(ctx, shipped("refine.select_root"))
    return [s.kind for s in ctx.leaders]


def test_a_candidate_with_no_time_that_the_leader_cannot_cause_leads_with_it() -> None:
    """A host OOM kill in the kernel log and the job's CUDA OOM in an unstamped output: which came first
    is unknown and neither causes the other, so both lead (ambiguous); an unstamped error the leader
    explains does not."""
    kill = make_symptom("host_oom_kill", "host_oom", "workload", 75, node="node-01", role="candidate")
    cuda_oom = make_symptom("cuda_oom", "gpu_oom", "workload", 60, node="node-01", role="candidate", time=None)
    assert _leaders(kill, cuda_oom) == ["host_oom_kill", "cuda_oom"]
    exception = make_symptom("python_exception", "application", "workload", 50, node="node-01", role="candidate",
                             time=None)
    assert _leaders(kill, exception) == ["host_oom_kill"]


def test_two_readings_of_one_line_are_not_ordered_by_their_rules_names() -> None:
    """'OSError: [Errno 37] No locks available' is an exception and a refused file lock: read from one stamped
    line, neither came first, so the stronger reading leads, as it does when the line has no stamp."""
    exception = make_symptom("python_exception", "application", "workload", 40, node="node-01", source="app",
                             role="candidate")
    lock = make_symptom("storage_error", "storage", "unknown", 55, node="node-01", source="app", role="candidate")
    exception.rule_id, lock.rule_id = "app.python_exception", "app.storage_lock_failed"
    assert _leaders(exception, lock)[0] == "storage_error"
    later = make_symptom("storage_error", "storage", "unknown", 55, node="node-01", source="app", role="candidate",
                         time=T0 + timedelta(seconds=3))
    later.evidence[0] = dataclasses.replace(later.evidence[0], line=9)  # another line, seconds later
    assert _leaders(exception, later)[0] == "python_exception"


def test_the_lines_of_one_report_in_one_file_lead_by_strength_not_by_their_order() -> None:
    """kubectl --timestamps on a NCCL failure: PyTorch's 'NCCL error ... invalid usage' (stderr) stamped 3 us before
    NCCL's own 'Bootstrap : no socket interface found' (stdout, printed first): one report, merged in any order, so
    the stronger line leads as when the lines have no stamps; in another file, or seconds apart, order decides."""
    generic = make_symptom("nccl_error", "application", "workload", 35, node="node-01", source="app",
                           role="candidate")
    specific = make_symptom("socket_error", "network", "unknown", 45, node="node-01", source="app", role="candidate",
                            time=T0 + timedelta(microseconds=3))
    specific.evidence[0] = dataclasses.replace(specific.evidence[0], line=4)
    assert _leaders(generic, specific)[0] == "socket_error"
    elsewhere = make_symptom("socket_error", "network", "unknown", 45, node="node-01", source="app",
                             role="candidate", time=T0 + timedelta(microseconds=3))
    elsewhere.evidence[0] = dataclasses.replace(elsewhere.evidence[0], file="app/other.log", line=4)
    assert _leaders(generic, elsewhere)[0] == "nccl_error"
    other_node = make_symptom("socket_error", "network", "unknown", 45, node="node-02", source="app",
                              role="candidate", time=T0 + timedelta(microseconds=3))
    other_node.evidence[0] = dataclasses.replace(other_node.evidence[0], file=generic.evidence[0].file, line=4)
    assert _leaders(generic, other_node)[0] == "nccl_error"  # one combined file, another node's line: not one report


def test_a_gpu_fault_and_another_nodes_host_oom_kill_in_one_second_both_lead() -> None:
    xid = make_symptom("xid", "gpu_memory", "infrastructure", 90, node="node-02", role="candidate")
    kill = make_symptom("host_oom_kill", "host_oom", "workload", 75, node="node-01", role="candidate",
                        time=T0 + timedelta(seconds=0.8))
    assert _leaders(xid, kill) == ["xid", "host_oom_kill"]
