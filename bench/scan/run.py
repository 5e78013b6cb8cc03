"""Scanning benchmark (issue 5, items 1 and 6): `slurm-attrib diagnose` on a generated cluster-scale
bundle against GNU `grep -E -c` over the same files with the same patterns (every literal anchor of
the bundled extract rules), run alternately in this script; plus peak memory and byte-identical
output across runs.

    python bench/scan/run.py --sizes 256MiB,1GiB [--repeat 3] [--workdir /tmp/slurm-attrib-bench]

Absolute times drift on shared machines; the ratio diagnose/grep is the figure to compare.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from generate import generate, parse_size  # noqa: E402

from slurm_attrib.ruleset import load_ruleset  # noqa: E402


def pattern_file(workdir: Path) -> Path:
    """One grep -E pattern per literal anchor of the bundled extract rules."""
    anchors = sorted({a.rstrip("\n") for r in load_ruleset(include_site=False).rules if r.match
                      for a in r.match.anchors})
    path = workdir / "patterns.txt"
    path.write_text("".join(re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", a) + "\n" for a in anchors))
    return path


def run_grep(bundle: Path, patterns: Path) -> float:
    start = time.perf_counter()
    subprocess.run(["grep", "-E", "-c", "-r", "-f", str(patterns), str(bundle)], env={**os.environ, "LC_ALL": "C"},
                   stdout=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def run_diagnose(bundle: Path) -> tuple[float, int, bytes]:
    """Wall time, peak RSS in KiB (GNU time) and the JSON output."""
    cli = [sys.executable, "-m", "slurm_attrib.cli", "diagnose", "--no-site-rules", "--format", "json", "--bundle",
           str(bundle)]
    timer = shutil.which("time") or "/usr/bin/time"
    start = time.perf_counter()
    done = subprocess.run([timer, "-f", "%M", *cli], capture_output=True, check=True)
    elapsed = time.perf_counter() - start
    peak = int(done.stderr.decode().strip().splitlines()[-1])
    return elapsed, peak, done.stdout


def bench_size(size_text: str, workdir: Path, repeat: int, patterns: Path) -> dict[str, object]:
    bundle = workdir / f"bundle-{size_text}"
    if not (bundle / "job.yaml").exists():
        generate(bundle, parse_size(size_text), nodes=512, gpus=8, seed=1)
    total = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
    greps, diags, peaks, outputs = [], [], [], set()
    for _ in range(repeat):
        greps.append(run_grep(bundle, patterns))
        elapsed, peak, out = run_diagnose(bundle)
        diags.append(elapsed)
        peaks.append(peak)
        outputs.add(hashlib.sha256(out).hexdigest())
    grep_s, diag_s = statistics.median(greps), statistics.median(diags)
    return {"size": size_text, "bytes": total, "grep_s": grep_s, "diagnose_s": diag_s, "ratio": diag_s / grep_s,
            "peak_mb": max(peaks) / 1024, "identical": len(outputs) == 1, "sha256": sorted(outputs)[0][:16]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="256MiB,1GiB")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/slurm-attrib-bench"))
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    patterns = pattern_file(args.workdir)
    print(f"baseline: GNU grep -E -c -r -f patterns.txt ({len(patterns.read_text().splitlines())} patterns), "
          f"LC_ALL=C; {args.repeat} alternating runs, medians")
    print(f"{'size':>8} {'MB':>7} {'grep s':>8} {'diagnose s':>11} {'ratio':>6} {'peak MB':>8} identical")
    for size in args.sizes.split(","):
        r = bench_size(size, args.workdir, args.repeat, patterns)
        print(f"{r['size']:>8} {int(r['bytes']) / 1e6:7.0f} {r['grep_s']:8.2f} {r['diagnose_s']:11.2f} "
              f"{r['ratio']:6.2f} {r['peak_mb']:8.0f} {r['identical']} ({r['sha256']})")


if __name__ == "__main__":
    main()
