"""Issue 11: user-controlled Slurm fields never steer the finalizer. One test per item, each on output
captured from a real Slurm 22.05 cluster (``data/``, see ``data/README.md``) and, where a process is the
point, through a real subprocess. Every test here failed before the fix (noted per test)."""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml

from slurm_attrib import hooks
from slurm_attrib.attribution import SqliteVerdictStore
from slurm_attrib.cli import main
from slurm_attrib.config import Config, FinalizerConfig, StoreConfig
from slurm_attrib.engine import Engine
from slurm_attrib.finalizer import Finalizer
from slurm_attrib.slurm import CliSlurm, CommandResult
from slurm_attrib.slurm.errors import SlurmParseError
from slurm_attrib.slurm.ids import SlurmIdError
from slurm_attrib.slurm.parse import parse_scontrol_job
from slurm_attrib.store.tables import format_rows

DATA = Path(__file__).resolve().parent / "data"
ROOT = Path(__file__).resolve().parents[2]
T_END = datetime(2026, 12, 3, 7, 49, 8, tzinfo=timezone.utc)  # the captured jobs' end (the host ran in UTC)
OLD_SACCT_FIELDS = ["jobid", "jobidraw", "state", "exitcode", "derivedexitcode", "nodelist", "user", "uid",
                    "partition", "cluster", "jobname", "start", "end", "workdir", "admincomment"]


class FakeSacct:
    """What sacct prints from its database rows for an argv: the ``--format`` columns in that order,
    joined with ``--delimiter`` (default ``|``), no quoting, the rows of the ``--jobs`` asked for."""

    def __init__(self, rows: list[dict[str, str]]) -> None:
        self.rows = rows

    def __call__(self, argv: Sequence[str]) -> str:
        opts = dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)
        columns, delimiter = opts["format"].split(","), opts.get("delimiter", "|")
        wanted = set(opts["jobs"].split(",")) if "jobs" in opts else None
        rows = [r for r in self.rows if wanted is None or r["jobid"].split(".")[0] in wanted
                or r["jobidraw"].split(".")[0] in wanted]
        return "".join(delimiter.join(r[c] for c in columns) + "\n" for r in rows)


class SlurmReplay:
    """A CommandRunner: scontrol from a capture, sacct from :class:`FakeSacct`, sacctmgr recorded."""

    def __init__(self, scontrol: str, sacct_rows: list[dict[str, str]]) -> None:
        self.scontrol, self.sacct, self.calls = scontrol, FakeSacct(sacct_rows), []  # type: ignore[var-annotated]

    def __call__(self, argv: Sequence[str], timeout: float) -> CommandResult:
        self.calls.append(tuple(argv))
        if argv[0] == "scontrol":
            return CommandResult(tuple(argv), 0, self.scontrol, "")
        if argv[0] == "sacct":
            return CommandResult(tuple(argv), 0, self.sacct(argv), "")
        return CommandResult(tuple(argv), 0, " Modified job\n", "")


def _capture(name: str) -> str:
    return (DATA / name).read_text()


def _sacct_rows() -> list[dict[str, str]]:
    rows: list[dict[str, str]] = json.loads(_capture("sacct-hostile-names.json"))["rows"]
    return rows


def _ctld_env(job: str, nodes: str, exit2: str) -> dict[str, str]:
    return {"SLURM_SCRIPT_CONTEXT": "epilog_slurmctld", "SLURM_CLUSTER_NAME": "mini", "SLURM_JOB_ID": job,
            "SLURM_JOB_RESTART_COUNT": "0", "SLURM_JOB_NODELIST": nodes, "SLURM_JOB_EXIT_CODE2": exit2,
            "SLURM_JOB_DERIVED_EC": "0", "SLURM_JOB_USER": "root", "SLURM_JOB_UID": "0",
            "SLURM_JOB_PARTITION": "debug", "SLURM_JOB_NAME": "x"}


