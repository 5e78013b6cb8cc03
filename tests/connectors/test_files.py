"""The files connector: the logs a static inventory names, copied into the bundle layout, bounded, never
through a link."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

from slurm_attrib.connectors.base import Limits, MemoryBundle, Window, Workload
from slurm_attrib.connectors.files import FilesSource

WINDOW = Window(datetime(2026, 11, 20, 9, tzinfo=timezone.utc), datetime(2026, 11, 20, 10, tzinfo=timezone.utc))


def _job(args: dict[str, object]) -> Workload:
    return Workload(cluster="orion", job_id="88123", nodes=("gpu-a01", "gpu-a02"), args={"files": args})


def test_each_kind_lands_where_the_engine_reads_it(tmp_path: Path) -> None:
    (tmp_path / "slurm-88123.out").write_text("[rank0]: RuntimeError: boom\n")
    (tmp_path / "kern-a02.log").write_text("Nov 20 09:45:05 gpu-a02 kernel: NVRM: Xid (PCI:0000:3b:00): 79\n")
    (tmp_path / "a01.prom").write_text('DCGM_FI_DEV_XID_ERRORS{gpu="0"} 0\n')
    bundle = MemoryBundle()
    cov = FilesSource().collect(_job({"app": [str(tmp_path / "slurm-88123.out")],
                                      "kernel": {"gpu-a02": str(tmp_path / "kern-a02.log")},
                                      "metrics": {"gpu-a01": str(tmp_path / "a01.prom")}}),
                                WINDOW, bundle, Limits(5, 1 << 20))
    assert cov.state == "ok" and cov.origin == "shipped" and cov.facts["kernel_nodes"] == ["gpu-a02"]
    assert sorted(bundle.files) == ["applog/slurm-88123.out", "metrics/gpu-a01.prom", "syslog/gpu-a02.log"]


def test_a_node_outside_the_workload_and_a_symlink_are_left_out(tmp_path: Path) -> None:
    (tmp_path / "real.log").write_text("x\n")
    os.symlink("/etc/shadow", tmp_path / "link.log")
    bundle = MemoryBundle()
    cov = FilesSource().collect(_job({"kernel": {"gpu-z99": str(tmp_path / "real.log"),
                                                 "../../etc": str(tmp_path / "real.log"),
                                                 "gpu-a01": str(tmp_path / "link.log")}}),
                                WINDOW, bundle, Limits(5, 1 << 20))
    assert bundle.files == {} and cov.state == "error"
    assert any("gpu-z99" in n for n in cov.notes) and any("../../etc" in n for n in cov.notes)
    assert "link.log" in cov.reason


def test_the_cap_keeps_the_tail_from_a_line_start(tmp_path: Path) -> None:
    (tmp_path / "big.log").write_bytes(b"".join(b"line %05d\n" % i for i in range(1000)))
    bundle = MemoryBundle()
    cov = FilesSource().collect(_job({"kernel": {"gpu-a01": str(tmp_path / "big.log")}}), WINDOW, bundle,
                                Limits(5, 100))
    data = bundle.files["syslog/gpu-a01.log"]
    assert cov.truncated and data.endswith(b"line 00999\n") and data.startswith(b"line ") and len(data) <= 100


def test_no_files_named_is_skipped() -> None:
    assert FilesSource().collect(Workload(cluster="c", job_id="1"), WINDOW, MemoryBundle(), Limits(5, 10)).state \
        == "skipped"
