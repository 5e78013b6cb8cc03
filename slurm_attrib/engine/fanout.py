"""Extracting a bundle's files on every core the process may use.

Files are independent until their symptoms meet: each file is extracted into a context of its own
(in a forked worker when the bundle is big enough to pay for the pool), and the per-file results are
folded into the run's context one by one in the bundle's file order. One worker or sixteen, whichever
file finishes first, the run's context is the same, so the verdict is byte-identical.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Callable, Optional

from ..bundle import BundleFile
from ..model import Coverage, Symptom
from ..scan import ScanStats
from .context import EngineContext

WORKERS_ENV = "SLURM_ATTRIB_WORKERS"
PARALLEL_MIN_BYTES = 32 << 20  # below this, starting the pool costs more than the cores save

FileScan = Callable[[EngineContext, BundleFile], None]


@dataclass
class FileResult:
    """What extracting one file added to its own context: all a worker sends back."""

    symptoms: list[Symptom] = field(default_factory=list)
    fired: Counter[str] = field(default_factory=Counter)
    assumptions: set[str] = field(default_factory=set)
    coverage: list[Coverage] = field(default_factory=list)
    scan: ScanStats = field(default_factory=ScanStats)


def worker_count(configured: int) -> int:
    """$SLURM_ATTRIB_WORKERS, else the engine setting; 0 (the default) means every CPU this process
    may run on, 1 disables the pool."""
    text = os.environ.get(WORKERS_ENV, "").strip()
    wanted = int(text) if text.isdigit() else configured
    if wanted > 0:
        return wanted
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def extract_files(ctx: EngineContext, files: Sequence[BundleFile], scan: FileScan) -> None:
    """Run ``scan`` over every file and fold the results into ``ctx`` in file order."""
    workers = min(worker_count(ctx.settings.workers), len(files))
    results: Iterable[FileResult]
    if workers > 1 and _pool_pays(files):
        results = _in_workers(ctx, files, scan, workers)
    else:
        results = (extract_file(ctx, bf, scan) for bf in files)
    for result in results:
        fold(ctx, result)


def _pool_pays(files: Sequence[BundleFile]) -> bool:
    """Big enough to pay for the pool, and safe to fork: a process with other threads is not (a lock
    one of them holds would stay locked in the child)."""
    if "fork" not in multiprocessing.get_all_start_methods() or threading.active_count() > 1:
        return False
    return sum(_size(bf) for bf in files) >= PARALLEL_MIN_BYTES


def _size(bf: BundleFile) -> int:
    try:
        return os.stat(bf.path).st_size
    except OSError:
        return 0


def extract_file(ctx: EngineContext, bf: BundleFile, scan: FileScan) -> FileResult:
    """Extract one file into a context of its own that shares the run's bundle, rules and window."""
    own = EngineContext(bundle=ctx.bundle, ruleset=ctx.ruleset, settings=ctx.settings,
                        window_start=ctx.window_start, window_end=ctx.window_end, window_source=ctx.window_source)
    scan(own, bf)
    return FileResult(symptoms=own.symptoms, fired=own.fired, assumptions=own.assumptions,
                      coverage=list(own.coverage.values()), scan=own.scan)


def fold(ctx: EngineContext, result: FileResult) -> None:
    """Add one file's result to the run's context, as if the file had been extracted into it."""
    ctx.symptoms.extend(result.symptoms)
    ctx.fired.update(result.fired)
    ctx.assumptions.update(result.assumptions)
    ctx.scan.add(result.scan)
    for cov in result.coverage:
        total = ctx.coverage_for(cov.connector)
        total.files += cov.files
        total.lines += cov.lines
        total.bytes += cov.bytes
        total.symptoms += cov.symptoms
        total.notes.extend(cov.notes)
        total.reason = cov.reason or total.reason


# The forked workers inherit the job instead of receiving it: the bundle, rules and compiled
# prefilters are never pickled, only each file's index goes out and its FileResult comes back.
_JOB: Optional[tuple[EngineContext, Sequence[BundleFile], FileScan]] = None


def _in_workers(ctx: EngineContext, files: Sequence[BundleFile], scan: FileScan, workers: int) -> list[FileResult]:
    """Largest files first so no worker is left with a big one at the end; results in file order."""
    global _JOB
    order = sorted(range(len(files)), key=lambda i: (-_size(files[i]), i))
    _JOB = (ctx, files, scan)
    gc.freeze()  # the workers' collections then skip the inherited heap instead of copying every page of it
    try:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            done = dict(pool.imap_unordered(_extract_in_worker, order, chunksize=1))
    finally:
        gc.unfreeze()
        _JOB = None
    return [done[i] for i in range(len(files))]


def _extract_in_worker(index: int) -> tuple[int, FileResult]:
    assert _JOB is not None
    ctx, files, scan = _JOB
    return index, extract_file(ctx, files[index], scan)
