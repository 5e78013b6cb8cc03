"""The store commands find the store and the verdict spool where the configuration puts them, as the
finalizer does: --store, else $SLURM_ATTRIB_STORE, else store.path; the spool under spool.dir."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurm_attrib.cli import main
from slurm_attrib.data import demo_bundle


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("SLURM_ATTRIB_STORE", "SLURM_ATTRIB_SPOOL", "SLURM_ATTRIB_RULES_D"):
        monkeypatch.delenv(name, raising=False)
    conf = tmp_path / "slurm-attrib.yaml"
    conf.write_text(f"store:\n  path: {tmp_path / 'site.sqlite'}\nspool:\n  dir: {tmp_path / 'spool'}\n")
    monkeypatch.setenv("SLURM_ATTRIB_CONFIG", str(conf))
    return conf


def test_query_reads_the_configured_store(config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", "--no-site-rules", "--bundle", str(demo_bundle()), "--store",
                 str(tmp_path / "site.sqlite"), "--now", "2026-11-20T11:00:00Z", "--format", "json"]) == 0
    capsys.readouterr()
    assert main(["query", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["job_id"] for r in rows] == ["318442"]


def test_import_spool_reads_the_configured_spool(config: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    locked = tmp_path / "not-a-store"
    locked.write_bytes(b"garbage" * 100)
    assert main(["diagnose", "--no-site-rules", "--bundle", str(demo_bundle()), "--store", str(locked),
                 "--now", "2026-11-20T11:00:00Z", "--format", "json",
                 "--spool-dir", str(tmp_path / "spool" / "verdicts")]) == 0  # by hand, only when told to
    assert f"verdict spooled to {tmp_path / 'spool' / 'verdicts'}" in capsys.readouterr().err
    assert main(["import-spool", "--format", "json"]) == 0
    assert [r["result"] for r in json.loads(capsys.readouterr().out)] == ["imported"]
    assert main(["query", "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 1
