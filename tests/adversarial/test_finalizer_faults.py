"""Faults degrade, never stall (issue 11): a store locked by another process (a real SQLite lock),
SIGTERM while it is locked, temporary copies a dead finalizer left, orphaned node bundles."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import yaml

from .finalizer_harness import Site, enqueue

LOCKER = """import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(300)
"""


def _site_with_a_store(tmp_path: Path) -> Site:
    """A site whose store exists (one verdict recorded) and waits 30 s per lock attempt, the default."""
    site = Site(tmp_path)
    cfg = yaml.safe_load(site.config.read_text())
    cfg["store"]["busy_timeout_s"] = 30.0
    site.config.write_text(yaml.safe_dump(cfg))
    enqueue(site.spool, "1")
    assert site.finalize().returncode == 0 and site.done()["c_1_0"]["stored"] == "store"
    return site


def _lock(store: Path) -> subprocess.Popen[str]:
    locker = subprocess.Popen([sys.executable, "-c", LOCKER, str(store)], stdout=subprocess.PIPE, text=True)
    assert locker.stdout is not None and locker.stdout.readline().strip() == "locked"
    return locker


def _rows(store: Path) -> int:
    with sqlite3.connect(store) as conn:
        return int(conn.execute("SELECT count(*) FROM diagnoses").fetchone()[0])


def test_a_locked_store_spools_after_a_short_wait_with_one_warning(tmp_path: Path) -> None:
    site = _site_with_a_store(tmp_path)
    locker = _lock(site.store)
    try:
        for job in range(20, 25):
            enqueue(site.spool, str(job))
        began = time.monotonic()
        result = site.finalize(timeout=120)
        took = time.monotonic() - began
    finally:
        locker.kill()
        locker.wait()
    assert result.returncode == 0, result.stderr[-3000:]
    assert took < 20, took  # 5 verdicts; each waited 7 x 30 s before
    spooled = sorted((site.spool / "verdicts").glob("verdict-*.json"))
    assert len(spooled) == 5
    warnings = [line for line in result.stderr.splitlines() if " WARNING " in line]
    assert len(warnings) == 1 and "unavailable" in warnings[0], warnings
    again = site.finalize()  # the store is free: the spooled verdicts go in
    assert again.returncode == 0, again.stderr
    assert not list((site.spool / "verdicts").glob("verdict-*.json")) and _rows(site.store) == 6


def test_sigterm_ends_the_finalizer_promptly_while_the_store_is_locked(tmp_path: Path) -> None:
    site = _site_with_a_store(tmp_path)
    locker = _lock(site.store)
    try:
        for job in range(30, 60):
            enqueue(site.spool, str(job))
        daemon = site.start()
        deadline = time.monotonic() + 60
        while not list((site.spool / "done").glob("c_3*")) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert daemon.poll() is None
        sent = time.monotonic()
        daemon.send_signal(signal.SIGTERM)
        code = daemon.wait(timeout=60)
        took = time.monotonic() - sent
    finally:
        locker.kill()
        locker.wait()
    assert code == 0 and took < 4, took


def test_temporary_copies_a_dead_finalizer_left_are_removed_at_start(tmp_path: Path) -> None:
    site = Site(tmp_path)
    left = [site.spool / "jobs" / ".tmp-4242-c_9_0", site.spool / "done" / ".tmp-4242-c_9_0.json",
            site.spool / "verdicts" / ".tmp-abcd.json"]
    left[0].mkdir()
    with open(left[0] / "syslog.log", "wb") as handle:
        handle.truncate(1 << 30)
    for path in left[1:]:
        path.parent.mkdir(exist_ok=True)
        path.write_text("{}")
    hook_in_flight = site.spool / "queue" / ".tmp-123-c_9_0.json"  # a hook writing it now: not ours
    hook_in_flight.write_text("{")
    hook_killed = site.spool / "queue" / ".tmp-99-c_8_0.json"  # a hook killed mid-write two hours ago
    hook_killed.write_text("{")
    two_hours = time.time() - 7200
    os.utime(hook_killed, (two_hours, two_hours))
    enqueue(site.spool, "1")
    result = site.finalize()
    assert result.returncode == 0, result.stderr
    assert not any(os.path.lexists(p) for p in left) and hook_in_flight.exists() and not hook_killed.exists()


def test_orphaned_node_bundles_are_pruned_and_those_of_queued_jobs_kept(tmp_path: Path) -> None:
    site = Site(tmp_path, node_bundle_deadline_s=1e9)
    orphan = site.node_bundle("c_77_0")  # its job's queue entry never came
    waiting = site.node_bundle("c_78_0", node="node-02")  # its job waits for node-01's bundle
    enqueue(site.spool, "78", nodes="node-[01-02]")
    old = time.time() - 30 * 86400
    for path in (orphan.parent, waiting.parent):
        os.utime(path, (old, old))
    daemon = site.start()
    try:
        deadline = time.monotonic() + 30
        while orphan.parent.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
    assert not orphan.parent.exists() and waiting.is_dir()


def _tmpfs(path: Path, size: str) -> bool:
    path.mkdir()
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True).returncode == 0


def test_a_full_disk_leaves_no_temporary_copies_and_the_job_goes_through_once_there_is_room(
        tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    if os.geteuid() != 0 or not _tmpfs(disk, "16m"):
        import pytest

        pytest.skip("needs root and tmpfs to make a full filesystem")
    try:
        site = Site(disk)
        enqueue(site.spool, "1")
        with open(site.node_bundle("c_1_0") / "syslog" / "node-01.log", "wb") as handle:
            handle.write(os.urandom(1 << 20))
        filler = disk / "filler"
        free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
        with open(filler, "wb") as handle:  # the rest of the disk, but for a little
            handle.write(os.urandom(free - (300 << 10)))
        daemon = site.start()
        time.sleep(4)
        assert daemon.poll() is None  # it did not die on ENOSPC
        # a retry may be writing its temporary copy at any moment: none is left once the attempt has failed
        settle = time.monotonic() + 10
        while list((site.spool / "jobs").glob(".tmp-*")) and time.monotonic() < settle:
            time.sleep(0.02)
        assert not list((site.spool / "jobs").glob(".tmp-*")) and "c_1_0" not in site.done()
        filler.unlink()
        deadline = time.monotonic() + 30
        while "c_1_0" not in site.done() and time.monotonic() < deadline:
            time.sleep(0.1)
        daemon.terminate()
        _, err = daemon.communicate(timeout=30)
        assert site.done()["c_1_0"]["outcome"] == "diagnosed", err[-3000:]
        warnings = [line for line in err.splitlines() if " WARNING " in line]
        assert len(warnings) == 1 and "spool filesystem unavailable" in warnings[0], warnings
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)
