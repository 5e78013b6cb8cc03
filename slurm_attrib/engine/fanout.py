"""Extracting a bundle's files on every core the process may use.

Files are independent until their symptoms meet: each file is extracted into a context of its own
(in a forked worker when the bundle is big enough to pay for the pool), and the per-file results are
folded into the run's context one by one in the bundle's file order. One worker or sixteen, whichever
file finishes first, the run's context is the same, so the verdict is byte-identical.
"""

from __future__ import annotations

import gc
import os
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from queue import Empty
from typing import Any, Callable, Optional

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


def extract_files(ctx: EngineContext, files: Sequence[BundleFile], scan: FileScan,
                  prepare: Optional[Callable[[int], None]] = None) -> None:
    """Run ``scan`` over every file and fold the results into ``ctx`` in file order. ``prepare`` is told
    how many bytes each process will read, before any helper is forked."""
    workers = processes(files, worker_count(ctx.settings.workers))
    if prepare is not None:
        prepare(sum(bf.size for bf in files) // workers)
    results: Iterable[FileResult] = (_in_workers(ctx, files, scan, workers) if workers > 1
                                     else (extract_file(ctx, bf, scan) for bf in files))
    for result in results:
        fold(ctx, result)


def processes(files: Sequence[BundleFile], wanted: int) -> int:
    """How many processes extract ``files``: ``wanted``, but one for a bundle under PARALLEL_MIN_BYTES,
    at most one per half of that and one per file (64 CPUs do not fork 63 helpers for 40 MB), and one
    where forking is not safe: in a process with other threads (a lock one of them holds would stay
    locked in the child)."""
    if wanted <= 1 or threading.active_count() > 1:
        return 1
    total = sum(bf.size for bf in files)
    if total < PARALLEL_MIN_BYTES:
        return 1
    import multiprocessing  # here: only a bundle big enough for helpers pays for the import (~5 ms a start)

    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    share = PARALLEL_MIN_BYTES // 2
    return max(1, min(wanted, len(files), total // share if share else len(files)))


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


def _in_workers(ctx: EngineContext, files: Sequence[BundleFile], scan: FileScan, workers: int) -> list[FileResult]:
    """This process and ``workers - 1`` forked helpers take the files, largest first, from one shared
    counter, so no one is left with a big file at the end and this process never waits idle; results
    in file order. The helpers inherit the job instead of receiving it (the bundle, rules and compiled
    prefilters are never pickled): only their FileResults come back. A file a helper could not finish
    (it died, or raised) is extracted here, where the same input fails the same way as without helpers."""
    import multiprocessing

    order = sorted(range(len(files)), key=lambda i: (-files[i].size, i))
    forked = multiprocessing.get_context("fork")
    claimed = forked.Value("i", 0)
    queue: Any = forked.Queue()
    job = (ctx, files, scan, order, claimed, queue)
    helpers = [forked.Process(target=_helper, args=job, daemon=True) for _ in range(workers - 1)]
    done: dict[int, FileResult] = {}
    gc.freeze()  # the helpers' collections then skip the inherited heap instead of copying every page of it
    try:
        for helper in helpers:
            helper.start()
        for index in _claims(order, claimed):
            done[index] = extract_file(ctx, files[index], scan)
            _drain(queue, done)  # unpickle what the helpers sent while they still work, not all at the end
        _collect(queue, helpers, done, len(files))
    finally:
        gc.unfreeze()
        for helper in helpers:
            helper.join(timeout=1)
            if helper.is_alive():
                helper.kill()
                helper.join()
        queue.close()
    for index in range(len(files)):
        if index not in done:
            done[index] = extract_file(ctx, files[index], scan)
    return [done[i] for i in range(len(files))]


def _claims(order: list[int], claimed: Any) -> Iterator[int]:
    """The next unclaimed file of ``order``, until none is left (shared by this process and its helpers)."""
    while True:
        with claimed.get_lock():
            position = claimed.value
            if position >= len(order):
                return
            claimed.value = position + 1
        yield order[position]


def _helper(ctx: EngineContext, files: Sequence[BundleFile], scan: FileScan, order: list[int], claimed: Any,
            queue: Any) -> None:
    for index in _claims(order, claimed):
        try:
            result: Optional[FileResult] = extract_file(ctx, files[index], scan)
        except Exception:  # the calling process extracts the file again and fails there
            result = None
        queue.put((index, result))
    queue.close()
    queue.join_thread()


def _drain(queue: Any, done: dict[int, FileResult]) -> None:
    """The results the helpers have sent so far, without waiting for more."""
    while True:
        try:
            index, result = queue.get_nowait()
        except Empty:
            return
        if result is not None:
            done[index] = result


def _collect(queue: Any, helpers: list[Any], done: dict[int, FileResult], total: int) -> None:
    """The helpers' results, until every file has one or no helper is left to send more."""
    while len(done) < total:
        try:
            index, result = queue.get(timeout=0.1)
        except Empty:
            if any(helper.is_alive() for helper in helpers):
                continue
            try:  # every helper is gone: what they sent before leaving is in the pipe already
                index, result = queue.get(timeout=0.1)
            except Empty:
                return
        if result is not None:
            done[index] = result
