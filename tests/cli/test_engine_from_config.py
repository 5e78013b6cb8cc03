"""One configuration, one engine: every command that judges evidence and the finalizer load the same
rules (ruleset digest) with the same tolerances (regression: the CLI used to ignore rules_dir and
engine.* while the finalizer honoured them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_attrib.cli import build_parser
from slurm_attrib.cli.common import engine_of
from slurm_attrib.cli.slurm import build_finalizer
from slurm_attrib.config import load_config
from slurm_attrib.engine import Engine

SITE_RULE = """id: site.gpu_health
version: 1
phase: extract
title: Site GPU health check failed
description: the site's prolog health check reports a failed GPU
match:
  source: app
  anchors: ["gpu-health: FAIL"]
  regex: 'gpu-health: FAIL gpu=(?P<gpu_index>\\d+) check=(?P<check>\\S+)'
emit:
  kind: site_gpu_health
  role: candidate
  category: gpu_hardware
  responsible: infrastructure
  strength: 80
  summary: "GPU {gpu_index} failed the site health check {check}"
"""

COMMANDS = (["diagnose", "--bundle", "B"], ["demo"], ["rules", "list"], ["rules", "lint"], ["rules", "test"],
            ["eval", "corpus"], ["replay", "1"], ["sweep"])


@pytest.fixture
def config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    rules = tmp_path / "rules.d"
    rules.mkdir()
    (rules / "gpu_health.yaml").write_text(SITE_RULE)
    conf = tmp_path / "slurm-attrib.yaml"
    conf.write_text(f"rules_dir: {rules}\nengine:\n  ambiguity_s: 60\nfinalizer:\n  backend: cli\n"
                    f"store:\n  path: {tmp_path / 'store.sqlite'}\n")
    monkeypatch.delenv("SLURM_ATTRIB_RULES_D", raising=False)
    monkeypatch.delenv("SLURM_ATTRIB_CONFIG", raising=False)
    return conf


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_every_command_builds_the_finalizers_engine(config_file: Path, tmp_path: Path, argv: list[str]) -> None:
    reference = build_finalizer(load_config(str(config_file)), tmp_path / "spool").engine
    assert reference.ruleset.get("site.gpu_health") is not None and reference.settings.ambiguity_s == 60
    engine = engine_of(build_parser().parse_args([*argv, "--config", str(config_file)]))
    assert engine.ruleset.digest == reference.ruleset.digest
    assert engine.settings == reference.settings


def test_the_environment_names_the_configuration(config_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_ATTRIB_CONFIG", str(config_file))
    engine = engine_of(build_parser().parse_args(["rules", "list"]))
    assert engine.settings.ambiguity_s == 60 and engine.ruleset.get("site.gpu_health") is not None


def test_rules_dir_option_and_no_site_rules_override_the_configuration(config_file: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    config = load_config(str(config_file))
    assert Engine.from_config(config, rules_dir=str(empty)).ruleset.get("site.gpu_health") is None
    bundled = Engine.from_config(config, include_site=False)
    assert bundled.ruleset.get("site.gpu_health") is None and bundled.settings.ambiguity_s == 60