def _finalizer(tmp_path: Path, engine: Engine, runner: SlurmReplay) -> Finalizer:
    cfg = Config(finalizer=FinalizerConfig(node_bundle_deadline_s=20, sacct_retries=3, sacct_retry_delay_s=2))
    store = SqliteVerdictStore(StoreConfig(path=str(tmp_path / "verdicts.db")), tmp_path / "verdict-spool")
    return Finalizer(config=cfg, spool=tmp_path, slurm=CliSlurm(runner, tz=timezone.utc), engine=engine,
                     store=store)


@pytest.fixture(autouse=True)
def bounded_memory() -> Iterator[None]:
    """The captures hold a NodeList naming 10^9 hosts: should the cap ever regress, this process gets a
    MemoryError (a failed test) instead of the machine's OOM killer. Soft limit only, restored after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as statm:
        used = int(statm.read().split()[0]) * resource.getpagesize()
    cap = used + (3 << 30)
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


# ---------------------------------------------------------------- scontrol show job -o

def test_a_workdir_holding_fields_does_not_requeue_the_job(tmp_path: Path, engine: Engine) -> None:
    """``--chdir '.../w JobState=PENDING ArrayTaskId=0,778,779 NodeList=n[0-9999][0-9999][0-9] Restarts=7'``.
    Before: JobState=PENDING won, the finalizer said "requeued" and dropped the job (or died expanding
    the NodeList first)."""
    runner = SlurmReplay(_capture("scontrol-workdir-injects-fields.txt"), _sacct_rows())
    hooks.enqueue("epilog_slurmctld", _ctld_env("2", "node-[01-02]", "4:0"), str(tmp_path), T_END.timestamp())
    fin = _finalizer(tmp_path, engine, runner)
    assert [r.outcome for r in fin.step(T_END + timedelta(seconds=1))] == ["waiting"]  # for the node bundles
    (result,) = fin.step(T_END + timedelta(seconds=30))
    assert result.outcome == "diagnosed", result
    job = yaml.safe_load((tmp_path / "jobs" / "mini_2_0" / "job.yaml").read_text())
    assert job["state"] == "FAILED" and job["nodes"] == ["node-01", "node-02"] and job.get("restart_count", 0) == 0


def test_a_job_name_holding_array_ids_never_reaches_sacctmgr(tmp_path: Path, engine: Engine) -> None:
    """``-J 'evil JobState=PENDING ArrayJobId=101 ArrayTaskId=0,778,779 ...'`` on a plain job. Before:
    ArrayJobId/ArrayTaskId came from the name and the verdict went to ``where jobid=101_0,778,779``."""
    runner = SlurmReplay(_capture("scontrol-name-injects-fields.txt"), _sacct_rows())
    hooks.enqueue("epilog_slurmctld", _ctld_env("1", "node-01", "3:0"), str(tmp_path), T_END.timestamp())
    fin = _finalizer(tmp_path, engine, runner)
    fin.step(T_END + timedelta(seconds=1))
    (result,) = fin.step(T_END + timedelta(seconds=30))
    assert result.outcome == "diagnosed", result
    writes = [c for c in runner.calls if c[:3] == ("sacctmgr", "-i", "modify")]
    assert writes and all("jobid=1" in c for c in writes), writes
    # the name's array ids in no argument (looked for as the name wrote them: sacct's random delimiter, the
    # verdict's id and pytest's directories are hex and numbers that hold "778" now and then)
    leaked = [arg for call in runner.calls for arg in call if re.search(r"0,778|778,779|\b101_", arg)]
    assert not leaked, leaked


def test_a_name_copying_a_run_of_fields_is_refused_not_guessed() -> None:
    """A name holding ``UserId=bob(1234) JobState=PENDING Restarts=5 ... NodeList=n[1-2] WorkDir=/x`` reads
    consistently both ways: the record is refused and ``show_job`` goes without it. Before: the real
    fields, by luck of coming later (the same copy in a WorkDir wins, see above)."""
    text = _capture("scontrol-name-copies-fields.txt")
    with pytest.raises(SlurmParseError, match="can be read at 2 places"):
        parse_scontrol_job(text)
    assert CliSlurm(SlurmReplay(text, [])).show_job("8") is None


def test_a_newline_and_jobid_in_a_workdir_cannot_forge_the_record() -> None:
    """``--chdir '...\\nJobId=8 JobName=fake UserId=bob(1234) JobState=PENDING ...'``: scontrol prints the
    rest of job 9 as a second line that claims to be job 8. Before: lines were parsed one by one and a
    record whose id the caller did not ask for could be returned."""
    text = _capture("scontrol-workdir-newline-record.txt")
    runner = SlurmReplay(text, [])
    job = CliSlurm(runner).show_job("9")
    assert job is not None and (job.job_id, job.state, job.user, job.nodes) == ("9", "FAILED", "root", ("node-01",))
    forged = text.replace("JobId=8 JobName=fake", "JobId=9 JobName=fake")
    assert CliSlurm(SlurmReplay(forged, [])).show_job("9") is None  # two records claim 9: neither is used


# ---------------------------------------------------------------- ids handed to Slurm

@pytest.mark.parametrize("bad", ["101_0,778,779", "1 2", "-1", "1;id", "7_[1-3]", "", "1\n2", "\uff11"])
def test_no_command_runs_with_an_id_outside_the_grammar(bad: str) -> None:
    """Before: ``sacctmgr -i modify job where jobid=101_0,778,779 set AdminComment=...`` ran."""
    runner = SlurmReplay("", [])
    slurm = CliSlurm(runner)
    for call in (lambda: slurm.set_admin_comment(bad, "x"), lambda: slurm.job_records(bad),
                 lambda: slurm.show_job(bad)):
        with pytest.raises(SlurmIdError):
            call()
    with pytest.raises(SlurmIdError):
        slurm.drain_node(f"node-01 {bad}" if bad else "", "r")
    assert runner.calls == []


# ---------------------------------------------------------------- sacct --parsable2

def test_a_pipe_in_a_job_name_cannot_move_columns() -> None:
    """Job 3 is named ``pipe|a|b|c|d``. Before: start/end/workdir took 'a', 'b', 'c' and AdminComment
    took 'd|<the real start>|...'."""
    (alloc,) = [r for r in CliSlurm(SlurmReplay("", _sacct_rows()), tz=timezone.utc).job_records("3")
                if not r.is_step]
    assert alloc.job_name == "pipe|a|b|c|d" and alloc.admin_comment == "" and alloc.work_dir == "/tmp/slurm-sf"
    assert alloc.start == T_END and alloc.state == "FAILED" and alloc.exit_code == "5:0"


def test_a_newline_in_a_job_name_is_one_row_not_an_error() -> None:
    """Job 4 is named ``nl\\nFAILED|1:0``. Before: SlurmParseError on the cut line, which the finalizer
    retried every 2 s for ever."""
    records = CliSlurm(SlurmReplay("", _sacct_rows()), tz=timezone.utc).job_records("4")
    assert [(r.job_id, r.state, r.exit_code) for r in records] == [("4", "FAILED", "6:0"),
                                                                    ("4.batch", "FAILED", "6:0")]
    assert records[0].job_name == "nl\nFAILED|1:0"


def test_the_fake_sacct_prints_what_the_real_one_printed() -> None:
    """The two sacct tests above rest on FakeSacct: with '|' it reproduces the real capture byte for byte."""
    fields = "jobid,jobidraw,state,exitcode,derivedexitcode,nodelist,user,uid,partition,cluster,start,end,jobname," \
             "workdir,admincomment"
    argv = ["sacct", "--parsable2", "--noheader", f"--format={fields}", "--jobs=1,2,3,4,5"]
    assert FakeSacct(_sacct_rows())(argv) == _capture("sacct-plain-hostile-names.txt")


# ---------------------------------------------------------------- hostlists

def test_a_hostlist_naming_a_billion_hosts_fails_fast_in_a_real_process() -> None:
    """``n[0-9999][0-9999][0-9]``: each bracket is small, the product is 10^9. Before: the finalizer died
    with MemoryError (here: under a 2 GiB address-space limit) on every restart."""
    code = ("import resource; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
            "from slurm_attrib.slurm import hostlist\n"
            "hostlist.expand('n[0-9999][0-9999][0-9]')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 1 and "SlurmParseError" in proc.stderr and "more than 100000 hosts" in proc.stderr, \
        proc.stderr[-500:]


# ---------------------------------------------------------------- terminal output

def test_diagnose_shows_escape_sequences_instead_of_sending_them(tmp_path: Path) -> None:
    """An application's log line holding ESC [2J (clear screen) and an OSC title, in the line that is
    the root cause, through the real CLI. Before: the bytes went to the terminal as they were. The scan
    cuts control sequences (CSI) from what it reads; the OSC title is shown escaped."""
    bundle = tmp_path / "bundle"
    shutil.copytree(ROOT / "slurm_attrib" / "data" / "demo", bundle)
    log = bundle / "syslog" / "node-02.log"
    lines = log.read_text().splitlines(keepends=True)
    lines[15] = lines[15].rstrip("\n") + " \x1b[2J\x1b]0;owned\x07\r\n"
    log.write_text("".join(lines))
    proc = subprocess.run([sys.executable, "-m", "slurm_attrib.cli", "diagnose", "--no-site-rules", "--bundle",
                           str(bundle)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout and "\r" not in proc.stdout
    assert "\\x1b]0;owned\\x07" in proc.stdout


def test_show_and_query_of_a_stored_verdict_show_escapes(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """The same hostile log line and a user name with ESC, stored by ``diagnose --store``, then read by
    ``show`` and ``query``. Before: both printed the raw bytes."""
    bundle = tmp_path / "bundle"
    shutil.copytree(ROOT / "slurm_attrib" / "data" / "demo", bundle)
    log = bundle / "syslog" / "node-02.log"
    lines = log.read_text().splitlines(keepends=True)
    lines[15] = lines[15].rstrip("\n") + " \x1b[2J\n"
    log.write_text("".join(lines))
    job = yaml.safe_load((bundle / "job.yaml").read_text())
    job["user"] = "mchen\x1b]0;x\x07"
    (bundle / "job.yaml").write_text(yaml.safe_dump(job))
    store = ["--store", str(tmp_path / "s.sqlite"), "--now", "2026-11-21T00:00:00Z"]
    assert main(["diagnose", "--no-site-rules", "--bundle", str(bundle), *store]) == 0
    capsys.readouterr()
    for command in (["show", "318442"], ["query"], ["nodes", "--since", "30d"]):
        assert main([*command, *store]) == 0
        out = capsys.readouterr().out
        assert "\x1b" not in out and "\x07" not in out, (command, out)
    assert main(["show", "318442", *store]) == 0
    assert "user mchen\\x1b]0;x\\x07" in capsys.readouterr().out


def test_query_and_nodes_tables_show_escapes_json_keeps_the_data() -> None:
    """``query``/``nodes`` tables go through format_rows. Before: a culprit or job name printed raw."""
    rows = [{"job": "5", "name": "esc\x1b[2J\x1b[31mred\nnext", "node": "node-\x9b1m"}]
    table = format_rows(rows, ("job", "name", "node"), "table")
    assert "\x1b" not in table and "\x9b" not in table and table.count("\n") == 2
    assert "esc\\x1b[2J\\x1b[31mred\\x0anext" in table and "node-\\x9b1m" in table
    assert json.loads(format_rows(rows, ("job", "name", "node"), "json")) == rows
