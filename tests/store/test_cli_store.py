"""The store commands against a store built from the golden bundles, compared with reviewed expected
outputs in tests/store/expected/ (regenerate with SLURM_ATTRIB_REGEN=1 and review the diff).

The ruleset hash, the engine version and the verdict ids (which hash the ruleset) are masked, so a
rule edit that does not change a verdict does not churn these files."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
import yaml

from slurm_attrib.cli import main
from slurm_attrib.data import demo_bundle
from slurm_attrib.store import Store

from .conftest import DATA, NOW, TESTS

EXPECTED = Path(__file__).resolve().parent / "expected"
CASES = {
    "show_318442": ["show", "318442"],
    "show_319150_json": ["show", "319150", "--format", "json"],
    "show_319150_csv": ["show", "319150", "--format", "csv"],
    "query_all": ["query"],
    "query_node01_csv": ["query", "--node", "node-01", "--format", "csv"],
    "query_filters_json": ["query", "--responsible", "infrastructure", "--since", "2026-11-21", "--until", "8d",
                           "--limit", "3", "--format", "json"],
    "query_status": ["query", "--status", "unattributed", "--user", "rsato", "--partition", "h100"],
    "nodes_30d": ["nodes", "--since", "30d"],
    "nodes_min2_gpu": ["nodes", "--by-gpu", "--min-jobs", "2"],
    "nodes_json": ["nodes", "--since", "2026-11-22", "--format", "json"],
    "stats_week": ["stats", "--by", "week"],
    "stats_day_csv": ["stats", "--by", "day", "--since", "2026-11-23", "--format", "csv"],
    "stats_week_json": ["stats", "--format", "json"],
    "replay_all": ["replay", "--since", "2026-01-01", "--all", "--no-site-rules"],
}


def _mask(text: str) -> str:
    text = re.sub(r"(ruleset[ _]hash\"?:? ?\"?|ruleset \S+ \(|ruleset )[0-9a-f]{16}", r"\1<HASH>", text)
    text = re.sub(r"\"hash\": \"[0-9a-f]{16}\"", '"hash": "<HASH>"', text)
    text = re.sub(r"\"rules\": \d+", '"rules": <N>', text)  # the ruleset's rule count
    text = re.sub(r"\b[0-9a-f]{16}\b", "<ID>", text)
    return re.sub(r"engine(_version\"?:? ?\"?| )\d+\.\d+\.\d+", r"engine\1<VERSION>", text)


def _check(name: str, out: str) -> None:
    expected = EXPECTED / f"{name}.txt"
    if os.environ.get("SLURM_ATTRIB_REGEN"):
        expected.write_text(_mask(out))
    assert _mask(out) == expected.read_text(), f"{name}: output differs from {expected}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_output(name: str, golden_store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*CASES[name], "--store", str(golden_store), "--now", NOW]) == 0
    _check(name, capsys.readouterr().out)


def test_diagnose_store_records_and_flags_repeat_offender(tmp_path: Path, golden_store: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Job 318702's ECC fault on node-01 again under a new job id: node-01 was already the culprit of the
    hardware jobs that ended before it (application verdicts name a location, never a culprit)."""
    bundle = tmp_path / "b"
    shutil.copytree(TESTS / "golden" / "03c_cuda_ecc_only" / "bundle", bundle)
    job = yaml.safe_load((bundle / "job.yaml").read_text())
    job.update(job_id="400000")
    (bundle / "job.yaml").write_text(yaml.safe_dump(job))
    assert main(["diagnose", "--no-site-rules", "--bundle", str(bundle), "--store", str(golden_store),
                 "--now", NOW]) == 0
    out = capsys.readouterr().out
    assert "repeat offender: node-01 was the culprit of 3 earlier job(s)" in out
    assert "node-01: culprit of 3 earlier job(s): 318517, 318655, 318702" in out
    with Store.open(golden_store) as store:
        assert store.find("400000")[0]["culprit_nodes"] == "node-01"


def test_diagnose_without_store_records_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", "--no-site-rules", "--bundle", str(demo_bundle()), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["category"] == "nvlink"


def test_replay_shows_and_applies_a_changed_verdict(golden_store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with Store.open(golden_store) as store:
        store.db.execute("UPDATE diagnoses SET json = replace(json, '\"category\":\"nvlink\"', "
                         "'\"category\":\"gpu_hardware\"'), verdict_id = 'stale' WHERE job_id = '318442'")
    base = ["--store", str(golden_store), "--now", NOW, "--no-site-rules"]
    assert main(["replay", "318442", *base]) == 0
    out = capsys.readouterr().out
    assert "changed" in out and "nothing stored" in out
    assert main(["replay", "318442", "--apply", *base]) == 0
    assert "1 stored" in capsys.readouterr().out
    assert main(["replay", "318442", *base]) == 0
    assert "1 same" in capsys.readouterr().out
    with Store.open(golden_store) as store:
        assert [r["verdict_id"] for r in store.rows("SELECT verdict_id FROM history")] == ["stale"]


def test_errors_are_one_line(tmp_path: Path, golden_store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "1", "--store", str(tmp_path / "none.sqlite")]) == 4
    assert main(["show", "999", "--store", str(golden_store)]) == 4
    assert main(["query", "--since", "lastweek", "--store", str(golden_store)]) == 2
    assert main(["replay", "--store", str(golden_store)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 4 and "no store here" in err and "no verdict for job 999" in err


def test_sweep_and_import_spool_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store, files = tmp_path / "s.sqlite", sorted(DATA.glob("*.sacct.txt"))
    args = ["sweep", "--since", "2d", "--store", str(store), "--now", NOW, "--cluster", "mini", "--no-site-rules",
            *(x for f in files for x in ("--sacct-file", str(f)))]
    assert main(args) == 0
    _check("sweep_captured", capsys.readouterr().out)
    assert main(args) == 0
    assert capsys.readouterr().out.count("has-verdict") == 7
    assert main(["import-spool", str(tmp_path / "empty"), "--store", str(store)]) == 0
    assert capsys.readouterr().out == "(no rows)\n"
