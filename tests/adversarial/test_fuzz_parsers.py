"""Property-based fuzzing (hypothesis) of every parser that reads outside input: scontrol and sacct
output, hostlists, log-line timestamps, a bundle's job.yaml. None may raise anything but its documented
one-line error (SlurmParseError, an AttribError), and user text put in a free-text field of a real
scontrol record may get the record refused but never changes what the finalizer decides on.
Deterministic (``derandomize``) and small (200 examples each) so CI is repeatable and fast."""

from __future__ import annotations

import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurm_attrib.bundle import load_bundle
from slurm_attrib.errors import AttribError
from slurm_attrib.slurm import hostlist, jobrecord, parse
from slurm_attrib.slurm.errors import SlurmParseError
from slurm_attrib.timestamps import TimeContext, parse_iso, parse_line_time

FUZZ = settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
SLURM_DATA = Path(__file__).resolve().parents[1] / "slurm" / "data"
REAL_JOB = (SLURM_DATA / "scontrol-job-failed.txt").read_text().strip("\n")
FIELDS = ["jobid", "jobidraw", "state", "exitcode", "derivedexitcode", "nodelist", "user", "uid", "partition",
          "cluster", "start", "end", "jobname", "workdir", "admincomment"]

# Text a user can put in a job name or a path, biased toward what breaks parsers: Slurm's own keys,
# separators, newlines, brackets, escapes.
KEYS = st.sampled_from([*jobrecord.JOB_KEYS, "Foo", "JobID", "jobstate"])
PIECES = st.one_of(
    st.builds(lambda k, v: f" {k}={v}", KEYS, st.text("0123456789,_-[]()abPENDINGFAILED:", max_size=12)),
    st.sampled_from(["|", "\n", "\nJobId=1 ", " ", "=", "\x1b[2J", "\t", "n[0-9999][0-9999]", "(null)", ""]),
    st.text(max_size=8),
)
USER_TEXT = st.lists(PIECES, max_size=8).map("".join)
RANGE = st.builds(lambda low, size: f"{low}-{low + size}" if size else str(low), st.integers(0, 99),
                  st.integers(0, 9999))
GROUP = st.lists(RANGE, min_size=1, max_size=3).map(lambda r: "[" + ",".join(r) + "]")
ITEM = st.builds(lambda prefix, groups: prefix + "x".join(groups), st.sampled_from(["n", "gpu-", ""]),
                 st.lists(GROUP, max_size=3))
HOSTLIST_TEXT = st.one_of(st.text("n0123456789[],-@!&^ ./x", max_size=30),
                          st.lists(ITEM, min_size=1, max_size=3).map(",".join))


def _only_documented(func: Any, *args: Any) -> Any:
    try:
        return func(*args)
    except AttribError as exc:
        assert str(exc) and "\n" not in str(exc).strip(), repr(exc)  # one line
        return None


# ---------------------------------------------------------------- scontrol show job -o

@FUZZ
@given(name=USER_TEXT, workdir=USER_TEXT, comment=USER_TEXT)
def test_user_text_in_free_fields_never_changes_protected_fields(name: str, workdir: str, comment: str) -> None:
    text = REAL_JOB.replace("JobName=nccl fail job ", f"JobName={name} ", 1) \
        .replace("WorkDir=/tmp/cap-6cmrn7_b/s/jobs ", f"WorkDir={workdir} Comment={comment} ", 1)
    try:
        jobs = parse.parse_scontrol_job(text)
    except SlurmParseError:
        return  # refused: the caller goes without the controller's record
    mine = [j for j in jobs if j.job_id == "1"]
    assert len(mine) >= 1
    if len(mine) == 1:  # more than one: show_job refuses them all
        job = mine[0]
        assert (job.state, job.user, job.uid, job.exit_code, job.restart_count, job.node_list, job.partition,
                job.array_job_id, job.array_task_id) == ("FAILED", "root", 0, "3:0", 0, "node-[01-02]", "debug",
                                                         "", "")


@FUZZ
@given(st.one_of(st.text(max_size=300), st.lists(st.one_of(PIECES, KEYS.map(lambda k: f"{k}=")), max_size=40)
                 .map(lambda parts: "JobId=" + "".join(parts))))
def test_scontrol_parsers_raise_only_slurm_parse_error(text: str) -> None:
    _only_documented(parse.parse_scontrol_job, text)
    _only_documented(parse.parse_scontrol_node, text.replace("JobId=", "NodeName=", 1))
    _only_documented(parse.parse_partition_nodes, text.replace("JobId=", "PartitionName=", 1))


