"""Benchmark: the collector's time-seeked kernel-log window against full scans of the same file.

Usage: python bench/kernel_window/run.py [--file /tmp/slurm-attrib-bench/kern.log] [--size-gib 4]

Generates the file when absent (bench/kernel_window/generate.py). Times, in the same run, with the
page cache warm for all three (the file was just written or read):
  window  - KernelLogSource.gather(...) on the file (what the Epilog collector does), median of 7
  grep    - GNU `grep -c NVRM` over the whole file (the cheapest useful full scan), median of 3
  pyread  - a Python full read in 8 MiB blocks counting lines (no parsing at all), median of 3
Prints each time and the ratios; targets (issue 5 item 2): >= 50x faster than a full scan, < 0.5 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from generate import END, JOB_END_BEFORE_END_S, JOB_START_BEFORE_END_S, XID, generate

from slurm_attrib.config import CollectorConfig
from slurm_attrib.connectors.kernel_log import KernelLogSource
from slurm_attrib.connectors.runner import FakeRunner


def timed(func, repeat: int) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    times, result = [], None
    for _ in range(repeat):
        began = time.perf_counter()
        result = func()
        times.append(time.perf_counter() - began)
    return statistics.median(times), result


def py_full_read(path: str) -> int:
    count = 0
    with open(path, "rb", buffering=0) as handle:
        while block := handle.read(8 << 20):
            count += block.count(b"\n")
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", default="/tmp/slurm-attrib-bench/kern.log")
    parser.add_argument("--size-gib", type=float, default=4.0)
    args = parser.parse_args()
    if not os.path.exists(args.file):
        print(f"generating {args.size_gib} GiB into {args.file} ...", flush=True)
        generate(args.file, int(args.size_gib * (1 << 30)))
    size = os.path.getsize(args.file)
    config = CollectorConfig()
    job_start = END - timedelta(seconds=JOB_START_BEFORE_END_S)
    job_end = END - timedelta(seconds=JOB_END_BEFORE_END_S)
    lo = job_start - timedelta(seconds=config.window_before_s)
    hi = job_end + timedelta(seconds=config.window_after_s)
    cap = config.max_bundle_bytes - 3 * (config.max_bundle_bytes // 8) - 64 * 1024
    source = KernelLogSource(FakeRunner({}), files=(), path=args.file)

    grep_s, grep_out = timed(lambda: subprocess.run(["grep", "-c", "NVRM", args.file], capture_output=True,
                                                    text=True).stdout.strip(), 3)
    read_s, lines = timed(lambda: py_full_read(args.file), 3)
    window_s, result = timed(lambda: source.gather(lo, hi, 3.0, cap), 7)
    assert result.state == "ok" and XID.encode() in result.data, result.reason  # type: ignore[attr-defined]

    print(f"file: {args.file} {size / (1 << 30):.2f} GiB, {lines} lines; window {lo:%H:%M:%S}..{hi:%H:%M:%S} "
          f"-> {len(result.data)} bytes kept (cap {cap}, truncated={result.truncated})")  # type: ignore[attr-defined]
    print(f"window read (time-seek): {window_s * 1000:8.1f} ms")
    print(f"grep -c over the file:   {grep_s * 1000:8.1f} ms  ({grep_out} NVRM lines)")
    print(f"python full read:        {read_s * 1000:8.1f} ms")
    print(f"ratio grep/window:   {grep_s / window_s:7.1f}x  (target >= 50x)")
    print(f"ratio pyread/window: {read_s / window_s:7.1f}x  (target >= 50x)")
    print(f"window under 0.5 s: {'yes' if window_s < 0.5 else 'NO'}")
    print(f"machine: {os.cpu_count()} CPUs, {datetime.now(timezone.utc):%Y-%m-%d}")


if __name__ == "__main__":
    main()
