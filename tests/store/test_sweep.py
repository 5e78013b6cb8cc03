"""sacct parsing (captured and sweep-shaped output), the real command's argv and timeout, and the sweep
with a spooled bundle."""

from __future__ import annotations

import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest

from slurm_attrib.engine import Engine
from slurm_attrib.store import SacctError, Store
from slurm_attrib.store.sacct import SacctCommand, SacctFiles, parse_parsable
from slurm_attrib.store.sweep import sweep

from .conftest import DATA, TESTS, VERDICT_TIME

SINCE, UNTIL = datetime(2026, 11, 1, tzinfo=timezone.utc), datetime(2026, 12, 1, tzinfo=timezone.utc)


def test_parse_sweep_format() -> None:
    jobs = parse_parsable((DATA / "sweep-format.txt").read_text())
    assert [j.job_id for j in jobs] == ["512", "513_7", "514"]
    first, array, cancelled = jobs
    assert first.nodes == ("gpu-01", "gpu-02", "gpu-04") and first.cluster == "orion" and first.user == "alice"
    assert first.start == datetime(2026, 11, 30, 8, tzinfo=timezone.utc) and first.exit_code == "1:0"
    assert (array.job_id_raw, array.array_job_id, array.array_task_id) == ("520", "513", "7")
    assert array.job_yaml()["job_id"] == "520" and array.job_yaml()["array_task_id"] == "7"
    assert cancelled.state == "CANCELLED" and cancelled.nodes == () and cancelled.end is None


def test_captured_files_filtered_like_sacct() -> None:
    jobs = SacctFiles(sorted(DATA.glob("*.sacct.txt")), cluster="mini").failed_jobs(SINCE, UNTIL)
    assert sorted(j.job_id for j in jobs) == ["1", "10", "5", "6", "7_1", "7_2", "9"]  # no COMPLETED, no steps
    assert {j.cluster for j in jobs} == {"mini"}


def _script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "sacct"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def test_real_command_runs_without_shell(tmp_path: Path) -> None:
    fake = _script(tmp_path, f'echo "$@" > {tmp_path}/argv; grep -v "^#" {DATA / "sweep-format.txt"}')
    jobs = SacctCommand(binary=fake, zone=timezone.utc).failed_jobs(SINCE, UNTIL)
    assert [j.job_id for j in jobs] == ["512", "513_7", "514"]
    argv = (tmp_path / "argv").read_text()
    assert argv.startswith("--parsable2 -X -n -S 2026-11-01T00:00:00 -E 2026-12-01T00:00:00 -o JobID,JobIDRaw,")
    assert "--state=FAILED,NODE_FAIL,TIMEOUT,OUT_OF_MEMORY,CANCELLED,PREEMPTED" in argv


def test_real_command_failures(tmp_path: Path) -> None:
    with pytest.raises(SacctError, match="did not answer"):
        SacctCommand(binary=_script(tmp_path, "sleep 5"), timeout_s=0.2).failed_jobs(SINCE, UNTIL)
    with pytest.raises(SacctError, match="exit 1"):
        SacctCommand(binary=_script(tmp_path, "echo boom >&2; exit 1")).failed_jobs(SINCE, UNTIL)
    with pytest.raises(SacctError, match="not found"):
        SacctCommand(binary=str(tmp_path / "nope")).failed_jobs(SINCE, UNTIL)


def test_sweep_uses_the_spooled_bundle(tmp_path: Path, engine: Engine) -> None:
    spool = tmp_path / "spool"
    golden_applog = TESTS / "golden" / "07_python_exception_rank0" / "bundle" / "applog"
    shutil.copytree(golden_applog, spool / "mini" / "9" / "applog")
    source = SacctFiles([DATA / "user-fail.sacct.txt", DATA / "fail-exit3.sacct.txt"], cluster="mini")
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
