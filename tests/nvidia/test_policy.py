"""The Xid assessment policy overlay (slurm_attrib/data/xid_policy.yaml, slurm_attrib.nvidia.policy):
it loads, it covers the catalog, a malformed entry is named, and assessment follows its tables."""

from __future__ import annotations

import copy
import importlib.resources
import types
from dataclasses import replace
from typing import Any

import pytest
import yaml

from slurm_attrib.errors import CatalogError
from slurm_attrib.nvidia.assess import assess_xid
from slurm_attrib.nvidia.catalog import CATEGORIES, SEVERITIES, load_catalog
from slurm_attrib.nvidia.decode import decode_xid74
from slurm_attrib.nvidia.parse import XidEvent
from slurm_attrib.nvidia.policy import POLICY_FILE, XidPolicy, load_policy, parse_policy, parse_policy_text


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    text = importlib.resources.files("slurm_attrib.data").joinpath(POLICY_FILE).read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    assert isinstance(data, dict)
    return data


def event(code: int, message: str = "") -> XidEvent:
    return XidEvent("0000:3b:00", code, None, None, None, None, message)


def test_the_packaged_policy_covers_the_catalog() -> None:
    policy, catalog = load_policy(), load_catalog()
    assert set(policy.categories) == CATEGORIES
    assert set(policy.severity_strength) == SEVERITIES
    assert {b.bit_class for b in catalog.xid74_bits} <= set(policy.xid74_classes)
    assert policy.teardown_codes == {43, 45} and policy.context_codes == {63, 92, 154}


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d.pop("categories"), r"xid policy: categories: missing"),
    (lambda d: d["categories"].pop("driver"), r"xid policy: categories: must list exactly application, driver"),
    (lambda d: d["categories"].update(memory={"category": "gpu_memory"}),
     r"xid policy: categories\.memory: expected \{category, responsible\}"),
    (lambda d: d["categories"].update(memory={"category": "gpu_memory", "responsible": "vendor"}),
     r"xid policy: categories\.memory\.responsible: one of infrastructure, workload, unknown"),
    (lambda d: d["severity_strength"].update(high=101), r"xid policy: severity_strength\.high: expected an integer"),
    (lambda d: d["severity_strength"].update(high="80"), r"xid policy: severity_strength\.high"),
    (lambda d: d["severity_strength"].update(extreme=99), r"xid policy: severity_strength: must list exactly"),
    (lambda d: d.update(teardown_codes=43), r"xid policy: teardown_codes: expected a list"),
    (lambda d: d.update(context_codes=[154, "63"]), r"xid policy: context_codes\[1\]: expected an integer"),
    (lambda d: d["xid74_classes"].remove("unlisted"), r"xid policy: xid74_classes: .*include none and unlisted"),
    (lambda d: d["xid74_classes"].append("ignore"), r"xid policy: xid74_classes: classes must be distinct"),
    (lambda d: d["bucket_words"].update(RESET_GPU="reset the GPU"),
     r"xid policy: bucket_words\.RESET_GPU: expected \[plain words, bucket shown\] or null"),
    (lambda d: d["bucket_words"].update(RESET_GPU=["", "RESET_GPU"]),
     r"xid policy: bucket_words\.RESET_GPU\[0\]: expected a non-empty string"),
])
def test_a_malformed_policy_names_the_entry(document: dict[str, Any], change: Any, message: str) -> None:
    data = copy.deepcopy(document)
    change(data)
    with pytest.raises(CatalogError, match=message):
        parse_policy(data)


def test_invalid_yaml_names_the_file() -> None:
    with pytest.raises(CatalogError, match=r"xid policy: site\.yaml: invalid YAML"):
        parse_policy_text("categories: [", "site.yaml")


def test_parse_round_trips_the_packaged_file(document: dict[str, Any]) -> None:
    assert parse_policy(document) == load_policy()


def _with(**tables: Any) -> XidPolicy:
    return replace(load_policy(), **tables)


def test_teardown_and_context_codes_are_the_policys() -> None:
    policy = _with(teardown_codes=frozenset({13}), context_codes=frozenset({79}))
    teardown = assess_xid(event(13), policy=policy)
    assert (teardown.role, teardown.strength) == ("teardown", 10)
    assert teardown.summary == assess_xid(event(13)).summary  # the catalog's label
    context = assess_xid(event(79), policy=policy)
    assert (context.role, context.category, context.strength) == ("context", "gpu_hardware", 0)
    assert assess_xid(event(45), policy=policy).role == "candidate"


def test_category_and_strength_tables_are_the_policys() -> None:
    shipped = assess_xid(event(79))
    assert (shipped.category, shipped.responsible, shipped.strength) == ("gpu_hardware", "infrastructure", 90)
    categories = dict(load_policy().categories, hardware=("nvlink", "unknown"))
    strengths = dict(load_policy().severity_strength, critical=77)
    changed = assess_xid(event(79), policy=_with(categories=types.MappingProxyType(categories),
                                                   severity_strength=types.MappingProxyType(strengths)))
    assert (changed.category, changed.responsible, changed.strength) == ("nvlink", "unknown", 77)


def test_bucket_words_are_the_policys() -> None:
    words = dict(load_policy().bucket_words, RESTART_BM=("power-cycle the node", "RESTART_BM"), CONTACT_SUPPORT=None)
    changed = assess_xid(event(79), policy=_with(bucket_words=types.MappingProxyType(words)))
    assert changed.actions == ("power-cycle the node (RESTART_BM)",)
    unlisted = assess_xid(event(79), policy=_with(bucket_words=types.MappingProxyType({})))
    assert unlisted.actions == ("follow NVIDIA resolution bucket (RESTART_BM)",
                                "follow NVIDIA resolution bucket (CONTACT_SUPPORT)")


def test_the_worst_xid74_class_follows_the_policys_order() -> None:
    message = "NVLink: fatal error detected on link 3(0x200001, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)"
    decoded = decode_xid74(message)
    assert decoded is not None and decoded.worst_class == "marginal_signal_integrity"
    reordered = ("none", "marginal_signal_integrity", "unlisted", "ignore")
    decoded = decode_xid74(message, policy=_with(xid74_classes=reordered))
    assert decoded is not None and decoded.worst_class == "ignore"
    assert _with(xid74_classes=reordered).xid74_rank("possible_hardware") == reordered.index("unlisted")
    assessment = assess_xid(event(74, message), policy=_with(xid74_classes=reordered))
    assert (assessment.role, assessment.strength) == ("context", 0)
