"""The linter: issues at the real line of the offending key, kinds that no rule emits, quarantined
site files as errors, one origin at a time, and site rules checked against the clean baseline."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_attrib.rulelint import kinds_named, lint, literal_text
from slurm_attrib.ruleset import load_ruleset

SITE_EXTRACT = """id: site.quota
version: 1
phase: extract
title: Quota
description: the site's own quota message, a storage fault
references: [https://example.org/quota]
match:
  source: app
  anchors: ['Disk quota exceeded']
  regex: 'Disk quota exceeded'
emit:
  kind: quota
  role: {role}
  category: storage
  responsible: workload
  strength: 50
"""
SITE_FILTER = """id: site.drop_quota
version: 1
phase: filter
title: Drop quota noise
description: drops the quota messages of the scratch file system
when:
  kind: [quota, qouta]
reason: scratch quota
"""


def _site(tmp_path: Path, files: dict[str, str]) -> str:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return str(tmp_path)


def _errors(tmp_path: Path, files: dict[str, str], **kwargs: object) -> list[str]:
    ruleset = load_ruleset(site_dir=_site(tmp_path, files))
    return [str(i) for i in lint(ruleset, origin="site", **kwargs) if i.severity == "error"]  # type: ignore[arg-type]


def test_issue_is_at_the_line_and_column_of_the_offending_key(tmp_path: Path) -> None:
    text = SITE_EXTRACT.format(role="candidate").replace("category: storage", "category: disk")
    assert _errors(tmp_path, {"quota.yaml": text}, baseline=False) == [
        f"{tmp_path}/quota.yaml:14:3: error: [site.quota] emit.category 'disk' is not one of "
        "('gpu_hardware', 'gpu_memory', 'nvlink', 'network', 'node_failure', 'storage', 'host_oom', 'gpu_oom', "
        "'application', 'job_limit', 'preempted', 'cancelled', 'unknown') (vocabulary)"]


def test_a_kind_no_rule_emits_is_an_error(tmp_path: Path) -> None:
    files = {"quota.yaml": SITE_EXTRACT.format(role="candidate"), "drop.yaml": SITE_FILTER}
    assert _errors(tmp_path, files, baseline=False) == [
        f"{tmp_path}/drop.yaml:7:3: error: [site.drop_quota] symptom kind 'qouta' is emitted by no extract rule "
        "(kinds)"]


def test_kinds_are_found_under_any_params_key_ending_in_kind_or_kinds() -> None:
    rule = load_ruleset(include_site=False).get("refine.causal_model")
    assert rule is not None
    named = kinds_named(rule)
    assert ("params.classes.gpu_fault.kinds.0", "xid") in named
    assert not [key for key, _ in named if ".categories." in key or key.endswith(".scope")]


def test_kinds_held_as_values_of_a_kinds_mapping_are_found() -> None:
    """final.scheduler_state maps category → the kind of Slurm's own line (params.evidence_kinds)."""
    rule = load_ruleset(include_site=False).get("final.scheduler_state")
    assert rule is not None
    assert ("params.evidence_kinds.job_limit", "slurm_time_limit") in kinds_named(rule)


def test_bundled_kinds_are_all_emitted() -> None:
    issues = [str(i) for i in lint(load_ruleset(include_site=False), baseline=False) if "(kinds)" in i.message]
    assert issues == []


def test_quarantined_file_is_a_lint_error_at_its_real_line(tmp_path: Path) -> None:
    text = SITE_EXTRACT.format(role="candidate").replace("  strength: 50", "  strenght: 50")
    assert _errors(tmp_path, {"quota.yaml": text}, baseline=False) == [
        f"{tmp_path}/quota.yaml:16:3: error: [-] quarantined, not running: unknown key 'emit.strenght' in emit "
        "(allowed: kind, kinds, role, category, responsible, strength, summary, actions, decoder, finding)"]


def test_origin_selects_the_rules_linted(tmp_path: Path) -> None:
    ruleset = load_ruleset(site_dir=_site(tmp_path, {"quota.yaml": SITE_EXTRACT.format(role="candidate")}))
    fixtures = tmp_path / "fixtures"
    site = {i.rule_id for i in lint(ruleset, fixtures, origin="site", baseline=False)}
    bundled = {i.rule_id for i in lint(ruleset, fixtures, origin="bundled", baseline=False)}
    assert site == {"site.quota"}, "the missing site fixtures are the only site issues"
    assert "site.quota" not in bundled


def test_a_site_rule_matching_the_clean_baseline_is_an_error(tmp_path: Path) -> None:
    noisy = SITE_EXTRACT.format(role="candidate").replace("'Disk quota exceeded'", "'mlx5_core'").replace(
        "source: app", "source: kernel")
    errors = _errors(tmp_path, {"quota.yaml": noisy})
    assert errors and all(":7:1: error: [site.quota] a candidate symptom from the clean baseline kernel/" in e
                          for e in errors)
    context = noisy.replace("role: candidate", "role: context")
    assert _errors(tmp_path, {"quota.yaml": context}) == []


@pytest.mark.parametrize(("pattern", "text"), [
    (r"CUDA (?:out of memory\.|error: out of memory)", "CUDA out of memory.\nerror: out of memory"),
    (r"<(?P<flag>a|b)>Yes<", "<a\nb>Yes<"),
    (r"Port: \d+ Link \(down\)", "Port: d+ Link (down)"),
])
def test_anchor_check_reads_the_regex_as_literal_text(pattern: str, text: str) -> None:
    assert literal_text(pattern) == text


def test_bundled_rules_lint_without_warnings() -> None:
    assert [str(i) for i in lint(load_ruleset(include_site=False), baseline=False)] == []
