"""The CLI backend with a fake runner (no shell, fixed fields, timeouts, not-yet-in-DB), and the
optional pyslurm backend against a mocked pyslurm API (pyslurm 24.5's object API)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import pytest

from slurm_attrib.slurm import CliSlurm, CommandResult, PyslurmSlurm, SlurmCommandError, SlurmError, open_slurm
from slurm_attrib.slurm.cli_backend import FAILED_JOB_FIELDS, SACCT_FIELDS
from slurm_attrib.slurm.pyslurm_backend import version_matches
from slurm_attrib.slurm.runner import run_command

from .cases import CAPTURED_SACCT_FIELDS, DATA, sacct_reply


class FakeRunner:
    """Replays captured output per command name and records every argv."""

    def __init__(self, replies: dict[str, tuple[int, Any, str]]) -> None:
        self.replies = replies
        self.calls: list[tuple[tuple[str, ...], float]] = []

    def __call__(self, argv: Sequence[str], timeout: float) -> CommandResult:
        self.calls.append((tuple(argv), timeout))
        key = " ".join(argv[:2]) if " ".join(argv[:2]) in self.replies else argv[0]
        rc, out, err = self.replies[key]
        return CommandResult(tuple(argv), rc, out if isinstance(out, str) else out(tuple(argv)), err)


def _captured(name: str) -> tuple[int, str, str]:
    text = (DATA / name).read_text()
    rc = int(text.split("\n", 1)[0].split("=")[1])
    out = text.split("--stdout--\n", 1)[1].split("--stderr--\n", 1)[0]
    return rc, out, text.split("--stderr--\n", 1)[1]


def test_sacct_argv_and_records() -> None:
    reply = sacct_reply((DATA / "sacct-fields-array.txt").read_text(), CAPTURED_SACCT_FIELDS)
    runner = FakeRunner({"sacct": (0, reply, "")})
    recs = CliSlurm(runner, timeout_s=7).job_records("2_1")
    argv, timeout = runner.calls[0]
    assert argv[0] == "sacct" and f"--format={','.join(SACCT_FIELDS)}" in argv and "--jobs=2_1" in argv
    assert "--parsable2" in argv and timeout == 7
    delimiter = next(a for a in argv if a.startswith("--delimiter=")).split("=", 1)[1]
    assert len(delimiter) >= 16  # random per call:
    CliSlurm(runner).job_records("2_1")
    assert next(a for a in runner.calls[1][0] if a.startswith("--delimiter=")) != f"--delimiter={delimiter}"
    assert [r.job_id for r in recs if not r.is_step] == ["2_1", "2_2"]


def test_show_job_invalid_id_is_none() -> None:
    runner = FakeRunner({"scontrol": _captured("scontrol-invalid-job.txt")})
    assert CliSlurm(runner).show_job("999999") is None


def test_set_admin_comment_not_in_db_is_false_and_argv_has_no_shell() -> None:
    runner = FakeRunner({"sacctmgr": _captured("sacctmgr-not-in-db.txt")})
    assert CliSlurm(runner).set_admin_comment("7_2", "a b; c=d") is False
    assert runner.calls[0][0] == ("sacctmgr", "-i", "modify", "job", "where", "jobid=7_2", "set",
                                  "AdminComment=a b; c=d")


def test_set_admin_comment_ok_and_other_error() -> None:
    assert CliSlurm(FakeRunner({"sacctmgr": (0, " Modified job\n", "")})).set_admin_comment("1", "x") is True
    with pytest.raises(SlurmCommandError):
        CliSlurm(FakeRunner({"sacctmgr": (1, "", "sacctmgr: error: Problem talking to the database")})) \
            .set_admin_comment("1", "x")


def test_node_history_and_events_argv() -> None:
    runner = FakeRunner({"sacct": (0, "", ""), "sacctmgr": (0, (DATA / "sacctmgr-events.txt").read_text(), "")})
    cli = CliSlurm(runner)
    since, until = datetime(2026, 12, 1, tzinfo=timezone.utc), datetime(2026, 12, 2, tzinfo=timezone.utc)
    assert cli.node_history(["node-01", "node-02"], since, until) == []
    argv = runner.calls[0][0]
    assert "--nodelist=node-[01-02]" in argv and "--state=FAILED,NODE_FAIL,TIMEOUT,OUT_OF_MEMORY,BOOT_FAIL" in argv
    events = cli.node_events(["node-03", "node-04"], since, until)
    assert [(e.node, e.state) for e in events] == [("node-03", "DOWN"), ("node-04", "DRAIN")]


def test_failed_jobs_argv_and_window() -> None:
    text = (DATA / "sacct-failedjobs-window.txt").read_text()
    runner = FakeRunner({"sacct": (0, text, "")})
    cli = CliSlurm(runner, timeout_s=9, cluster="attrib", tz=timezone.utc)
    since, until = datetime(2026, 12, 2, 15, 41, 52, tzinfo=timezone.utc), datetime(2026, 12, 3, tzinfo=timezone.utc)
    recs = cli.failed_jobs(since, until)
    argv, timeout = runner.calls[0]
    assert argv == ("sacct", "--parsable2", "--noheader", "--allusers", "--allocations",
                    f"--format={','.join(FAILED_JOB_FIELDS)}",
                    "--state=FAILED,NODE_FAIL,TIMEOUT,OUT_OF_MEMORY,BOOT_FAIL,CANCELLED,PREEMPTED,DEADLINE",
                    "--starttime=2026-12-02T15:41:52", "--endtime=2026-12-03T00:00:00", "--clusters=attrib")
    assert timeout == 9
    assert [(r.job_id, r.job_id_raw, r.array_ids) for r in recs] == [("2_1", "3", ("2", "1")), ("2_2", "2", ("2", "2"))]
    assert recs[0].cluster == "attrib" and recs[0].nodes == ("node-01",) and recs[0].exit_code == "1:0"
    everything = CliSlurm(FakeRunner({"sacct": (0, text, "")}), tz=timezone.utc).failed_jobs(
        datetime(2026, 12, 1, tzinfo=timezone.utc), until)
    assert [r.job_id for r in everything] == ["1", "2_1", "2_2"]  # job 1 ended before `since` above


def test_failed_jobs_leaves_out_steps_and_reports_errors() -> None:
    step = "1.batch|1.batch|attrib|||node-01|2026-12-02T15:41:50|2026-12-02T15:41:50|FAILED|3:0|\n"
    since, until = datetime(2026, 12, 1, tzinfo=timezone.utc), datetime(2026, 12, 3, tzinfo=timezone.utc)
    assert CliSlurm(FakeRunner({"sacct": (0, step, "")}), tz=timezone.utc).failed_jobs(since, until) == []
    with pytest.raises(SlurmCommandError, match=r"sacct exited 1: .*database"):
        CliSlurm(FakeRunner({"sacct": (1, "", "sacct: error: Problem talking to the database")})) \
            .failed_jobs(since, until)


def test_drain_and_partition() -> None:
    runner = FakeRunner({"scontrol update": (0, "", ""),
                         "scontrol --oneliner": (0, (DATA / "scontrol-partition.txt").read_text(), "")})
    cli = CliSlurm(runner)
    cli.drain_node("node-02", "slurm-attrib: gpu_hardware xid 79 job 5")
    assert runner.calls[0][0] == ("scontrol", "update", "nodename=node-02", "state=drain",
                                  "reason=slurm-attrib: gpu_hardware xid 79 job 5")
    assert cli.partition_nodes("debug") == ["node-01", "node-02", "node-03", "node-04"]


def test_real_runner_timeout_and_missing_binary() -> None:
    with pytest.raises(SlurmError, match="no answer"):
        run_command(["sleep", "5"], 0.2)
    with pytest.raises(SlurmError, match="cannot run"):
        run_command(["/nonexistent/sacct"], 1)


@pytest.mark.parametrize("ours, installed, ok", [
    ("24.5.1", "slurm 24.05.8", True), ("22.5.3", "slurm-wlm 22.05.8", True),
    ("25.11.2", "slurm-wlm 22.05.8", False), ("24.5.0", "", False)])
def test_version_matching(ours: str, installed: str, ok: bool) -> None:
    assert version_matches(ours, installed) is ok


def _fake_pyslurm(mocker: Any, version: str = "22.5.3") -> Any:
    module = mocker.MagicMock(name="pyslurm")
    module.__version__ = version
    module.RPCError = type("RPCError", (Exception,), {})
    return module


def test_open_slurm_picks_pyslurm_only_when_it_matches(mocker: Any) -> None:
    runner = FakeRunner({"sinfo": (0, "slurm-wlm 22.05.8\n", "")})
    module = _fake_pyslurm(mocker)
    assert isinstance(open_slurm("auto", runner=runner, importer=lambda name: module), PyslurmSlurm)
    other = _fake_pyslurm(mocker, "25.11.2")
    assert isinstance(open_slurm("auto", runner=runner, importer=lambda name: other), CliSlurm)

    def missing(name: str) -> Any:
        raise ImportError("No module named 'pyslurm'")

    assert isinstance(open_slurm("auto", runner=runner, importer=missing), CliSlurm)
    with pytest.raises(SlurmError, match="does not match"):
        open_slurm("pyslurm", runner=runner, importer=lambda name: other)
    cli = open_slurm("cli", runner=runner, cluster="orion")
    assert isinstance(cli, CliSlurm) and cli.cluster == "orion"


def test_pyslurm_backend_job_records_and_comment(mocker: Any) -> None:
    module = _fake_pyslurm(mocker)
    step = mocker.MagicMock(state="FAILED", exit_code=7, exit_code_signal=0, nodelist="node-[01-02]")
    job = mocker.MagicMock(id=12, array_id=None, array_task_id=None, state="FAILED", exit_code=1, exit_code_signal=0,
                           derived_exit_code=7, derived_exit_code_signal=0, nodelist="node-[01-02]",
                           user_name="alice", user_id=1001, partition="gpu", cluster="c", start_time=1796000000,
                           end_time=1796000100, admin_comment="JS1:abc", working_directory="/home/alice",
                           steps={"0": step})
    job.name = "train"
    module.db.Jobs.load.return_value = [job]
    backend = PyslurmSlurm(module, CliSlurm(FakeRunner({})))
    recs = backend.job_records("12")
    module.db.JobFilter.assert_called_with(ids=[12])
    assert recs[0].exit_code == "1:0" and recs[0].derived_exit_code == "7:0" and recs[0].nodes == ("node-01", "node-02")
    assert recs[1].job_id_raw == "12.0" and recs[1].state == "FAILED"
    module.db.Jobs.modify.return_value = [12]
    assert backend.set_admin_comment("12", "x") is True
    module.db.Job.assert_called_with(admin_comment="x")
    module.db.Jobs.modify.side_effect = module.RPCError("Nothing was modified")
    assert backend.set_admin_comment("12", "x") is False


def test_pyslurm_backend_sends_array_refs_to_the_cli(mocker: Any) -> None:
    module = _fake_pyslurm(mocker)
    runner = FakeRunner({"sacctmgr": (0, " Modified\n", "")})
    assert PyslurmSlurm(module, CliSlurm(runner)).set_admin_comment("7_2", "x") is True
    assert runner.calls and not module.db.Jobs.modify.called


def test_pyslurm_backend_drain(mocker: Any) -> None:
    module = _fake_pyslurm(mocker)
    PyslurmSlurm(module, CliSlurm(FakeRunner({}))).drain_node("node-02", "slurm-attrib: x")
    module.Node.assert_called_with(state="DRAIN", reason="slurm-attrib: x")
    module.Node.load.return_value.modify.assert_called_once()


def test_pyslurm_backend_sends_failed_jobs_to_the_cli(mocker: Any) -> None:
    module = _fake_pyslurm(mocker)
    runner = FakeRunner({"sacct": (0, (DATA / "sacct-failedjobs-window.txt").read_text(), "")})
    since, until = datetime(2026, 12, 1, tzinfo=timezone.utc), datetime(2026, 12, 3, tzinfo=timezone.utc)
    recs = PyslurmSlurm(module, CliSlurm(runner, tz=timezone.utc)).failed_jobs(since, until)
    assert [r.job_id for r in recs] == ["1", "2_1", "2_2"] and runner.calls[0][0][0] == "sacct"
    assert not module.db.Jobs.load.called
