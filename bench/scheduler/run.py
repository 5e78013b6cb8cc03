"""Scheduler throughput with and without a controller-side trigger (issue 11 §4).

On Slurm 22.05 an EpilogSlurmctld, even ``/bin/true``, was seen to make 20 short jobs take 37-89 s
instead of 5-8 s to get through: each job's end waits for the script, and the next jobs start only on a
backfill pass. This script measures it on a real Slurm (the test cluster of tests/integration: munged,
MariaDB, slurmdbd, slurmctld, four slurmd of two CPUs each on this host), one cluster per variant:

- ``none``: no controller-side script (the baseline);
- ``epilog_slurmctld``: ``EpilogSlurmctld=/bin/true``;
- ``jobcomp``: ``JobCompType=jobcomp/script`` with ``JobCompLoc=/bin/true``.

For each: ``--jobs`` jobs of ``sleep --sleep`` submitted at once (one CPU each, so 8 run at a time), the
time from the first submission until squeue is empty; medians of ``--repeat`` rounds, and the ratio to
``none`` measured in the same script. Needs root and the Slurm/MariaDB binaries (as tests/integration).

    python bench/scheduler/run.py [--jobs 20] [--sleep 1] [--repeat 3] [--workdir /tmp/slurm-attrib-sched]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "integration"))

from cluster import Cluster, missing_binaries

VARIANTS = {
    "none": {"epilog_ctld": "", "jobcomp": ""},
    "epilog_slurmctld": {"epilog_ctld": "/bin/true", "jobcomp": ""},
    "jobcomp": {"epilog_ctld": "", "jobcomp": "/bin/true"},
}


def one_round(cluster: Cluster, jobs: int, sleep: float) -> float:
    start = time.monotonic()
    for _ in range(jobs):
        cluster.sbatch("-n1", "-c1", "-o", "/dev/null", "--wrap", f"sleep {sleep:g}")
    while cluster.run("squeue", "-h", "-o", "%i", check=False).stdout.strip():
        if time.monotonic() - start > 600:
            raise RuntimeError("jobs still queued after 600 s")
        time.sleep(0.2)
    return time.monotonic() - start


def measure(variant: str, workdir: Path, jobs: int, sleep: float, repeat: int) -> list[float]:
    root = workdir / variant
    shutil.rmtree(root, ignore_errors=True)
    cluster = Cluster(root=root, epilog="", epilog_ctld=VARIANTS[variant]["epilog_ctld"],
                      jobcomp=VARIANTS[variant]["jobcomp"], name=f"sched{variant[:4]}")
    try:
        cluster.start()
        one_round(cluster, 2, 0.1)  # warm-up: the first job of a fresh cluster pays one-time costs
        return [one_round(cluster, jobs, sleep) for _ in range(repeat)]
    finally:
        cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--sleep", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/slurm-attrib-sched"))
    args = parser.parse_args()
    missing = missing_binaries()
    if missing:
        sys.exit(f"missing: {', '.join(missing)}")
    version = subprocess.run(["slurmctld", "-V"], capture_output=True, text=True, check=False).stdout.strip()
    print(f"{version}; {args.jobs} jobs of sleep {args.sleep:g} s, 8 CPUs; medians of {args.repeat}", flush=True)
    results = {v: measure(v, args.workdir, args.jobs, args.sleep, args.repeat) for v in VARIANTS}
    base = statistics.median(results["none"])
    print(f"{'variant':<18} {'median s':>9} {'ratio':>6}  runs")
    for variant, runs in results.items():
        median = statistics.median(runs)
        print(f"{variant:<18} {median:9.1f} {median / base:6.2f}  {', '.join(f'{r:.1f}' for r in runs)}")


if __name__ == "__main__":
    main()
