"""docs/rules.md is the rule author's reference: its key table matches what the loader accepts, key
for key and phase for phase, and its worked example is a real site rule whose fixtures pass."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import yaml

from slurm_attrib.engine import Engine
from slurm_attrib.rulelint import lint
from slurm_attrib.ruleschema import PHASES, accepted_keys
from slurm_attrib.ruleset import load_ruleset, site_fixtures_dir
from slurm_attrib.ruletest import materialise, run_all

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "rules.md"
EXAMPLE = ROOT / "etc" / "rules.d.example"
ROW = re.compile(r"^\| `(?P<key>[\w.]+)` \| (?P<phases>[\w, ]+) \|", re.M)


def documented_keys() -> dict[str, tuple[str, ...]]:
    """The rows of the table under '## Keys': key → phases."""
    section = DOC.read_text(encoding="utf-8").split("\n## Keys\n", 1)[1].split("\n## ", 1)[0]
    return {m["key"]: PHASES if m["phases"] == "all" else tuple(p.strip() for p in m["phases"].split(","))
            for m in ROW.finditer(section)}


def test_every_key_the_loader_accepts_is_documented_for_its_phases() -> None:
    documented = documented_keys()
    missing = {k: v for k, v in accepted_keys().items() if documented.get(k) != v}
    assert missing == {}, "docs/rules.md must list these keys with exactly these phases"


def test_the_doc_documents_no_key_the_loader_refuses() -> None:
    assert sorted(set(documented_keys()) - set(accepted_keys())) == []


def test_the_worked_example_is_a_site_rule_whose_fixtures_pass() -> None:
    ruleset = load_ruleset(site_dir=str(EXAMPLE))
    rule = ruleset.get("site.gpu_health_check_failed")
    assert rule is not None and rule.origin == "site" and ruleset.quarantined == ()
    results = run_all(Engine(ruleset), site_fixtures_dir(str(EXAMPLE)), origin="site")
    assert sorted((r.kind, r.passed) for r in results) == [("negative", True), ("positive", True)]
    assert [str(i) for i in lint(ruleset, site_fixtures_dir(str(EXAMPLE)), origin="site")] == []


def test_the_worked_example_makes_the_node_the_culprit() -> None:
    fixture = site_fixtures_dir(str(EXAMPLE)) / "site.gpu_health_check_failed" / "positive" / "pcie_bandwidth.yaml"
    with tempfile.TemporaryDirectory() as tmp:
        diag = Engine(load_ruleset(site_dir=str(EXAMPLE))).diagnose(materialise(fixture, Path(tmp)))
    assert (diag.category, diag.culprit_nodes) == ("gpu_hardware", ["node-02"])
    assert diag.root_cause is not None and diag.root_cause.kind == "site_gpu_health_fail"


def test_the_doc_quotes_the_example_rule_as_shipped() -> None:
    shipped = yaml.safe_load((EXAMPLE / "gpu_health.yaml").read_text(encoding="utf-8"))
    quoted = DOC.read_text(encoding="utf-8").split("```yaml\nid: site.gpu_health_check_failed", 1)[1]
    assert yaml.safe_load("id: site.gpu_health_check_failed" + quoted.split("```", 1)[0]) == shipped
