"""Service benchmark: latency of the read side under 50 concurrent clients on a big store, and POST
throughput against the CLI's warm engine.

The store comes from bench/store/generate.py (synthetic rows; default 1,000,000); the golden cases are
recorded into it as real verdicts so the job page renders a full Diagnosis. A real ``slurm-attrib
serve`` process is started on a loopback port; clients are threads with one keep-alive connection each.

    python bench/store/generate.py --out /tmp/bench-store.sqlite [--rows N]
    python bench/service/run.py --store /tmp/bench-store.sqlite [--clients 50] [--requests 40] [--processes N]
"""

from __future__ import annotations

import argparse
import http.client
import io
import os
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

from slurm_attrib.engine import Engine
from slurm_attrib.ruleset import load_ruleset
from slurm_attrib.store import Store
from slurm_attrib.store.reports import Window, node_offenders

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
TOKEN = "bench-token"
POST_CASE = "02_xid79_fallen_off_bus"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def record_golden(store_path: Path, engine: Engine) -> None:
    """The golden verdicts as real rows of the big store (idempotent: the same verdict again changes nothing)."""
    with Store.open(store_path) as store:
        for bundle in sorted(GOLDEN.glob("*/bundle")):
            store.record(engine.diagnose(bundle), datetime(2026, 12, 1, tzinfo=timezone.utc), bundle_dir=bundle)


def start(store: Path, folder: Path, workers: int, processes: int = 1) -> tuple[subprocess.Popen[bytes], int]:
    config = folder / "c.yaml"
    config.write_text(f"spool:\n  dir: {folder / 'spool'}\nservice:\n  token_file: ''\n  rate_per_s: 0\n"
                      f"  workers: {workers}\n  processes: {processes}\n")
    port = free_port()
    env = {**os.environ, "SLURM_ATTRIB_SERVICE_TOKEN": TOKEN}
    process = subprocess.Popen([sys.executable, "-m", "slurm_attrib.cli", "serve", "--config", str(config), "--store",
                                str(store), "--port", str(port), "--no-site-rules", "--log-level", "warning"],
                               env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if get(port, "/healthz")[0] == 200:
                return process, port
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit("the service did not start")


def get(port: int, path: str, conn: Optional[http.client.HTTPConnection] = None) -> tuple[int, bytes]:
    own = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    own.request("GET", path)
    response = own.getresponse()
    body = response.read()
    if conn is None:
        own.close()
    return response.status, body


def load(port: int, path: str, clients: int, requests: int) -> dict[str, float]:
    """``clients`` threads, ``requests`` GETs each on a keep-alive connection; latency percentiles (ms)."""
    def client(_: int) -> list[float]:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        times = []
        for _ in range(requests):
            started = time.perf_counter()
            status, _body = get(port, path, conn)
            times.append(time.perf_counter() - started)
            if status != 200:
                raise SystemExit(f"GET {path}: HTTP {status}")
        conn.close()
        return times

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        latencies = sorted(t for ts in pool.map(client, range(clients)) for t in ts)
    wall = time.perf_counter() - started
    return {"p50_ms": 1000 * statistics.median(latencies), "p99_ms": 1000 * latencies[int(0.99 * (len(latencies) - 1))],
            "max_ms": 1000 * latencies[-1], "req_per_s": len(latencies) / wall, "requests": float(len(latencies))}


def bundle_tar(bundle: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in sorted(bundle.rglob("*")):
            if path.is_file():
                tar.add(path, arcname=path.relative_to(bundle).as_posix(), recursive=False)
    return buffer.getvalue()


def post_throughput(port: int, body: bytes, clients: int, posts: int) -> float:
    def client(_: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        for _ in range(posts):
            conn.request("POST", "/v1/diagnoses", body, {"Authorization": f"Bearer {TOKEN}"})
            response = conn.getresponse()
            response.read()
            if response.status != 200:
                raise SystemExit(f"POST: HTTP {response.status}")
        conn.close()

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        list(pool.map(client, range(clients)))
    return clients * posts / (time.perf_counter() - started)


def warm_engine_rate(engine: Engine, bundle: Path, runs: int) -> float:
    engine.diagnose(bundle)
    started = time.perf_counter()
    for _ in range(runs):
        engine.diagnose(bundle)
    return runs / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", required=True, type=Path, help="a store from bench/store/generate.py")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=40, help="GETs per client")
    parser.add_argument("--posts", type=int, default=10, help="POSTs per client in the throughput run")
    parser.add_argument("--post-clients", type=int, default=4)
    parser.add_argument("--workers", type=int, default=4, help="service.workers (engines at once)")
    parser.add_argument("--processes", type=int, default=1, help="service.processes (server processes)")
    args = parser.parse_args()
    engine = Engine(load_ruleset(include_site=False))
    record_golden(args.store, engine)
    with Store.open(args.store, readonly=True) as store:
        rows = next(iter(store.rows("SELECT COUNT(*) AS n FROM diagnoses")))["n"]
        top = node_offenders(store, Window(), 1, False, 1)[0]
    with tempfile.TemporaryDirectory(prefix="bench-service-") as folder:
        process, port = start(args.store, Path(folder), args.workers, args.processes)
        try:
            print(f"store: {rows} verdicts; top offender {top['node']} ({top['jobs']} jobs)")
            for label, path in ((f"GET /v1/diagnoses?node={top['node']}", f"/v1/diagnoses?node={top['node']}"),
                                ("GET /jobs/orion/318517 (job page)", "/jobs/orion/318517"),
                                ("GET /v1/diagnoses/orion/318517", "/v1/diagnoses/orion/318517")):
                for _ in range(20 * args.processes):  # warm every process (a new connection each)
                    get(port, path)
                figures = load(port, path, args.clients, args.requests)
                print(f"{label}: {args.clients} clients x {args.requests}: p50 {figures['p50_ms']:.1f} ms, "
                      f"p99 {figures['p99_ms']:.1f} ms, max {figures['max_ms']:.1f} ms, "
                      f"{figures['req_per_s']:.0f} req/s")
            bundle = GOLDEN / POST_CASE / "bundle"
            served = post_throughput(port, bundle_tar(bundle), args.post_clients, args.posts)
            warm = warm_engine_rate(engine, bundle, args.post_clients * args.posts)
            print(f"POST /v1/diagnoses ({POST_CASE}): {served:.1f} bundles/s with {args.post_clients} clients, "
                  f"{args.workers} engines; the CLI's warm engine in one process: {warm:.1f} bundles/s")
        finally:
            process.terminate()
            process.wait()


if __name__ == "__main__":
    main()
