"""The validated readers of a Python rule's params (slurm_attrib.engine.params)."""

from __future__ import annotations

from typing import Any

import pytest

from slurm_attrib.engine.params import int_list, list_map, record_map, seconds, str_list, str_map
from slurm_attrib.errors import RuleError
from slurm_attrib.ruleset import Rule


def rule_with(**params: Any) -> Rule:
    return Rule(id="final.example", version=1, phase="final", title="t", description="d",
                path="rules/final/example.yaml", line=1, implementation="python", params=params)


def test_readers_return_the_yaml_data() -> None:
    rule = rule_with(states=["COMPLETED"], kinds={"job_limit": "slurm_time_limit"},
                     outcomes={"TIMEOUT": {"responsible": "workload", "category": "job_limit"}})
    assert str_list(rule, "states") == ("COMPLETED",)
    assert str_map(rule, "kinds") == {"job_limit": "slurm_time_limit"}
    assert record_map(rule, "outcomes", ("category", "responsible")) == {"TIMEOUT": ("job_limit", "workload")}
    rule = rule_with(hangs={"TIMEOUT": ["nfs_error"]}, codes=[79, 48], after=120, short=0.5)
    assert list_map(rule, "hangs") == {"TIMEOUT": ("nfs_error",)}
    assert int_list(rule, "codes") == (79, 48)
    assert (seconds(rule, "after"), seconds(rule, "short")) == (120.0, 0.5)


@pytest.mark.parametrize(("reader", "value", "message"), [
    (str_list, None, r"needs params\.table"),
    (str_list, "COMPLETED", r"params\.table must be a list of non-empty strings"),
    (str_list, ["COMPLETED", 3], r"params\.table must be a list"),
    (str_list, [""], r"params\.table must be a list"),
    (str_map, ["a"], r"params\.table must map names to non-empty strings"),
    (str_map, {"job_limit": ["slurm_time_limit"]}, r"params\.table must map names"),
    (str_map, {"job_limit": None}, r"params\.table must map names"),
    (list_map, {"TIMEOUT": "nfs_error"}, r"params\.table must map names to lists of non-empty strings"),
    (list_map, {"TIMEOUT": ["nfs_error", ""]}, r"params\.table must map names to lists"),
    (list_map, ["TIMEOUT"], r"params\.table must map names to lists"),
    (int_list, [79, "48"], r"params\.table must be a list of integers"),
    (int_list, [True], r"params\.table must be a list of integers"),
    (seconds, "120", r"params\.table must be a non-negative number of seconds"),
    (seconds, -1, r"params\.table must be a non-negative number of seconds"),
])
def test_malformed_params_name_the_rule_file_and_line(reader: Any, value: Any, message: str) -> None:
    rule = rule_with() if value is None else rule_with(table=value)
    with pytest.raises(RuleError, match=r"^rules/final/example\.yaml:1: .*" + message):
        reader(rule, "table")


@pytest.mark.parametrize("record", [
    {"category": "job_limit"},  # a field missing
    {"category": "job_limit", "responsible": "workload", "strength": "80"},  # a field too many
    {"category": "job_limit", "responsible": 3},
    "job_limit",
])
def test_record_map_wants_exactly_the_fields(record: Any) -> None:
    with pytest.raises(RuleError, match=r"^rules/final/example\.yaml:1: params\.table\.TIMEOUT must hold "
                                        r"category, responsible \(strings\)"):
        record_map(rule_with(table={"TIMEOUT": record}), "table", ("category", "responsible"))


def test_record_map_wants_a_mapping() -> None:
    with pytest.raises(RuleError, match=r"params\.table must be a mapping"):
        record_map(rule_with(table=["TIMEOUT"]), "table", ("category",))
