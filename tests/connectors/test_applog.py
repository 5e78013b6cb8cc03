"""The job-output source: sbatch's filename patterns, the safe tail read, the files it names and writes."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

from slurm_attrib.connectors.applog import expand_pattern, job_output_sources, read_tail
from slurm_attrib.connectors.base import Limits, MemoryBundle, Window, Workload

WINDOW = Window(datetime(2026, 12, 2, 11, 50, tzinfo=timezone.utc), datetime(2026, 12, 2, 12, tzinfo=timezone.utc))


def test_output_patterns() -> None:
    job = Workload(cluster="c", job_id="8", user="alice", uid=1, job_name="train", nodes=("node-01", "node-02"),
                   array_job_id="7", array_task_id="1", work_dir="/home/alice")
    assert expand_pattern("%x-%j.out", job) == "/home/alice/train-8.out"
    assert expand_pattern("/s/%u/%A_%a.%N.%4j.%n.%t.%s.%%", job) == "/s/alice/7_1.node-01.0008.0.0.batch.%"
    plain = Workload(cluster="c", job_id="9", user="a", uid=1)
    assert expand_pattern("/o/slurm-%A_%a.out", plain) == "/o/slurm-9_4294967294.out"


def test_tail_read_checks_owner_and_never_follows_links(tmp_path: Path) -> None:
    log = tmp_path / "out"
    log.write_bytes(b"x" * 100 + b"tail")
    ok = read_tail(str(log), os.getuid(), 10)
    assert ok.state == "ok" and ok.data == b"xxxxxxtail" and ok.size == 104
    assert read_tail(str(log), os.getuid() + 1, 10).state == "error"
    link = tmp_path / "link"
    link.symlink_to(log)
    planted = read_tail(str(link), os.getuid(), 10)
    assert planted.state == "error" and "symbolic link" in planted.reason and planted.data == b""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert read_tail(str(fifo), os.getuid(), 10).reason == "not a regular file"
    assert read_tail("/dev/null", 0, 10).state == "skipped"
    assert read_tail(str(log), None, 10).state == "error"


def test_stdout_and_a_separate_stderr_are_two_sources(tmp_path: Path) -> None:
    job = Workload(cluster="c", job_id="8", uid=os.getuid(), work_dir=str(tmp_path), std_out="%j.out",
                   std_err="%j.err")
    assert [(s.name, s.path) for s in job_output_sources(job)] == [
        ("slurm-8.out", str(tmp_path / "8.out")), ("slurm-8.err", str(tmp_path / "8.err"))]
    same = Workload(cluster="c", job_id="8", std_out="/o/%j.log", std_err="/o/8.log")
    assert [s.name for s in job_output_sources(same)] == ["slurm-8.out"]
    array = Workload(cluster="c", job_id="9", array_job_id="7", array_task_id="2", work_dir="/w")
    assert [s.path for s in job_output_sources(array)] == ["/w/slurm-7_2.out"]


def test_the_source_writes_the_tail_and_reports_path_and_size(tmp_path: Path) -> None:
    (tmp_path / "8.out").write_bytes(b"a" * 50 + b"\nTraceback\n")
    (tmp_path / "8.err").write_bytes(b"")
    job = Workload(cluster="c", job_id="8", uid=os.getuid(), work_dir=str(tmp_path), std_out="%j.out",
                   std_err="%j.err")
    bundle = MemoryBundle()
    out, err = (s.collect(job, WINDOW, bundle, Limits(5.0, 20)) for s in job_output_sources(job))
    assert bundle.files == {"applog/slurm-8.out": b"a" * 9 + b"\nTraceback\n"}
    assert (out.state, out.bytes, out.size, out.truncated, out.query) == ("ok", 20, 61, True,
                                                                          str(tmp_path / "8.out"))
    assert out.files == ("applog/slurm-8.out",) and out.reason == "tail of 20 bytes"
    assert (err.state, err.files, err.bytes, err.truncated) == ("empty", (), 0, False)
