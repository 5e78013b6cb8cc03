"""Time the store's report queries on a generated store (bench/store/generate.py) against the 300 ms
target, through the library (best of --repeat runs after one warm-up) and once through the CLI.

Baselines, run in the same script on the same file: ``SELECT COUNT(*) FROM diagnoses`` (a plain full
scan of the table; ratios are printed against it) and ``slurm-attrib --version`` (the CLI's start-up,
which every CLI timing includes). ``stats`` reads whole days from the daily summary ``stats_daily``; the
"scan" line times the same answer counted from every row (what a store without migration 0004 gets).

    python bench/store/run.py --store /tmp/bench-store.sqlite
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from slurm_attrib.store import Store
from slurm_attrib.store.reports import VerdictFilter, Window, node_offenders, query_verdicts, verdict_stats

NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)
TARGET_MS = 300.0


def best_ms(action: Callable[[], Any], repeat: int) -> float:
    action()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return min(times)


def cli_ms(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "slurm_attrib.cli", *argv], check=True, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", required=True, type=Path)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    store = Store.open(args.store, create=False)
    rows = store.db.execute("SELECT COUNT(*) FROM diagnoses").fetchone()[0]
    node = store.db.execute("SELECT node FROM culprits GROUP BY node ORDER BY COUNT(*) DESC LIMIT 1").fetchone()[0]
    window = Window(since=NOW - timedelta(days=30))
    cases = {
        "baseline: SELECT COUNT(*) FROM diagnoses": lambda: store.db.execute(
            "SELECT COUNT(*) FROM diagnoses NOT INDEXED").fetchone(),
        "nodes --since 30d": lambda: node_offenders(store, window),
        f"query --node {node}": lambda: query_verdicts(store, VerdictFilter(node=node)),
        "stats --by week": lambda: verdict_stats(store, Window(), "week"),
        "stats --by week --since 30d": lambda: verdict_stats(store, window, "week"),
        "stats --by week (scan, without stats_daily)": lambda: verdict_stats(store, Window(), "week",
                                                                             use_summary=False),
    }
    print(f"store: {args.store} ({rows} diagnoses); best of {args.repeat} after one warm-up")
    baseline = 0.0
    for name, action in cases.items():
        ms = best_ms(action, args.repeat)
        baseline = baseline or ms
        verdict = "" if name.startswith("baseline") else \
            ("  OK" if ms <= TARGET_MS else f"  MISSED by {ms - TARGET_MS:.0f} ms")
        print(f"library  {name:<42} {ms:8.1f} ms  {ms / baseline:5.2f}x baseline{verdict}")
    common = ["--store", str(args.store), "--now", NOW.isoformat(), "--format", "csv"]
    startup = cli_ms(["--version"])
    print(f"cli      {'baseline: slurm-attrib --version':<42} {startup:8.1f} ms")
    cli_cases = (("nodes --since 30d", ["nodes", "--since", "30d"]),
                 (f"query --node {node}", ["query", "--node", node]),
                 ("stats --by week", ["stats", "--by", "week"]))
    for name, argv in cli_cases:
        ms = cli_ms(argv[:1] + common + argv[1:])
        print(f"cli      {name:<42} {ms:8.1f} ms  ({ms - startup:.0f} ms over start-up)")
    store.close()


if __name__ == "__main__":
    main()
