"""One finalizer per spool (issue 11): a second one, daemon or ``--once``, refuses to start while the
first holds the spool, and two started together never process a job twice."""

from __future__ import annotations

import time
from pathlib import Path

from .finalizer_harness import Site, enqueue


def _wait_for(predicate, timeout: float = 30.0) -> bool:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_a_second_finalizer_on_the_same_spool_exits_nonzero_and_touches_nothing(tmp_path: Path) -> None:
    site = Site(tmp_path)
    first = site.start()
    try:
        assert _wait_for(lambda: (site.spool / "finalizer.lock").exists() and first.poll() is None)
        time.sleep(0.5)  # the first one is in its loop
        enqueue(site.spool, "7")
        second = site.finalize(timeout=30)
        assert second.returncode == 75, second.stderr
        assert "another finalizer" in second.stderr and f"pid {first.pid}" in second.stderr
        assert _wait_for(lambda: "c_7_0" in site.done())
        assert f"a finalizer runs (pid {first.pid})" in site.status()  # --status names the holder
    finally:
        first.terminate()
        first.wait(timeout=30)
    assert first.returncode == 0
    assert "no finalizer runs" in site.status()


def test_two_finalizers_started_together_diagnose_each_job_once(tmp_path: Path) -> None:
    site = Site(tmp_path)
    for job in range(100, 130):
        enqueue(site.spool, str(job))
    procs = [site.start("--once") for _ in range(2)]
    codes = sorted(p.wait(timeout=120) for p in procs)
    assert codes == [0, 75]
    modified = (tmp_path / "sacctmgr.log").read_text().splitlines()
    assert len(modified) == 30 and len(set(modified)) == 30
    assert len(site.done()) == 30


def test_the_lock_goes_with_the_process(tmp_path: Path) -> None:
    site = Site(tmp_path)
    first = site.start()
    assert _wait_for(lambda: (site.spool / "finalizer.lock").exists())
    time.sleep(0.5)
    first.kill()
    first.wait(timeout=30)
    enqueue(site.spool, "8")
    again = site.finalize()
    assert again.returncode == 0, again.stderr
    assert "c_8_0" in site.done()
