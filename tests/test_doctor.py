"""``slurm-attrib doctor``: each check on a real install layout made in a temporary folder, run as the
real command where the whole path matters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from slurm_attrib import doctor
from slurm_attrib.config import CollectorConfig, Config, SpoolConfig, StoreConfig

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="the checks of root-owned files need root")


def _config(tmp_path: Path, python: str) -> Config:
    spool = tmp_path / "spool"
    spool.mkdir(mode=0o750, exist_ok=True)
    return Config(spool=SpoolConfig(dir=str(spool), fallback_dir=str(tmp_path / "fallback")),
                  collector=CollectorConfig(interpreter=python, log_file=str(tmp_path / "epilog.log"),
                                            nvidia_smi="", dcgmi=""),
                  store=StoreConfig(path=str(tmp_path / "store" / "verdicts.sqlite")))


def _layout(tmp_path: Path, python: str, extra_conf: str = "") -> doctor.Place:
    wrapper = tmp_path / "slurm-attrib-epilog.sh"
    wrapper.write_text("#!/bin/sh\nexit 0\n")
    wrapper.chmod(0o755)
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "epilog.conf").write_text(f"budget=10\npython={python}\nlog_file={tmp_path / 'epilog.log'}\n")
    conf = tmp_path / "slurm.conf"
    conf.write_text(f"ClusterName=c1\n# Epilog=/nowhere\nInclude {tmp_path}/epilog.conf.d/*.conf\n{extra_conf}")
    (tmp_path / "epilog.conf.d").mkdir()
    (tmp_path / "epilog.conf.d" / "x.conf").write_text(f"Epilog={wrapper}\n")
    return doctor.Place(etc=etc, slurm_conf=conf)


def _by_name(checks: list[doctor.Check]) -> dict[str, doctor.Check]:
    return {c.name: c for c in checks}


@ROOT_ONLY
def test_a_working_node(tmp_path: Path) -> None:
    checks = _by_name(doctor.node_checks(_config(tmp_path, sys.executable), _layout(tmp_path, sys.executable), {}))
    assert checks["Epilog"].state == "ok" and "slurm-attrib-epilog.sh" in checks["Epilog"].detail  # via Include
    assert checks["interpreter"].state == "ok" and "slurm_attrib/collect.py" in checks["interpreter"].detail
    assert checks["epilog.conf"].state == checks["spool"].state == checks["log"].state == "ok"
    assert checks["nvidia-smi"].detail == "disabled in the configuration"


def test_a_symlink_to_a_virtualenvs_python_is_found_out(tmp_path: Path) -> None:
    """The documented `ln -s /opt/venv/bin/python /usr/libexec/slurm-attrib/python` with the package in a
    virtualenv the link does not activate: here a virtualenv without slurm-attrib stands for it."""
    venv.create(tmp_path / "venv", with_pip=False)
    link = tmp_path / "python"
    link.symlink_to(tmp_path / "venv" / "bin" / "python")
    check = doctor._interpreter(str(link), doctor.SubprocessRunner())
    assert check.state == "fail"
    assert "import failed: ModuleNotFoundError" in check.detail and "does not activate the virtualenv" in check.detail
    assert "nothing collected" in check.detail


def test_missing_epilog_line_and_settings_fail(tmp_path: Path) -> None:
    place = doctor.Place(etc=tmp_path / "nowhere", slurm_conf=tmp_path / "slurm.conf")
    place.slurm_conf.write_text("ClusterName=c1\nProlog=/etc/slurm/prolog.sh\n")  # type: ignore[union-attr]
    checks = _by_name(doctor.node_checks(_config(tmp_path, "/nonexistent/python"), place, {}))
    assert checks["Epilog"].state == "fail" and "sets no Epilog=" in checks["Epilog"].detail
    assert checks["epilog.conf"].state == "fail" and checks["interpreter"].state == "fail"


def test_a_planted_fallback_spool_fails(tmp_path: Path) -> None:
    planted = tmp_path / "fallback"
    planted.mkdir()
    planted.chmod(0o777)
    assert doctor._fallback_spool(planted).state == "fail"
    planted.rmdir()
    planted.symlink_to(tmp_path)
    assert doctor._fallback_spool(planted).state == "fail"


def test_a_hook_user_that_cannot_write_the_queue_fails(tmp_path: Path) -> None:
    """EpilogSlurmctld runs as SlurmUser; a root-only spool loses every job without a word."""
    spool = tmp_path / "spool"
    (spool / "queue").mkdir(parents=True)
    (spool / "queue").chmod(0o700)
    conf = tmp_path / "slurm.conf"
    conf.write_text("SlurmUser=nobody\nEpilogSlurmctld=/usr/libexec/slurm-attrib/slurm-attrib-ctld-hook\n")
    check = doctor._hook_user(doctor.SlurmConf.find(conf, {}), spool)
    assert check.state == "fail" and "SlurmUser=nobody" in check.detail
    conf.write_text("SlurmUser=nobody\nJobCompType=jobcomp/script\nJobCompLoc=/x/hook\n")
    assert doctor._hook_user(doctor.SlurmConf.find(conf, {}), spool).state == "ok"
    assert doctor._trigger(doctor.SlurmConf.find(conf, {})).state == "ok"


def test_the_command_prints_json_and_exits_1_on_a_failure(tmp_path: Path) -> None:
    conf = tmp_path / "c.yaml"
    conf.write_text(f"spool:\n  dir: {tmp_path / 'missing-spool'}\n")
    done = subprocess.run([sys.executable, "-m", "slurm_attrib.cli", "doctor", "--config", str(conf), "--etc",
                           str(tmp_path), "--slurm-conf", str(tmp_path / "none.conf"), "--format", "json"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1, done.stderr
    found = json.loads(done.stdout)
    assert found["failed"] is True
    assert {c["name"]: c["state"] for c in found["checks"]}["spool"] == "fail"
