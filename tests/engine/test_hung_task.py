"""The hung-task decoder reads the call trace printed after the report, and only that report's."""

from __future__ import annotations

from pathlib import Path

from slurm_attrib.engine import Engine

JOB = ('job_id: "1"\nnodes: [node-01]\nstart: "2026-07-02T20:00:00Z"\nend: "2026-07-02T21:30:00Z"\n'
       'state: FAILED\nexit_code: "1:0"\n')


def _symptoms(engine: Engine, tmp_path: Path, kernel_log: str) -> list[tuple[str, str, str]]:
    (tmp_path / "syslog").mkdir()
    (tmp_path / "job.yaml").write_text(JOB)
    (tmp_path / "syslog" / "node-01.log").write_text(kernel_log)
    ctx = engine.run(tmp_path)
    return [(s.fields.get("process", ""), s.kind, s.role) for s in ctx.symptoms if s.rule_id == "kernel.hung_task"]


def test_a_report_takes_only_its_own_trace(engine: Engine, tmp_path: Path) -> None:
    log = ("Jul  2 21:02:45 node-01 kernel: INFO: task kworker/3:1:100 blocked for more than 120 seconds.\n"
           "Jul  2 21:02:45 node-01 kernel:  blk_mq_get_tag+0x12f/0x290\n"
           "Jul  2 21:02:46 node-01 kernel: INFO: task python3:200 blocked for more than 120 seconds.\n"
           "Jul  2 21:02:46 node-01 kernel:  rpc_wait_bit_killable+0x1e/0xa0 [sunrpc]\n"
           "Jul  2 21:02:46 node-01 kernel:  nfs4_do_close+0x2b1/0x330 [nfsv4]\n")
    assert _symptoms(engine, tmp_path, log) == [("kworker/3:1", "hung_task", "context"),
                                                ("python3", "storage_hang", "candidate")]


def test_a_storage_hang_blames_no_node(engine: Engine, tmp_path: Path) -> None:
    log = ("Jul  2 21:02:46 node-01 kernel: INFO: task python3:200 blocked for more than 120 seconds.\n"
           "Jul  2 21:02:46 node-01 kernel: [<ffffffffc08f1b66>] nfs_file_flush+0x46/0x60 [nfs]\n")
    (tmp_path / "b").mkdir()
    _symptoms(engine, tmp_path / "b", log)
    diag = engine.diagnose(tmp_path / "b")
    assert (diag.status, diag.category, diag.culprit_nodes) == ("attributed", "storage", [])


def test_a_32bit_arm_trace_names_the_callers_frame(engine: Engine, tmp_path: Path) -> None:
    """ARM prints '[<addr>] (fn) from [<addr>] (caller+0x30/0x280)' (raspberrypi/linux #2482): the file
    system's frame is the caller's, inside parentheses."""
    log = ("[ 3438.580109] INFO: task objcopy:24916 blocked for more than 120 seconds.\n"
           "[ 3438.599109] [<80a87848>] (__schedule) from [<80a88018>] (schedule+0x3c/0xa0)\n"
           "[ 3438.606896] [<8015c138>] (io_schedule) from [<80230be4>] (wait_on_page_bit+0x110/0x15c)\n"
           "[ 3438.610000] [<80233190>] (filemap_write_and_wait_range) from [<803db1c4>] (nfs_file_fsync+0x30/0x280)\n")
    assert _symptoms(engine, tmp_path, log) == [("objcopy", "storage_hang", "candidate")]
