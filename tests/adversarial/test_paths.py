"""Hostile paths (issue 11): a queue key that climbs out of the spool, a node fallback spool a user
created or linked first, a job StdOut that is a FIFO or device. Real processes, real files, links and
FIFOs."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .finalizer_harness import Site, enqueue

ROOT = Path(__file__).resolve().parents[2]
EPILOG_ENV = ROOT / "tests" / "epilog" / "data" / "fail-exit3.epilog.node-01.env"


def test_a_cluster_name_that_climbs_out_of_the_spool_removes_nothing_outside(tmp_path: Path) -> None:
    site = Site(tmp_path)
    outside = tmp_path / "x_1_0"  # <spool>/jobs/../../x_1_0 and <spool>/nodes/../../x_1_0
    outside.mkdir()
    (outside / "keep").write_text("keep")
    enqueue(site.spool, "1", cluster="../../x", name="evil.json")
    result = site.finalize()
    assert result.returncode == 0, result.stderr
    assert (outside / "keep").read_text() == "keep" and sorted(os.listdir(outside)) == ["keep"]
    assert ".._.._x_1_0" in site.done()
    assert (site.spool / "jobs" / ".._.._x_1_0" / "job.yaml").is_file()


def _collect(tmp_path: Path, fallback: Path) -> str:
    """The real node collector, with a spool it cannot write (a file) and ``fallback`` configured."""
    blocker = tmp_path / "not-a-spool"
    blocker.write_text("")
    conf = tmp_path / "collect.yaml"
    conf.write_text(f"spool:\n  dir: {blocker}\n  fallback_dir: {fallback}\n")
    env = {k: v for k, v in (line.split("=", 1) for line in EPILOG_ENV.read_text().splitlines()
                             if line and not line.startswith("#") and "=" in line)}
    env.update(PATH=os.environ["PATH"], SLURM_ATTRIB_KERNEL_LOG=str(tmp_path / "none-{node}.log"))
    out = subprocess.run([sys.executable, "-m", "slurm_attrib.collect", "--config", str(conf)], env=env,
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _tree(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


@pytest.mark.skipif(os.geteuid() != 0, reason="a fallback owned by another user needs root to set up")
def test_a_fallback_spool_a_user_created_first_is_not_used(tmp_path: Path) -> None:
    fallback = tmp_path / "fallback"
    fallback.mkdir(mode=0o777)
    fallback.chmod(0o777)
    os.chown(fallback, 65534, 65534)
    said = _collect(tmp_path, fallback)
    assert _tree(fallback) == [] and "owned by uid 65534" in said and "not used" in said


def test_a_fallback_spool_that_is_a_symlink_is_not_followed(tmp_path: Path) -> None:
    private = tmp_path / "root-only"
    private.mkdir(mode=0o700)
    fallback = tmp_path / "fallback"
    fallback.symlink_to(private)
    said = _collect(tmp_path, fallback)
    assert _tree(private) == [] and "is a symbolic link" in said


def test_a_fallback_spool_open_to_others_is_not_used(tmp_path: Path) -> None:
    fallback = tmp_path / "fallback"
    fallback.mkdir()
    fallback.chmod(0o777)
    said = _collect(tmp_path, fallback)
    assert _tree(fallback) == [] and "has mode 0777, not 0700" in said


def test_a_new_fallback_spool_is_created_private_and_used(tmp_path: Path) -> None:
    fallback = tmp_path / "fallback"
    said = _collect(tmp_path, fallback)
    assert (fallback.stat().st_mode & 0o777) == 0o700, said
    assert (fallback / "nodes" / "mini_1_0" / "node-01" / "collection.yaml").is_file()


def test_a_stdout_that_is_a_fifo_is_never_opened(tmp_path: Path) -> None:
    """Opening a device can act (``/dev/watchdog`` arms on open): the finalizer must check the type
    first. A FIFO shows whether it opened: a writer blocked in open() is released by any reader."""
    fifo = tmp_path / "job.out"
    os.mkfifo(fifo)
    marker = tmp_path / "writer-released"
    writer = subprocess.Popen(["sh", "-c", f"exec 3>'{fifo}'; touch '{marker}'"])
    try:
        site = Site(tmp_path)
        site.env["FAKE_STDOUT"] = str(fifo)
        enqueue(site.spool, "1")
        result = site.finalize()
        assert result.returncode == 0, result.stderr
        time.sleep(0.3)
        assert not marker.exists() and writer.poll() is None
        job_yaml = (site.spool / "jobs" / "c_1_0" / "job.yaml").read_text()
        assert "not a regular file" in job_yaml
    finally:
        writer.kill()
        writer.wait()


def test_a_node_bundle_folder_that_is_a_symlink_is_not_read_or_removed(tmp_path: Path) -> None:
    """``nodes/<job key>`` linked to another tree: its files are not copied into the job bundle (and
    so into the store), and removing the job's node bundles removes the link only."""
    site = Site(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "node-01" / "syslog").mkdir(parents=True)
    (elsewhere / "node-01" / "syslog" / "node-01.log").write_text("root's secret\n")
    (site.spool / "nodes" / "c_1_0").symlink_to(elsewhere)
    enqueue(site.spool, "1")
    result = site.finalize()
    assert result.returncode == 0, result.stderr
    assert not (site.spool / "jobs" / "c_1_0" / "syslog").exists()
    assert (elsewhere / "node-01" / "syslog" / "node-01.log").read_text() == "root's secret\n"
    assert not os.path.lexists(site.spool / "nodes" / "c_1_0")


def test_a_staging_directory_swapped_for_a_symlink_does_not_steer_the_writes(tmp_path: Path) -> None:
    """The collector's staging directory is replaced by a link to a root-only directory while it
    collects: what it writes next still lands in the directory it made, never in the link's target."""
    from slurm_attrib.connectors.spool import NodeBundle

    root_only = tmp_path / "root-only"
    root_only.mkdir(mode=0o700)
    bundle = NodeBundle.create(tmp_path / "spool" / "nodes" / "c_1_0", "node-01")
    bundle.write("syslog/node-01.log", b"first\n")
    made = bundle.staging.with_name("moved-away")
    bundle.staging.rename(made)
    bundle.staging.symlink_to(root_only)
    bundle.write("facts/node-01.yaml", b"boot_time: 1\n")
    (made / "syslog" / "inner").mkdir()
    os.rename(made / "syslog" / "inner", made / "elsewhere")
    (made / "syslog" / "inner").symlink_to(root_only)
    bundle.write("syslog/inner2/x.log", b"x\n")
    with pytest.raises(OSError):
        bundle.write("syslog/inner/x.log", b"x\n")  # a link inside the staging directory is not followed
    assert os.listdir(root_only) == []
    assert (made / "facts" / "node-01.yaml").read_bytes() == b"boot_time: 1\n"
    bundle.close()
