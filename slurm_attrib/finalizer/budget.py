"""A time budget per diagnosis: a job whose evidence keeps the engine busy past
``finalizer.diagnosis_budget_s`` is diagnosed again on the tail of each evidence file (where a failure
is), and if even that runs over, on its job facts alone. The verdict's coverage says so
(connector ``diagnosis_budget``, state ``timeout``), so nobody mistakes it for a full reading.

The budget is a SIGALRM timer, so it applies in the main thread (the finalizer's); the engine's worker
pool is terminated when the alarm unwinds through it. The store is not written under the timer."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, Optional

from ..attribution import Attribution, VerdictStore, attribute
from ..engine import Engine
from ..model import Coverage
from ..safeio import open_regular

log = logging.getLogger("slurm_attrib.finalizer")
KEPT = ("job.yaml", "facts", "collection")  # never trimmed: small, and what the facts-only reading uses


class OverBudget(Exception):
    """The diagnosis ran past its time budget."""


@contextlib.contextmanager
def time_budget(seconds: float) -> Iterator[None]:
    """Raise :class:`OverBudget` in the block once ``seconds`` passed (no limit when 0, or off the main
    thread, where no signal can be delivered)."""
    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return

    def alarm(signum: int, frame: Any) -> None:
        raise OverBudget(f"over its budget of {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def diagnose_within(engine: Engine, bundle: Path, store: Optional[VerdictStore], now: datetime,
                    history_days: float, budget_s: float, tail_bytes: int) -> Attribution:
    """The diagnosis of ``bundle`` (not recorded), within ``budget_s`` per attempt; see the module."""
    try:
        with time_budget(budget_s):
            return attribute(engine, bundle, store, now, history_days, record=False)
    except OverBudget:
        pass
    trimmed = trim_evidence(bundle, tail_bytes)
    reason = (f"the diagnosis ran past its budget of {budget_s:g} s on the whole evidence; "
              f"diagnosed again on the last {tail_bytes} bytes of {trimmed} evidence file(s)")
    try:
        with time_budget(budget_s):
            done = attribute(engine, bundle, store, now, history_days, record=False)
    except OverBudget:
        removed = trim_evidence(bundle, 0)
        reason = (f"the diagnosis ran past its budget of {budget_s:g} s on the whole evidence and on its "
                  f"tails; diagnosed on the job facts alone ({removed} evidence file(s) left out)")
        done = attribute(engine, bundle, store, now, history_days, record=False)
    log.warning("%s: %s", bundle.name, reason)
    done.diagnosis.coverage.append(Coverage("diagnosis_budget", "timeout", reason))
    return done


def trim_evidence(bundle: Path, tail_bytes: int) -> int:
    """Cut every evidence file of the assembled bundle (ours, in the spool) to its last ``tail_bytes``;
    0 removes them. Returns how many files were cut."""
    cut = 0
    for folder, dirs, files in os.walk(bundle, followlinks=False):
        rel = Path(folder).relative_to(bundle)
        if rel.parts and rel.parts[0] in KEPT:
            dirs[:] = []
            continue
        for name in files:
            path = Path(folder) / name
            if not rel.parts and name in KEPT:
                continue
            with contextlib.suppress(OSError):
                if path.lstat().st_size > tail_bytes or tail_bytes == 0:
                    _keep_tail(path, tail_bytes)
                    cut += 1
    return cut


def _keep_tail(path: Path, tail_bytes: int) -> None:
    if tail_bytes == 0:
        path.unlink()
        return
    with open_regular(path) as handle:
        handle.seek(-tail_bytes, os.SEEK_END)
        tail = handle.read(tail_bytes)
    cut = tail.find(b"\n")  # start at a whole line
    tmp = path.with_name(f".tmp-{path.name}")
    tmp.write_bytes(tail[cut + 1:] if 0 <= cut < len(tail) - 1 else tail)
    os.replace(tmp, path)
