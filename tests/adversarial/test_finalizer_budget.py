"""A time budget per diagnosis, with a coverage note (issue 11): evidence that keeps the engine busy
past ``finalizer.diagnosis_budget_s`` is read again on its tails, and the verdict says so."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

from .finalizer_harness import Site, enqueue

LINE = "2026-12-02T15:41:{s:02d}+00:00 node-01 kernel: NVRM: Xid (PCI:0000:3b:00): 13, pid={p}, name=python3, " \
       "Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0): Out Of Range Address\n"


def test_a_diagnosis_past_its_budget_is_made_on_the_tails_and_says_so(tmp_path: Path) -> None:
    site = Site(tmp_path, diagnosis_budget_s=0.5, diagnosis_tail_bytes=8192)
    enqueue(site.spool, "1")
    folder = site.node_bundle("c_1_0")
    with open(folder / "syslog" / "node-01.log", "w") as handle:
        for i in range(40_000):
            handle.write(LINE.format(s=i % 50, p=i))
    began = time.monotonic()
    result = site.finalize(timeout=120)
    took = time.monotonic() - began
    assert result.returncode == 0, result.stderr[-3000:]
    with sqlite3.connect(site.store) as conn:
        diag = json.loads(conn.execute("SELECT json FROM diagnoses").fetchone()[0])
    budget = [c for c in diag["coverage"] if c["connector"] == "diagnosis_budget"]
    assert budget and budget[0]["state"] == "timeout", diag["coverage"]
    assert "budget of 0.5 s" in budget[0]["reason"] and "last 8192 bytes" in budget[0]["reason"]
    assert took < 30, took
    assert (site.spool / "jobs" / "c_1_0" / "syslog" / "node-01.log").stat().st_size <= 8192
