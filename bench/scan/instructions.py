"""The per-symptom-line cost counted in instructions, not seconds (issue 10).

run.py's wall-clock ratios drift by 10-20 % within one evening on a shared machine: too much to see a
change of a few per cent in the per-line path. Valgrind's callgrind counts the instructions of one warm
in-process engine run, ``(three runs - one run) / 2`` so that start-up, imports and the first run's lazy
work cancel, on a sample of a generated bundle (its job.yaml and the first ``--nodes`` files of each
folder) and on the same sample of its quiet twin (run.py's: the bundle without its anchor lines). Their
difference over the sample's symptom lines is what a symptom line costs; the same code and input give
the same count on any run (hash seed fixed, one worker).

    python bench/scan/instructions.py [--profile cascade] [--size 256MiB] [--nodes 48]
                                      [--against TREE ...] [--workdir /tmp/slurm-attrib-bench]

``--against`` names other source trees measured the same way, side by side, the first of all the
baseline: a ``git worktree`` of another revision of this checkout (its ``slurm_attrib`` is imported in
place of this one's; the rules are the installed package's, as in a development install). Needs
valgrind; each count takes ~20 s for the default sample.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import ensure_bundle, pattern_file, quiet_twin  # noqa: E402

from slurm_attrib.engine import Engine  # noqa: E402
from slurm_attrib.ruleset import load_ruleset  # noqa: E402

# run by the interpreter under callgrind: the engine made once, then ``runs`` runs of the bundle in one worker
CHILD = """
import os, sys
os.environ["SLURM_ATTRIB_WORKERS"] = "1"
from slurm_attrib.engine import Engine
from slurm_attrib.ruleset import load_ruleset
engine = Engine(load_ruleset(include_site=False))
for _ in range(int(sys.argv[2])):
    engine.run(sys.argv[1])
"""
_COLLECTED = re.compile(r"Collected : (\d+)")


def sample(bundle: Path, nodes: int) -> Path:
    """A copy of ``bundle``'s job.yaml and the first ``nodes`` files (by name) of each of its folders (made once)."""
    out = bundle.with_name(f"{bundle.name}-sample{nodes}")
    if (out / "job.yaml").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(bundle / "job.yaml", out / "job.yaml")
    for folder in sorted(p for p in bundle.iterdir() if p.is_dir()):
        (out / folder.name).mkdir(exist_ok=True)
        for path in sorted(folder.iterdir())[:nodes]:
            shutil.copyfile(path, out / folder.name / path.name)
    return out


def child_env(tree: Optional[Path]) -> dict[str, str]:
    """The child's environment: a fixed hash seed, and ``tree``'s slurm_attrib first on the path if given."""
    return {**os.environ, "PYTHONHASHSEED": "0", **({"PYTHONPATH": str(tree)} if tree is not None else {})}


def count(bundle: Path, runs: int, tree: Optional[Path]) -> int:
    """Instructions of the child above running ``bundle`` ``runs`` times, with ``tree``'s slurm_attrib if given."""
    done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-c",
                           CHILD, str(bundle), str(runs)], env=child_env(tree), cwd="/", capture_output=True,
                          text=True, check=True)
    found = _COLLECTED.search(done.stderr)
    if found is None:
        raise SystemExit(f"no instruction count in callgrind's output:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def warm_run(bundle: Path, tree: Optional[Path]) -> int:
    """Instructions of one warm run: (three runs - one run) / 2, once a run outside callgrind has left ``tree``'s
    compiled prefilter and parsed rules in the cache (else the first count would compile them and the second not)."""
    subprocess.run([sys.executable, "-c", CHILD, str(bundle), "1"], env=child_env(tree), cwd="/", check=True)
    return (count(bundle, 3, tree) - count(bundle, 1, tree)) // 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="cascade")
    parser.add_argument("--size", default="256MiB")
    parser.add_argument("--nodes", type=int, default=48, help="files of each folder in the sample")
    parser.add_argument("--against", type=Path, action="append", default=[], help="a source tree to compare")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/slurm-attrib-bench"))
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    args.workdir.mkdir(parents=True, exist_ok=True)
    bundle = ensure_bundle(args.workdir, args.profile, args.size)
    loud = sample(bundle, args.nodes)
    quiet = sample(quiet_twin(bundle, pattern_file(args.workdir)), args.nodes)
    scan = Engine(load_ruleset(include_site=False)).run(loud).scan
    print(f"{args.profile} {args.size}, first {args.nodes} files of each folder: {scan.hits} hits, "
          f"{scan.symptom_lines} symptom lines; instructions of one warm run (callgrind), one worker")
    print(f"{'tree':<40} {'bundle':>15} {'quiet twin':>15} {'per symptom line':>17} {'vs first':>9}")
    first: Optional[float] = None
    for tree in [*args.against, None]:
        loud_n, quiet_n = warm_run(loud, tree), warm_run(quiet, tree)
        per_line = (loud_n - quiet_n) / max(scan.symptom_lines, 1)
        first = first or per_line
        name = str(tree) if tree is not None else "this checkout"
        print(f"{name:<40} {loud_n:>15,} {quiet_n:>15,} {per_line:>17,.0f} {per_line / first:>8.3f}x", flush=True)


if __name__ == "__main__":
    main()
