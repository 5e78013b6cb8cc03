"""sacct parsing (captured and sweep-shaped output) through the Slurm layer, the real command's argv and
timeout (CliSlurm.failed_jobs with a stand-in sacct on PATH), and the sweep with a spooled bundle."""

from __future__ import annotations

import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest

from slurm_attrib.engine import Engine
from slurm_attrib.slurm import CapturedSacct, CliSlurm, SlurmCommandError, SlurmError, SlurmTimeout
from slurm_attrib.slurm.cli_backend import FAILED_JOB_FIELDS
from slurm_attrib.slurm.parse import parse_sacct_capture
from slurm_attrib.store import Store
from slurm_attrib.store.sweep import job_yaml, sweep

from .conftest import DATA, TESTS, VERDICT_TIME

SINCE, UNTIL = datetime(2026, 11, 1, tzinfo=timezone.utc), datetime(2026, 12, 1, tzinfo=timezone.utc)


def test_parse_sweep_format() -> None:
    jobs = parse_sacct_capture((DATA / "sweep-format.txt").read_text(), FAILED_JOB_FIELDS, timezone.utc)
    assert [j.job_id for j in jobs] == ["512", "513_7", "514"]
    first, array, cancelled = jobs
    assert first.nodes == ("gpu-01", "gpu-02", "gpu-04") and first.cluster == "orion" and first.user == "alice"
    assert first.start == datetime(2026, 11, 30, 8, tzinfo=timezone.utc) and first.exit_code == "1:0"
    assert (array.job_id_raw, *array.array_ids) == ("520", "513", "7")
    assert job_yaml(array)["job_id"] == "520" and job_yaml(array)["array_task_id"] == "7"
    assert job_yaml(array)["array_job_id"] == "513" and job_yaml(array)["end"] == "2026-11-30T09:10:00Z"
    assert cancelled.state == "CANCELLED" and cancelled.nodes == () and cancelled.end is None
    assert "array_job_id" not in job_yaml(first) and job_yaml(first)["nodes"] == ["gpu-01", "gpu-02", "gpu-04"]


def test_captured_files_filtered_like_sacct() -> None:
    jobs = CapturedSacct(sorted(DATA.glob("*.sacct.txt")), cluster="mini").failed_jobs(SINCE, UNTIL)
    assert sorted(j.job_id for j in jobs) == ["1", "10", "5", "6", "7_1", "7_2", "9"]  # no COMPLETED, no steps
    assert {j.cluster for j in jobs} == {"mini"}


def test_captured_files_window_and_unreadable(tmp_path: Path) -> None:
    source = CapturedSacct([DATA / "sweep-format.txt"], cluster="other")
    assert [j.job_id for j in source.failed_jobs(SINCE, UNTIL)] == ["512", "513_7", "514"]
    assert {j.cluster for j in source.failed_jobs(SINCE, UNTIL)} == {"orion"}  # the Cluster column wins
    late = datetime(2026, 11, 30, 9, 20, tzinfo=timezone.utc)
    assert [j.job_id for j in source.failed_jobs(late, UNTIL)] == ["512", "514"]  # 514: end unknown, kept
    with pytest.raises(SlurmError, match="cannot read"):
        CapturedSacct([tmp_path / "nope.txt"]).failed_jobs(SINCE, UNTIL)


def _fake_sacct(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    """A stand-in ``sacct`` on PATH, run by the real runner (no shell, a timeout)."""
    path = tmp_path / "sacct"
    path.write_text(f"#!/bin/sh\nPATH=/usr/bin:/bin\n{body}\n")
    path.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))


def test_real_command_runs_without_shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_sacct(tmp_path, monkeypatch, f'echo "$@" > {tmp_path}/argv; grep -v "^#" {DATA / "sweep-format.txt"}')
    jobs = CliSlurm(tz=timezone.utc, cluster="orion").failed_jobs(SINCE, UNTIL)
    assert [j.job_id for j in jobs] == ["512", "513_7", "514"]
    argv = (tmp_path / "argv").read_text().split()
    assert argv[:5] == ["--parsable2", "--noheader", "--allusers", "--allocations",
                        "--format=jobid,jobidraw,cluster,user,partition,nodelist,start,end,state,exitcode,derivedexitcode"]
    assert "--state=FAILED,NODE_FAIL,TIMEOUT,OUT_OF_MEMORY,BOOT_FAIL,CANCELLED,PREEMPTED,DEADLINE" in argv
    assert "--starttime=2026-11-01T00:00:00" in argv and "--endtime=2026-12-01T00:00:00" in argv
    assert "--clusters=orion" in argv


def test_real_command_failures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_sacct(tmp_path, monkeypatch, "sleep 5")
    with pytest.raises(SlurmTimeout, match="no answer within"):
        CliSlurm(timeout_s=0.2).failed_jobs(SINCE, UNTIL)
    _fake_sacct(tmp_path, monkeypatch, "echo boom >&2; exit 1")
    with pytest.raises(SlurmCommandError, match="exited 1: boom"):
        CliSlurm().failed_jobs(SINCE, UNTIL)
    (tmp_path / "sacct").unlink()
    with pytest.raises(SlurmCommandError, match="cannot run"):
        CliSlurm().failed_jobs(SINCE, UNTIL)


def test_sweep_uses_the_spooled_bundle(tmp_path: Path, engine: Engine) -> None:
    spool = tmp_path / "spool"
    golden_applog = TESTS / "golden" / "07_python_exception_rank0" / "bundle" / "applog"
    shutil.copytree(golden_applog, spool / "mini" / "9" / "applog")
    source = CapturedSacct([DATA / "user-fail.sacct.txt", DATA / "fail-exit3.sacct.txt"], cluster="mini")
    with Store.open(tmp_path / "s.sqlite") as store:
        results = sweep(store, engine, source, SINCE, UNTIL, VERDICT_TIME, spool=spool)
        again = sweep(store, engine, source, SINCE, UNTIL, VERDICT_TIME, spool=spool)
        stored = store.find("9")[0]
        bundle = store.bundle(stored["id"])
    by_job = {r.job_id: r for r in results}
    assert by_job["9"].evidence == "sacct+spool" and by_job["9"].category == "application"
    assert by_job["1"].evidence == "sacct" and by_job["1"].status == "unattributed"
    assert {r.action for r in again} == {"has-verdict"}
    assert stored["user"] == "" and stored["state"] == "FAILED" and bundle is not None and bundle["files"] == 2
