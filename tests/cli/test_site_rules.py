"""Site rules through the command line: a broken site file is quarantined (lint fails on it, the
verdict says it, the finalizer still starts), and --origin site checks the site's own rules against
the fixtures kept next to them."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

from slurm_attrib.cli import main
from slurm_attrib.cli.slurm import build_finalizer
from slurm_attrib.config import load_config
from slurm_attrib.data import demo_bundle

EXAMPLE = Path(__file__).resolve().parents[2] / "etc" / "rules.d.example"
BROKEN = "id: site.broken\nversion: 1\nphase: extract\ntitle: broken\ndescription: x\nmatch:\n  source: app\n" \
         "  anchors: [boom]\n  regex: '(unclosed'\nemit: {kind: x}\n"


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("SLURM_ATTRIB_CONFIG", raising=False)
    monkeypatch.delenv("SLURM_ATTRIB_RULES_D", raising=False)
    rules = tmp_path / "rules.d"
    shutil.copytree(EXAMPLE, rules)
    return rules


def test_the_shipped_example_passes_its_own_checks(site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "test", "--origin", "site", "--rules-dir", str(site), "-v"]) == 0
    assert "ok   site.gpu_health_check_failed positive" in capsys.readouterr().out
    assert main(["rules", "lint", "--origin", "site", "--rules-dir", str(site)]) == 0


def test_a_broken_site_rule_fails_lint_at_its_line(site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (site / "broken.yaml").write_text(BROKEN)
    assert main(["rules", "lint", "--origin", "site", "--rules-dir", str(site)]) == 1
    out = capsys.readouterr().out
    assert f"{site / 'broken.yaml'}:9:" in out and "quarantined" in out


def test_a_broken_site_rule_leaves_the_verdict_standing_and_says_so(site: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    (site / "broken.yaml").write_text(BROKEN)
    assert main(["diagnose", "--bundle", str(demo_bundle()), "--rules-dir", str(site), "--format", "json"]) == 0
    diag = json.loads(capsys.readouterr().out)
    assert diag["category"] == "nvlink" and diag["culprit_nodes"] == ["node-02"]
    (rules,) = [c for c in diag["coverage"] if c["connector"] == "rules"]
    assert rules["state"] == "error" and "broken.yaml" in rules["notes"][0]


def test_the_finalizer_starts_with_a_broken_site_rule(site: Path, tmp_path: Path,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    (site / "broken.yaml").write_text(BROKEN)
    conf = tmp_path / "slurm-attrib.yaml"
    conf.write_text(f"rules_dir: {site}\nfinalizer:\n  backend: cli\n")
    with caplog.at_level(logging.ERROR, logger="slurm_attrib.rules"):
        engine = build_finalizer(load_config(str(conf)), tmp_path / "spool").engine
    assert engine.ruleset.get("site.gpu_health_check_failed") is not None
    assert [p.path for p in engine.ruleset.quarantined] == [str(site / "broken.yaml")]
    assert "quarantined" in caplog.text


def test_origin_site_without_site_rules_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "lint", "--origin", "site", "--no-site-rules"]) == 2
    assert "cannot go with --no-site-rules" in capsys.readouterr().err
