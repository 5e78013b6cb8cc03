"""Throughput benchmark (issue 5, item 5): diagnoses per second of small bundles with a warm engine
(rules loaded once, as the finalizer does), on one core (one Python process).

The inputs are the rule fixtures under tests/rules (about 160 small single-job bundles, mostly one
node), written out once as bundle directories. The baseline, run in the same script on the same
bundles, is loading each bundle (job.yaml, facts) and reading every evidence file: the I/O floor.

    python bench/throughput/run.py [--seconds 10]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from slurm_attrib.bundle import load_bundle
from slurm_attrib.engine import Engine
from slurm_attrib.ruleset import load_ruleset
from slurm_attrib.ruletest import materialise

ROOT = Path(__file__).resolve().parents[2]


def bundles(workdir: Path) -> list[Path]:
    out = []
    for number, fixture in enumerate(sorted((ROOT / "tests" / "rules").glob("*/*/*.yaml"))):
        target = workdir / f"b{number:04d}"
        target.mkdir()
        out.append(materialise(fixture, target))
    return out


def rate(work: list[Path], action: object, seconds: float) -> float:
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for path in work:
            action(path)  # type: ignore[operator]
        done += len(work)
    return done / (time.perf_counter() - start)


def read_only(path: Path) -> None:
    bundle = load_bundle(path)
    for bf in bundle.files:
        bf.path.read_bytes()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    engine = Engine(load_ruleset(include_site=False))
    with tempfile.TemporaryDirectory() as tmp:
        work = bundles(Path(tmp))
        base = rate(work, read_only, args.seconds / 2)
        diag = rate(work, engine.diagnose, args.seconds)
    print(f"{len(work)} bundles; baseline (load bundle + read files): {base:8.0f} bundles/s")
    print(f"diagnose (warm engine, one process):          {diag:8.0f} diagnoses/s "
          f"= {diag / base:.2f} x the I/O floor; target >= 200/s: {'met' if diag >= 200 else 'MISSED'}")


if __name__ == "__main__":
    main()
