"""``epilog-config``: the YAML configuration turned into what the /bin/sh wrapper reads."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

from slurm_attrib.config import CollectorConfig
from slurm_attrib.epilog_config import write_epilog_config

WRAPPER = Path(__file__).resolve().parents[1] / "epilog" / "slurm-attrib-epilog.sh"


def test_files_written_and_flag_removed(tmp_path: Path) -> None:
    collector = replace(CollectorConfig(), budget_s=6.5, capture_always=True, interpreter="/opt/py/bin/python")
    written = write_epilog_config(collector, tmp_path)
    assert [p.name for p in written] == ["epilog.conf", "capture-always"]
    text = (tmp_path / "epilog.conf").read_text()
    assert "budget=6.5\npython=/opt/py/bin/python\nlog_file=/var/log/slurm-attrib/epilog.log\n" in text
    write_epilog_config(replace(collector, capture_always=False), tmp_path)
    assert not (tmp_path / "capture-always").exists()


def test_the_wrapper_reads_what_was_written(tmp_path: Path) -> None:
    python = tmp_path / "python"
    marker = tmp_path / "ran"
    python.write_text(f'#!/bin/sh\necho "$*" > {marker}\n')
    python.chmod(0o755)
    write_epilog_config(replace(CollectorConfig(), budget_s=4, capture_always=True, interpreter=str(python)),
                        tmp_path)
    env = ["SLURM_JOB_ID=5", "SLURM_JOB_EXIT_CODE2=0:0", "SLURM_JOB_DERIVED_EC=0", f"SLURM_ATTRIB_ETC={tmp_path}"]
    subprocess.run(["/usr/bin/env", "-i", *env, "/bin/sh", str(WRAPPER)], check=True, timeout=30)
    assert marker.read_text() == "-m slurm_attrib.collect --budget 4\n"
