"""The causal model shipped in rules/refine/causal_model.yaml: what it lets explain what."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Optional

import pytest

from slurm_attrib.engine.causal import CausalModel
from slurm_attrib.errors import RuleError
from slurm_attrib.model import Symptom
from slurm_attrib.ruleset import load_ruleset

T0 = datetime(2026, 11, 20, 10, 30, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def model() -> CausalModel:
    rule = load_ruleset(include_site=False).get("refine.causal_model")
    assert rule is not None
    return CausalModel.from_params(rule.params, rule.where)


def sym(kind: str, node: Optional[str], category: str = "unknown", gpu: Optional[str] = None,
        **fields: Any) -> Symptom:
    return Symptom(kind=kind, rule_id="t", node=node, time=T0, evidence=[], gpu=gpu, category=category,
                   fields=dict(fields))


def test_gpu_fault_explains_errors_that_follow_it(model: CausalModel) -> None:
    xid = sym("xid", "a", "gpu_hardware", gpu="0000:3b:00")
    assert model.explains(xid, sym("nccl_error", "b"))
    assert model.explains(xid, sym("watchdog_timeout", "b"))
    assert model.explains(xid, sym("nccl_ib_completion_error", "b", peer_node="a"))
    assert model.explains(xid, sym("cuda_error", "a", "application"))


def test_gpu_fault_never_explains_another_nodes_physical_or_gpu_fault(model: CausalModel) -> None:
    xid = sym("xid", "a", "gpu_hardware", gpu="0000:3b:00")
    for other in (sym("ib_link_down", "b", "network"), sym("pcie_aer", "b", "gpu_hardware"),
                  sym("nic_fatal", "b", "network"), sym("xid", "b", "gpu_hardware", gpu="0000:3b:00")):
        assert not model.explains(xid, other)
        assert model.independent_faults(xid, other)
    assert not model.explains(xid, sym("cuda_error", "b", "application"))


def test_a_host_oom_kill_explains_no_cuda_oom(model: CausalModel) -> None:
    """Host memory running out kills processes; it does not make a GPU allocation fail. The job's CUDA
    OOM explains what follows it, as any application error does."""
    oom_kill = sym("host_oom_kill", "a", "host_oom")
    cuda_oom = sym("cuda_oom", "a", "gpu_oom")
    assert not model.explains(oom_kill, cuda_oom)
    assert model.explains(oom_kill, sym("python_exception", "a", "application"))
    assert model.explains(cuda_oom, sym("watchdog_timeout", "b"))
    assert not model.explains(sym("xid", "a", "gpu_hardware"), cuda_oom)  # a lost GPU fails calls otherwise


def test_a_host_oom_kill_is_independent_of_a_gpu_fault_on_another_node(model: CausalModel) -> None:
    xid = sym("xid", "a", "gpu_memory", gpu="0000:3b:00")
    assert model.independent_faults(xid, sym("host_oom_kill", "b", "host_oom"))
    assert not model.independent_faults(xid, sym("host_oom_kill", "a", "host_oom"))


def test_same_node_faults_are_not_independent(model: CausalModel) -> None:
    assert not model.independent_faults(sym("xid", "a", "gpu_hardware"), sym("ib_link_down", "a", "network"))


def test_a_cuda_error_is_a_hardware_effect_only_when_its_text_says_so(model: CausalModel) -> None:
    ecc = sym("cuda_error", "a", "gpu_memory")
    assert "app_hw_error" in model.classes_of(ecc)
    assert "app_hw_error" not in model.classes_of(sym("cuda_error", "a", "application"))


def test_unknown_class_or_scope_is_a_rule_error() -> None:
    with pytest.raises(RuleError):
        CausalModel.from_params({"classes": {"x": {"kinds": ["xid"]}},
                                 "edges": [{"cause": "x", "effect": "y", "scope": "same_node"}]})
    with pytest.raises(RuleError):
        CausalModel.from_params({"classes": {"x": {"kinds": ["xid"]}},
                                 "edges": [{"cause": "x", "effect": "x", "scope": "galaxy"}]})


def test_verdict_scope_names_what_the_verdict_is_about() -> None:
    from slurm_attrib.engine.report import verdict_scope

    xid = sym("xid", "a", "gpu_hardware", gpu="0000:3b:00")
    xid.responsible = "infrastructure"
    link = sym("ib_link_down", "a", "network")
    link.responsible = "infrastructure"
    nfs = sym("storage_error", "a", "storage")
    nfs.responsible = "infrastructure"
    exc = sym("python_exception", "a", "application")
    exc.rank = 3
    assert verdict_scope("attributed", xid, ["a"]) == "gpu"
    assert verdict_scope("attributed", link, ["a"]) == "link"
    assert verdict_scope("attributed", nfs, []) == "filesystem"
    assert verdict_scope("attributed", exc, []) == "rank"
    assert verdict_scope("ambiguous", None, []) == "workload"


def test_classes_are_remembered_per_kind_and_category_only() -> None:
    model = CausalModel.from_params({"classes": {"hw": {"kinds": ["cuda_error"], "categories": ["gpu_hardware"]},
                                                 "err": {"kinds": ["cuda_error"]}}})
    fresh = CausalModel.from_params({"classes": {"hw": {"kinds": ["cuda_error"], "categories": ["gpu_hardware"]},
                                                 "err": {"kinds": ["cuda_error"]}}})
    asked = [sym("cuda_error", "a", "gpu_hardware"), sym("cuda_error", "b", "application"),
             sym("cuda_error", "c", "gpu_hardware"), sym("xid", "a", "gpu_hardware")]
    for one in asked * 2:
        assert model.classes_of(one) == frozenset(c.name for c in fresh.classes if c.contains(one))
    assert model.classes_of(asked[0]) == {"hw", "err"} and model.classes_of(asked[1]) == {"err"}
    assert model == fresh  # the memo is no part of the model's value