# ---------------------------------------------------------------- sacct --parsable2

@FUZZ
@given(st.lists(st.tuples(USER_TEXT, USER_TEXT), min_size=1, max_size=4))
def test_sacct_rows_keep_their_columns_whatever_the_names(names: list[tuple[str, str]]) -> None:
    delimiter = "|5f1c0e2ab7d94e36|"
    rows = [[str(i), str(i), "FAILED", "1:0", "0:0", "node-01", "root", "0", "debug", "c", "2026-12-02T15:41:50",
             "2026-12-02T15:41:51", name, workdir, ""] for i, (name, workdir) in enumerate(names, start=1)]
    text = "".join(delimiter.join(r) + "\n" for r in rows)
    records, notes = parse.parse_sacct_delimited(text, FIELDS, delimiter, timezone.utc)
    assert [r.job_id for r in records] == [r[0] for r in rows] and notes == []
    for rec, (name, workdir) in zip(records, names):
        assert (rec.state, rec.exit_code, rec.nodes, rec.job_name, rec.work_dir, rec.admin_comment) == \
            ("FAILED", "1:0", ("node-01",), name, workdir, "")


@FUZZ
@given(st.text(max_size=400), st.sampled_from([None, FIELDS, ["nodename", "timestart"]]))
def test_parsable_parsers_raise_only_slurm_parse_error(text: str, fields: Any) -> None:
    _only_documented(parse.parse_parsable, text, fields)
    _only_documented(parse.parse_sacct, text, fields)
    _only_documented(parse.parse_sacct_capture, text, FIELDS)
    _only_documented(parse.parse_events, text)
    records, notes = parse.parse_sacct_delimited(text, FIELDS, "|", None)  # never raises: notes instead
    assert all(isinstance(n, str) for n in notes) and isinstance(records, list)


# ---------------------------------------------------------------- hostlists

@FUZZ
@given(HOSTLIST_TEXT)
def test_hostlist_expand_is_bounded_and_raises_only_slurm_parse_error(text: str) -> None:
    hosts = _only_documented(hostlist.expand, text)
    assert hosts is None or (len(hosts) <= hostlist.MAX_HOSTS and len(set(hosts)) == len(hosts))


@FUZZ
@given(st.lists(st.builds(lambda p, n, w: f"{p}{n:0{w}d}", st.sampled_from(["node-", "gpu", "r1n", "a.b-"]),
                          st.integers(0, 2000), st.integers(1, 4)), min_size=1, max_size=30))
def test_hostlist_compress_then_expand_gives_the_same_hosts(hosts: list[str]) -> None:
    assert sorted(hostlist.expand(hostlist.compress(hosts))) == sorted(set(hosts))


# ---------------------------------------------------------------- timestamps

CTX = TimeContext(window_start=datetime(2026, 1, 1, tzinfo=timezone.utc),
                  window_end=datetime(2026, 12, 31, tzinfo=timezone.utc))
STAMPISH = st.one_of(st.text(max_size=80), st.from_regex(
    r"\A(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}([.,]\d{1,12})?(Z|[+-]\d{2}:?\d{2})?|\[ *\d+\.\d+\]"
    r"|[A-Z][a-z]{2} +\d{1,2} \d{2}:\d{2}:\d{2}|[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+)[ -~]{0,40}\Z"))


@FUZZ
@given(STAMPISH)
def test_timestamp_parsers_never_raise(line: str) -> None:
    stamp = parse_line_time(line, CTX)
    assert stamp.time is None or stamp.time.tzinfo is not None
    when = parse_iso(line.split(" ", 1)[0], CTX)
    assert when is None or when.utcoffset() is not None


# ---------------------------------------------------------------- job.yaml

YAML_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=20),
              st.datetimes()),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12)
JOB_KEYS = st.sampled_from(["job_id", "cluster", "user", "nodes", "start", "end", "state", "exit_code", "ranks",
                            "steps", "addresses", "gpus_per_node", "restart_count", "timezone", "collection"])
JOB_YAML = st.one_of(
    st.text(max_size=200),
    st.dictionaries(JOB_KEYS, YAML_VALUES, max_size=8).map(lambda d: yaml.safe_dump(d, allow_unicode=True)),
)


@FUZZ
@given(JOB_YAML)
def test_load_bundle_reports_a_bad_job_yaml_as_problems(text: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "job.yaml").write_text(text, encoding="utf-8", errors="surrogatepass")
        bundle = _only_documented(load_bundle, folder)
    assert bundle is None or isinstance(bundle.problems, list)
