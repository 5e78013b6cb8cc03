"""Site rules are first-class and cannot stop the engine: a site file that cannot run is quarantined
(left out, logged at ERROR, recorded with its real line) while the bundled rules keep running; a
bundled rule that is broken is still fatal, and the ``site.`` namespace belongs to sites alone."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from slurm_attrib import ruleset as ruleset_module
from slurm_attrib.engine import Engine
from slurm_attrib.errors import RuleError
from slurm_attrib.ruleset import load_ruleset, site_rule_files

GOOD = """id: site.gpu_health
version: 1
phase: extract
title: Site GPU health check failed
description: the site's prolog health check logged a failing GPU
match: {source: kernel, anchors: ['gpu-health: FAIL'], regex: 'gpu-health: FAIL gpu=(?P<gpu_index>\\d+)'}
emit: {kind: site_gpu_health, role: candidate, category: gpu_hardware, responsible: infrastructure, strength: 70}
"""
HEADER = "version: 1\ntitle: t\ndescription: a site rule that is broken on purpose\n"
EXTRACT = "phase: extract\nmatch: {source: app, anchors: [boom], regex: boom}\n"
BAD_FILES = {
    "yaml": ("id: site.x\nversion: [1\n", 3, "invalid YAML"),
    "unknown key": ("id: site.x\n" + HEADER + EXTRACT + "emmit: {kind: x}\n", 7, "unknown key 'emmit'"),
    "unknown match key": ("id: site.x\n" + HEADER + "phase: extract\nmatch:\n  source: app\n  anchors: [boom]\n"
                          "  regex: boom\n  flags: i\n", 10, "unknown key 'match.flags'"),
    "strength": ("id: site.x\n" + HEADER + EXTRACT + "emit:\n  kind: x\n  strength: high\n", 9,
                 "emit.strength is an integer 0-100"),
    "order": ("id: site.x\n" + HEADER + EXTRACT + "order: first\n", 7, "order must be an integer"),
    "when regex": ("id: site.x\n" + HEADER + "phase: filter\nwhen:\n  kind: xid\n  regex:\n    raw: '(oops'\n",
                   9, "when.regex.raw does not compile"),
    "refine without python": ("id: site.x\n" + HEADER + "phase: refine\nstage: demote\nwhen: {kind: xid}\n", 7,
                              "unknown key 'when'"),
    "namespace": ("id: app.x\n" + HEADER + EXTRACT, 1, "a site rule id starts with 'site.'"),
    "bundled id": ("id: kernel.nvidia_xid\n" + HEADER + EXTRACT, 1, "a site rule id starts with 'site.'"),
    "python": ("id: site.x\n" + HEADER + "phase: filter\nimplementation: python\n", 6,
               "names a Python implementation that is not registered"),
    "decoder": ("id: site.x\n" + HEADER + EXTRACT + "emit: {kind: x, decoder: nope}\n", 7,
                "unknown decoder 'nope'"),
    "also_in its own source": ("id: site.x\n" + HEADER + "phase: extract\nmatch:\n  source: app\n  anchors: [boom]\n"
                               "  regex: boom\n  also_in: [app]\n", 10, "match.also_in must be [diag], on an app rule"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_a_bad_site_file_is_quarantined_at_its_line(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                     case: str) -> None:
    content, line, message = BAD_FILES[case]
    (tmp_path / "bad.yaml").write_text(content)
    (tmp_path / "good.yaml").write_text(GOOD)
    with caplog.at_level(logging.ERROR, logger="slurm_attrib.rules"):
        ruleset = load_ruleset(site_dir=str(tmp_path))
    assert [(p.path, p.line) for p in ruleset.quarantined] == [(str(tmp_path / "bad.yaml"), line)]
    assert message in ruleset.quarantined[0].message
    assert ruleset.get("site.gpu_health") is not None, "the good site rule still runs"
    assert len(ruleset.rules) == len(load_ruleset(include_site=False).rules) + 1
    assert any(r.levelno == logging.ERROR and "bad.yaml" in r.getMessage() for r in caplog.records)


def test_quarantined_file_does_not_change_the_digest(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(BAD_FILES["yaml"][0])
    assert load_ruleset(site_dir=str(tmp_path)).digest == load_ruleset(include_site=False).digest
    (tmp_path / "good.yaml").write_text(GOOD)
    assert load_ruleset(site_dir=str(tmp_path)).digest != load_ruleset(include_site=False).digest


def test_engine_runs_the_bundled_rules_beside_a_quarantined_file(tmp_path: Path) -> None:
    rules_d = tmp_path / "rules.d"
    rules_d.mkdir()
    (rules_d / "bad.yaml").write_text(BAD_FILES["python"][0])
    bundle = tmp_path / "bundle"
    (bundle / "syslog").mkdir(parents=True)
    (bundle / "job.yaml").write_text("job_id: '7'\nnodes: [node-01]\nstate: FAILED\nexit_code: '1:0'\n")
    (bundle / "syslog" / "node-01.log").write_text(
        "2024-05-01T10:00:00+00:00 node-01 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, "
        "GPU has fallen off the bus.\n")
    diag = Engine(load_ruleset(site_dir=str(rules_d))).diagnose(bundle)
    assert diag.category == "gpu_hardware"


def test_a_broken_bundled_rule_is_still_fatal(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = [("rules/kernel/broken.yaml", b"id: kernel.broken\nversion: [1\n")]
    monkeypatch.setattr(ruleset_module, "bundled_rule_files", lambda: broken)
    with pytest.raises(RuleError, match=r"rules/kernel/broken.yaml:3: invalid YAML"):
        load_ruleset(include_site=False)


def test_bundled_rules_never_use_the_site_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not [r.id for r in load_ruleset(include_site=False).rules if r.id.startswith("site.")]
    monkeypatch.setattr(ruleset_module, "bundled_rule_files", lambda: [("rules/site.yaml", GOOD.encode())])
    with pytest.raises(RuleError, match=r"rules/site.yaml:1: bundled rules never use the 'site.' id namespace"):
        load_ruleset(include_site=False)


def test_site_fixtures_and_hidden_folders_hold_no_rules(tmp_path: Path) -> None:
    for rel in ("a.yaml", "pack/b.yml", "fixtures/site.a/positive/case.yaml", ".git/c.yaml", "_off/d.yaml"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(GOOD)
    assert [Path(p).relative_to(tmp_path).as_posix() for p, _ in site_rule_files(str(tmp_path))] == [
        "a.yaml", "pack/b.yml"]
