"""Benchmark: the configured Epilog wrapper on a successful job against ``/bin/true``.

Usage: python bench/epilog/run.py [--runs 1000]

Both are executed the way slurmd executes an Epilog: execve of the file (the wrapper through its
``#!/bin/sh`` line) with only the job's environment (a real Slurm 22.05 Epilog environment of a job
that ended 0:0, tests/epilog/data/timeout.epilog.node-01.env) and no PATH. Runs alternate so drift
hits both alike. Prints median and p95 of each and the extra cost of the wrapper; target (issue 5
item 3): under 5 ms extra. Also times the failure path once per run batch with the real collector
(no GPU tools here) for information: that is how long a failed job's node stays COMPLETING.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WRAPPER = ROOT / "epilog" / "slurm-attrib-epilog.sh"
ENVS = ROOT / "tests" / "epilog" / "data"


def env_dump(name: str) -> dict[str, str]:
    env = {}
    for line in (ENVS / name).read_text().splitlines():
        if line and not line.startswith("#") and "=" in line and not line.startswith("_="):
            key, value = line.split("=", 1)
            env[key] = value
    return env


def once(argv: list[str], env: dict[str, str]) -> float:
    began = time.perf_counter()
    subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    return time.perf_counter() - began


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, round(0.95 * len(values)) - 1)]


def main() -> None:
    runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 1000
    with tempfile.TemporaryDirectory() as etc:
        ok_env = {**env_dump("timeout.epilog.node-01.env"), "SLURM_ATTRIB_ETC": etc}
        wrapper, true = [], []
        for _ in range(20):  # warm up
            once([str(WRAPPER)], ok_env)
            once(["/bin/true"], ok_env)
        for _ in range(runs):
            wrapper.append(once([str(WRAPPER)], ok_env))
            true.append(once(["/bin/true"], ok_env))
        fail_env = {**env_dump("fail-exit3.epilog.node-01.env"), "SLURM_ATTRIB_ETC": etc,
                    "SLURM_ATTRIB_PYTHON": sys.executable, "SLURM_ATTRIB_SPOOL": os.path.join(etc, "spool"),
                    "SLURM_ATTRIB_KERNEL_LOG": os.path.join(etc, "kern-{node}.log"),
                    "SLURM_ATTRIB_LOG": os.path.join(etc, "epilog.log"), "SLURM_ATTRIB_CONFIG": "/nonexistent"}
        Path(etc, "kern-node-01.log").write_text("")
        failure = [once([str(WRAPPER)], fail_env) for _ in range(10)]
    med_w, med_t = statistics.median(wrapper), statistics.median(true)
    print(f"runs: {runs} each, interleaved; machine: {os.cpu_count()} CPUs")
    print(f"/bin/true        median {med_t * 1000:6.2f} ms  p95 {p95(true) * 1000:6.2f} ms")
    print(f"epilog (success) median {med_w * 1000:6.2f} ms  p95 {p95(wrapper) * 1000:6.2f} ms")
    print(f"extra: median {(med_w - med_t) * 1000:5.2f} ms, p95 {(p95(wrapper) - p95(true)) * 1000:5.2f} ms "
          f"(target < 5 ms); ratio epilog/true {med_w / med_t:4.2f}x")
    print(f"failure path, real collector (journald skipped, no GPU tools): median "
          f"{statistics.median(failure) * 1000:6.1f} ms, max {max(failure) * 1000:6.1f} ms over {len(failure)} runs")


if __name__ == "__main__":
    main()
