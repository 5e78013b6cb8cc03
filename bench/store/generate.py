"""Fill a store with synthetic diagnoses for the store benchmark (default: 1,000,000 over 2,000 nodes).

Realistic shapes, fixed seed: one year of jobs ending before --now; job sizes from 1 to 64 nodes;
durations exponential (mean 6 h); 80 % attributed, 15 % unattributed, 5 % ambiguous; categories with
site-like weights; culprit nodes skewed (5 % of the nodes cause half of the hardware faults). Each row
keeps a compact synthetic JSON instead of a full diagnosis (generation stays within a few minutes).
Rows go in through one bulk transaction with the secondary indexes dropped and rebuilt afterwards; the
daily summary ``stats_daily`` is then rebuilt from the rows by the function migration 0004 uses.

    python bench/store/generate.py --out /tmp/bench-store.sqlite [--rows N] [--nodes N]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from slurm_attrib.store import Store
from slurm_attrib.store.db import StoreSettings
from slurm_attrib.store.schema import fill_stats_daily, m0001_initial, m0003_report_indexes, m0005_culprit_job_time

NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)
CATEGORIES = {  # category: (weight, responsible, has a culprit node)
    "application": (35, "workload", True), "gpu_oom": (10, "workload", True), "host_oom": (5, "workload", True),
    "job_limit": (12, "workload", False), "cancelled": (8, "workload", False), "preempted": (5, "scheduler", False),
    "gpu_hardware": (6, "infrastructure", True), "gpu_memory": (5, "infrastructure", True),
    "nvlink": (4, "infrastructure", True), "network": (5, "infrastructure", True),
    "node_failure": (4, "infrastructure", True), "storage": (1, "infrastructure", False),
}
SIZES, SIZE_WEIGHTS = [1, 2, 4, 8, 16, 32, 64], [30, 20, 20, 15, 8, 5, 2]
GPUS = ["0000:1b:00", "0000:3b:00", "0000:5d:00", "0000:9a:00", "0000:ab:00", "0000:ba:00", "0000:cb:00", "0000:db:00"]
COLUMNS = ("cluster", "job_id", "array_job_id", "array_task", "restart_count", "user", "partition", "start", "end",
           "job_time", "job_day", "state", "status", "category", "responsible", "culprit_nodes", "root_kind",
           "root_summary", "ruleset_hash", "engine_version", "verdict_time", "node_hours", "gpus_per_node", "gpu_hours",
           "verdict_id", "json")
CULPRIT_COLUMNS = ("diagnosis_id", "cluster", "job_id", "node", "gpu", "time", "category", "responsible", "gpu_hours",
                   "job_time")
DROPPED = ("idx_diagnoses_job_time", "diagnoses_stats", "idx_culprits_node_time", "idx_culprits_diagnosis_id",
           "culprits_window", "culprits_node_job")


def _iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _node_weights(rng: random.Random, nodes: int) -> list[float]:
    bad = set(rng.sample(range(nodes), max(1, nodes // 20)))
    return [19.0 if i in bad else 1.0 for i in range(nodes)]


def rows(count: int, nodes: int, seed: int) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    rng = random.Random(seed)
    names = [f"node-{i:04d}" for i in range(1, nodes + 1)]
    weights = _node_weights(rng, nodes)
    cats = list(CATEGORIES)
    categories = rng.choices(cats, [CATEGORIES[c][0] for c in cats], k=count)
    statuses = rng.choices(["attributed", "unattributed", "ambiguous"], [80, 15, 5], k=count)
    culprits_of = rng.choices(names, weights, k=count)
    sizes = rng.choices(SIZES, SIZE_WEIGHTS, k=count)
    diagnoses, culprits = [], []
    for i in range(count):
        end = NOW - timedelta(seconds=rng.uniform(0, 365 * 86400))
        hours = min(rng.expovariate(1 / 6), 72.0)
        start = end - timedelta(hours=hours)
        status, category = statuses[i], categories[i]
        responsible, has_node = CATEGORIES[category][1], CATEGORIES[category][2]
        if status != "attributed":
            category, responsible, has_node = "unknown", "unknown", False
        node = culprits_of[i] if has_node else ""
        job_id = str(1_000_000 + i)
        node_hours = round(sizes[i] * hours, 4)
        gpu_hours = round(node_hours * 8, 4)
        diag = {"job": {"job_id": job_id, "cluster": "bench", "nodes": sizes[i]}, "status": status,
                "category": category, "culprit_nodes": [node] if node else [], "synthetic": True}
        diagnoses.append(("bench", job_id, "", "", 0, f"user{rng.randrange(300):03d}", rng.choice(["h100", "a100",
                          "debug", "long"]), _iso(start), _iso(end), _iso(end), _iso(end)[:10], "FAILED", status,
                          category, responsible, node, "xid" if responsible == "infrastructure" else "traceback",
                          f"synthetic {category}", "bench0000000000", "0.1.0", _iso(NOW), node_hours, 8, gpu_hours,
                          f"{i:016x}", json.dumps(diag, separators=(",", ":"))))
        if node:
            gpu = rng.choice(GPUS) if responsible == "infrastructure" else None
            culprits.append((i + 1, "bench", job_id, node, gpu, _iso(end - timedelta(seconds=30)), category,
                             responsible, gpu_hours, _iso(end)))
    return diagnoses, culprits


def generate(out: Path, count: int, nodes: int, seed: int) -> None:
    started = time.perf_counter()
    diagnoses, culprits = rows(count, nodes, seed)
    print(f"generated {count} rows in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    with Store.open(out, StoreSettings()) as store:
        conn = store.db.conn
        conn.execute("PRAGMA synchronous = OFF")
        for index in DROPPED:
            conn.execute(f"DROP INDEX IF EXISTS [{index}]")
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(f"INSERT INTO diagnoses ({', '.join(f'[{c}]' for c in COLUMNS)}) VALUES "
                         f"({', '.join('?' for _ in COLUMNS)})", diagnoses)
        conn.executemany(f"INSERT INTO culprits ({', '.join(CULPRIT_COLUMNS)}) VALUES "
                         f"({', '.join('?' for _ in CULPRIT_COLUMNS)})", culprits)
        conn.execute("COMMIT")
        print(f"inserted in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        m0001_initial(store.db)  # the migrations' own index definitions, rebuilt in bulk
        m0003_report_indexes(store.db)
        m0005_culprit_job_time(store.db)
        conn.execute("BEGIN IMMEDIATE")
        fill_stats_daily(store.db)  # the raw inserts above bypass Store.record, which keeps it in step
        conn.execute("COMMIT")
        conn.execute("ANALYZE")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    print(f"{count} diagnoses, {len(culprits)} culprit events in {out} ({time.perf_counter() - started:.1f} s)",
          file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--nodes", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=4)
    args = parser.parse_args()
    if args.out.exists():
        parser.error(f"{args.out} exists; the generator fills a new store")
    generate(args.out, args.rows, args.nodes, args.seed)


if __name__ == "__main__":
    main()
