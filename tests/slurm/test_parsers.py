"""Parsers on real captured Slurm 22.05 output: data/<case>.txt → data/<case>.expected.json."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone

import pytest

from slurm_attrib.slurm import hostlist, jobrecord, parse
from slurm_attrib.slurm.cli_backend import FAILED_JOB_FIELDS
from slurm_attrib.slurm.errors import SlurmParseError

from .cases import DATA, cases, parser_for


@pytest.mark.parametrize("case", cases())
def test_parser_matches_expected(case: str) -> None:
    got = json.loads(json.dumps(parser_for(case)((DATA / f"{case}.txt").read_text())))
    assert got == json.loads((DATA / f"{case}.expected.json").read_text())


def test_there_are_cases_of_every_kind() -> None:
    kinds = {c.split("-")[0] + "-" + c.split("-")[1] for c in cases()}
    assert {"sacct-envdump", "sacct-fields", "scontrol-job", "scontrol-node", "scontrol-partition",
            "sacctmgr-events"} <= kinds


def test_array_task_ids_and_cancelled_by() -> None:
    recs = parse.parse_sacct((DATA / "sacct-envdump-array.txt").read_text())
    assert [(r.job_id, r.job_id_raw, r.array_ids) for r in recs if not r.is_step] == [
        ("7_1", "8", ("7", "1")), ("7_2", "7", ("7", "2"))]
    cancelled = parse.parse_sacct((DATA / "sacct-envdump-cancelled.txt").read_text())[0]
    assert cancelled.state == "CANCELLED" and cancelled.state_text == "CANCELLED by 0"


def test_capture_with_or_without_header() -> None:
    with_header = parse.parse_sacct_capture((DATA / "sacct-envdump-array.txt").read_text(), FAILED_JOB_FIELDS)
    assert [r.job_id for r in with_header] == [r.job_id for r in parse.parse_sacct(
        (DATA / "sacct-envdump-array.txt").read_text())]
    bare = parse.parse_sacct_capture((DATA / "sacct-failedjobs-window.txt").read_text(), FAILED_JOB_FIELDS,
                                     timezone.utc)
    assert [(r.job_id, r.cluster, r.state) for r in bare] == [("1", "attrib", "FAILED"), ("2_1", "attrib", "FAILED"),
                                                              ("2_2", "attrib", "FAILED")]
    assert parse.parse_sacct_capture("# nothing\n", FAILED_JOB_FIELDS) == []


def test_ended_in_window() -> None:
    rec = parse.acct_record({"jobid": "5", "end": "2026-12-02T10:00:00"}, timezone.utc)
    day = datetime(2026, 12, 2, tzinfo=timezone.utc)
    assert rec.ended_in(day, datetime(2026, 12, 3, tzinfo=timezone.utc))
    assert not rec.ended_in(day, datetime(2026, 12, 2, 10, tzinfo=timezone.utc))  # the end bound is open
    assert parse.acct_record({"jobid": "6", "end": "Unknown"}).ended_in(day, day)  # unknown end: kept


def test_pipe_inside_the_last_field_is_kept() -> None:
    rows = parse.parse_parsable("1|FAILED|a|b\n", ["jobid", "state", "admincomment"])
    assert rows[0]["admincomment"] == "a|b"


def test_short_row_is_a_parse_error() -> None:
    with pytest.raises(SlurmParseError):
        parse.parse_parsable("1|FAILED\n", ["jobid", "state", "admincomment"])


def test_scontrol_values_with_spaces() -> None:
    job = parse.parse_scontrol_job((DATA / "scontrol-job-failed.txt").read_text())[0]
    assert job.job_name == "nccl fail job" and job.std_out.endswith("/nccl fail job-1.out")
    assert job.nodes == ("node-01", "node-02") and job.fields["TRES"] == "cpu=2,node=2,billing=2"


@pytest.mark.parametrize("expr, hosts", [
    ("node-[01-04,07]", ["node-01", "node-02", "node-03", "node-04", "node-07"]),
    ("node-01", ["node-01"]),
    ("a[1-2]b[3-4]", ["a1b3", "a1b4", "a2b3", "a2b4"]),
    ("gpu[08-10],cpu1", ["cpu1", "gpu08", "gpu09", "gpu10"]),  # sorted: see test_hostlist.py
    ("None assigned", []),
    ("", []),
])
def test_hostlist_expand(expr: str, hosts: list[str]) -> None:
    assert hostlist.expand(expr) == hosts


def test_hostlist_round_trip() -> None:
    hosts = ["node-01", "node-02", "node-03", "node-07", "login"]
    assert hostlist.compress(hosts) == "login,node-[01-03,07]"
    assert hostlist.expand(hostlist.compress(hosts)) == ["login", "node-01", "node-02", "node-03", "node-07"]


@pytest.mark.parametrize("bad", ["node-[01-04", "node-]", "node-[a-b]", "node-[5-1]"])
def test_hostlist_errors(bad: str) -> None:
    with pytest.raises(SlurmParseError):
        hostlist.expand(bad)


def test_parsable_rows_number_lines_and_say_what_a_cut_line_misses() -> None:
    text = "$ sacct -P\nJobID|State|NodeList\n# a note\n\n7.0|FAILED|n1\n7.1|CANCELLED by 0\n7.2|FAILED|n2|x\n"
    rows = list(parse.parsable_rows(text.splitlines()))
    assert [(r.number, r.missing) for r in rows] == [(5, 0), (6, 1), (7, 0)]
    assert rows[0].cells == {"jobid": "7.0", "state": "FAILED", "nodelist": "n1"}
    assert rows[1].cells == {"jobid": "7.1", "state": "CANCELLED by 0"} and rows[1].line == "7.1|CANCELLED by 0"
    assert rows[2].cells["nodelist"] == "n2|x"
    assert [r.number for r in parse.parsable_rows(["7|F"], ["JobID", "State"])] == [1]


def test_a_record_with_too_many_markers_is_refused_quickly() -> None:
    """The reading is quadratic in the ``Key=`` markers; a user's field full of them is refused, not read."""
    real = (DATA / "scontrol-job-failed.txt").read_text().strip()
    flood = " ".join(["StdErr=a StdIn=b"] * jobrecord.MAX_MARKERS)
    began = time.monotonic()
    with pytest.raises(SlurmParseError, match="markers"):
        parse.parse_scontrol_job(real.replace("WorkDir=/tmp", f"WorkDir={flood} /tmp"))
    assert time.monotonic() - began < 1.0
