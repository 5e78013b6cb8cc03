"""Scanning benchmark (issue 10): `slurm-attrib diagnose` on generated cluster-scale bundles against
GNU `grep -E -c` over the same files with one pattern per literal anchor of the bundled rules, run
alternately in this script (medians); peak memory; the hit:symptom ratio and the per-hit cost; and
byte-identical JSON across runs, worker counts and file order.

    python bench/scan/run.py --profiles noisy,cascade --sizes 256MiB,1GiB [--repeat 3] [--cpus 2]
                             [--workdir /tmp/slurm-attrib-bench] [--no-determinism] [--no-hit-cost]

Anchor lines are lines holding at least one anchor (grep's count: what the old literal-anchor
prefilter handed to the rules); hits are the lines the engine's prefilter hands to the rules now and
symptom lines those of them that made a symptom (:func:`engine_hits`). The per-hit cost is (diagnose
of the bundle - diagnose of its quiet twin) / hits, where the quiet twin is the same bundle without
its anchor lines, timed side by side. Absolute times drift on shared machines; the ratios are the
figures to compare.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from generate import PROFILES, generate_profile, parse_size  # noqa: E402

from slurm_attrib.engine import Engine, prefilter  # noqa: E402
from slurm_attrib.ruleset import load_ruleset  # noqa: E402

WORKER_COUNTS = (1, 2, 4)
WORKERS_ENV = "SLURM_ATTRIB_WORKERS"  # the engine's worker-count control; ignored where it does not exist


@dataclass
class Run:
    seconds: float
    peak_kib: int
    output: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.output).hexdigest()


@dataclass
class Result:
    profile: str
    size: str
    bytes: int
    grep_s: float
    diagnose_s: float
    peak_mb: float
    runs_identical: bool
    sha256: str
    anchor_lines: int  # lines holding an anchor (grep's count)
    hits: int  # lines the engine's prefilter handed to the rules
    symptom_lines: int  # hit lines that made a symptom
    symptoms: int
    quiet_s: Optional[float] = None
    determinism: dict[str, bool] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return self.diagnose_s / self.grep_s

    @property
    def per_hit_us(self) -> Optional[float]:
        """What one symptom line costs: the time its anchor lines add over the quiet twin, per symptom
        line (benign anchor lines count against it: they are the price of finding the real ones)."""
        if self.quiet_s is None or not self.symptom_lines:
            return None
        return (self.diagnose_s - self.quiet_s) / self.symptom_lines * 1e6


def anchors() -> list[str]:
    """Every literal anchor of the bundled rules (a trailing newline means: at the end of a line)."""
    return sorted({a for r in load_ruleset(include_site=False).rules if r.match for a in r.match.anchors})


def pattern_file(workdir: Path) -> Path:
    """One grep -E pattern per anchor; "Error\\n" becomes "Error$", as the prefilter reads it."""
    lines = []
    for anchor in anchors():
        body = re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", anchor.rstrip("\n"))
        lines.append(body + ("$" if anchor.endswith("\n") else ""))
    path = workdir / "patterns.txt"
    path.write_text("".join(line + "\n" for line in lines))
    return path


def pinned(argv: list[str], cpus: int) -> list[str]:
    """The command pinned to the first ``cpus`` cores when this machine has more (both sides alike)."""
    if cpus and (os.cpu_count() or 1) > cpus and shutil.which("taskset"):
        return ["taskset", "-c", f"0-{cpus - 1}", *argv]
    return argv


def run_grep(bundle: Path, patterns: Path, cpus: int) -> tuple[float, int]:
    """Wall time and the number of hit lines (the sum of grep's per-file counts)."""
    argv = pinned(["grep", "-E", "-c", "-r", "-f", str(patterns), str(bundle)], cpus)
    start = time.perf_counter()
    done = subprocess.run(argv, env={**os.environ, "LC_ALL": "C"}, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    hits = sum(int(line.rsplit(b":", 1)[1]) for line in done.stdout.splitlines() if b":" in line)
    return elapsed, hits


def diagnose_argv(bundle: Path) -> list[str]:
    """What an admin types: the console script beside this interpreter, else ``-m slurm_attrib.cli``."""
    script = Path(sys.executable).parent / "slurm-attrib"
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "slurm_attrib.cli"]
    return [*cli, "diagnose", "--no-site-rules", "--format", "json", "--bundle", str(bundle)]


def compile_package() -> None:
    """Byte-compile the package as `pip install` and the RPM do: an editable checkout run with
    PYTHONDONTWRITEBYTECODE=1 would otherwise compile ~70 modules from source on every run (~0.1 s)."""
    import compileall

    import slurm_attrib

    compileall.compile_dir(str(Path(slurm_attrib.__file__).parent), quiet=1)


def run_diagnose(bundle: Path, cpus: int, workers: Optional[int] = None) -> Run:
    """A new process: start-up, rule loading, the scan and the JSON printed; peak RSS from GNU time."""
    env = dict(os.environ)
    if workers is not None:
        env[WORKERS_ENV] = str(workers)
    timer = shutil.which("time") or "/usr/bin/time"
    start = time.perf_counter()
    done = subprocess.run(pinned([timer, "-f", "%M", *diagnose_argv(bundle)], cpus), env=env, capture_output=True,
                          check=True)
    elapsed = time.perf_counter() - start
    return Run(elapsed, int(done.stderr.decode().strip().splitlines()[-1]), done.stdout)


def symptoms(output: bytes) -> int:
    """Symptoms the rules extracted: the per-connector coverage counts of the diagnosis."""
    doc = json.loads(output)
    if "symptom_counts" in doc:
        return int(sum(doc["symptom_counts"].values()))
    return sum(int(c.get("symptoms", 0)) for c in doc.get("coverage", []))


def engine_hits(bundle: Path) -> tuple[int, int]:
    """(lines the prefilter handed to the rules, those of them that made a symptom), from one
    in-process run of the engine (``EngineContext.scan``; not part of the Diagnosis JSON)."""
    scan = Engine(load_ruleset(include_site=False)).run(bundle).scan
    return scan.hits, scan.symptom_lines


def ensure_bundle(workdir: Path, profile: str, size_text: str) -> Path:
    bundle = workdir / f"{profile}-{size_text}"
    if not (bundle / "job.yaml").exists():
        generate_profile(profile, bundle, parse_size(size_text))
    return bundle


def quiet_twin(bundle: Path, patterns: Path) -> Path:
    """The same bundle without the lines that hold an anchor (made once, with grep -v)."""
    twin = bundle.with_name(bundle.name + "-quiet")
    if (twin / "job.yaml").exists():
        return twin
    for path in sorted(p for p in bundle.rglob("*") if p.is_file()):
        target = twin / path.relative_to(bundle)
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.name == "job.yaml":
            shutil.copyfile(path, target)
            continue
        with target.open("wb") as out:
            subprocess.run(["grep", "-v", "-E", "-f", str(patterns), str(path)], stdout=out,
                           env={**os.environ, "LC_ALL": "C"}, check=False)
    return twin


def reversed_copy(bundle: Path) -> Path:
    """The same files, their directory entries made in reverse order (hard links: no copy)."""
    copy = bundle.with_name(bundle.name + "-reversed")
    if copy.exists():
        shutil.rmtree(copy)
    for path in sorted((p for p in bundle.rglob("*") if p.is_file()), reverse=True):
        target = copy / path.relative_to(bundle)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.link(path, target)
    return copy


def determinism(bundle: Path, cpus: int, reference: str) -> dict[str, bool]:
    """Byte-identical JSON with 1, 2 and 4 workers and with the files listed in reverse order."""
    checks = {f"workers={n}": run_diagnose(bundle, cpus, n).sha256 == reference for n in WORKER_COUNTS}
    copy = reversed_copy(bundle)
    try:
        # the bundle's path is not in the JSON (checked here: the same hash is expected)
        checks["reversed files"] = run_diagnose(copy, cpus).sha256 == reference
    finally:
        shutil.rmtree(copy)
    return checks


def bench(profile: str, size_text: str, args: argparse.Namespace, patterns: Path) -> Result:
    bundle = ensure_bundle(args.workdir, profile, size_text)
    total = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
    twin = quiet_twin(bundle, patterns) if args.hit_cost else None
    greps, runs, quiets, anchor_lines = [], [], [], 0
    for _ in range(args.repeat):
        elapsed, anchor_lines = run_grep(bundle, patterns, args.cpus)
        greps.append(elapsed)
        runs.append(run_diagnose(bundle, args.cpus))
        if twin is not None:
            quiets.append(run_diagnose(twin, args.cpus).seconds)
    hashes = {r.sha256 for r in runs}
    first = runs[0]
    result = Result(profile, size_text, total, statistics.median(greps), statistics.median(r.seconds for r in runs),
                    max(r.peak_kib for r in runs) / 1024, len(hashes) == 1, first.sha256,
                    anchor_lines, *engine_hits(bundle), symptoms(first.output),
                    statistics.median(quiets) if quiets else None)
    if args.determinism:
        result.determinism = determinism(bundle, args.cpus, first.sha256)
    return result


def report(r: Result) -> str:
    per_hit = f"{r.per_hit_us:8.1f}" if r.per_hit_us is not None else "       -"
    quiet = f"{r.quiet_s:7.2f}" if r.quiet_s is not None else "      -"
    ratio = f"{r.hits / r.symptom_lines:5.2f}" if r.symptom_lines else "    -"
    checks = ", ".join(f"{k} {'ok' if v else 'DIFFERS'}" for k, v in r.determinism.items()) or "not checked"
    return (f"{r.profile:>8} {r.size:>7} {r.bytes / 1e6:7.0f} {r.anchor_lines:>8} {r.hits:>8} {r.symptom_lines:>8} "
            f"{r.symptoms:>8} {ratio} "
            f"{r.grep_s:7.2f} {r.diagnose_s:8.2f} {r.ratio:6.2f} {quiet} {per_hit} {r.peak_mb:7.0f} "
            f"{'yes' if r.runs_identical else 'NO':>5} {r.sha256[:16]}  {checks}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", default="noisy,cascade", help=f"comma-separated, of {', '.join(PROFILES)}")
    parser.add_argument("--sizes", default="256MiB,1GiB")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cpus", type=int, default=2, help="pin both sides to this many cores (0: no pinning)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/slurm-attrib-bench"))
    parser.add_argument("--no-determinism", dest="determinism", action="store_false")
    parser.add_argument("--no-hit-cost", dest="hit_cost", action="store_false")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    compile_package()
    patterns = pattern_file(args.workdir)
    used = prefilter.kind()
    print(f"baseline: GNU grep -E -c -r -f patterns.txt ({len(patterns.read_text().splitlines())} patterns), "
          f"LC_ALL=C; {args.repeat} alternating runs, medians; {os.cpu_count()} cores here, pinned to "
          f"{args.cpus or 'all'}; prefilter {used}; {WORKERS_ENV}={os.environ.get(WORKERS_ENV, '(unset)')}",
          flush=True)
    print(f"{'profile':>8} {'size':>7} {'MB':>7} {'anchorln':>8} {'hits':>8} {'symln':>8} {'symptoms':>8} "
          f"{'h:sl':>5} {'grep s':>7} "
          f"{'diag s':>8} {'ratio':>6} {'quiet s':>7} {'us/symln':>8} {'peakMB':>7} {'same':>5} sha256", flush=True)
    for profile in args.profiles.split(","):
        for size in args.sizes.split(","):
            print(report(bench(profile, size, args, patterns)), flush=True)


if __name__ == "__main__":
    main()
