"""50 readers and a handful of writers at once against one server and its store: every answer a 2xx,
every posted verdict kept."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .conftest import GOLDEN, TOKEN, Server, tar_gz

WRITERS, POSTS_EACH, READERS, READS_EACH = 6, 3, 50, 8
CASES = ("02_xid79_fallen_off_bus", "03_xid48_dbe", "05_cuda_oom", "07_python_exception_rank0")


def renumbered(case: str, job_id: str) -> bytes:
    """A golden bundle under a new job id (so every post is a job of its own)."""
    source = GOLDEN / case / "bundle"
    files = {p.relative_to(source).as_posix(): p.read_bytes() for p in source.rglob("*") if p.is_file()}
    lines = files["job.yaml"].decode().splitlines()
    files["job.yaml"] = "\n".join(f"job_id: '{job_id}'" if line.startswith("job_id:") else line
                                  for line in lines).encode() + b"\n"
    return tar_gz(files)


def test_fifty_readers_and_writers_lose_nothing(server: Server, tmp_path: Path) -> None:
    bodies = {f"77{w:02d}{i}": renumbered(CASES[(w + i) % len(CASES)], f"77{w:02d}{i}")
              for w in range(WRITERS) for i in range(POSTS_EACH)}
    statuses: list[int] = []
    failures: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(WRITERS + READERS)

    def writer(w: int) -> None:
        start.wait()
        for i in range(POSTS_EACH):
            job = f"77{w:02d}{i}"
            reply = server.call("POST", "/v1/diagnoses?store=true", bodies[job], TOKEN, timeout=120)
            with lock:
                statuses.append(reply.status)
            assert reply.headers.get("x-slurm-attrib-stored") == "store", reply.body

    def reader(r: int) -> None:
        start.wait()
        paths = ("/v1/diagnoses?limit=20", "/v1/nodes", "/v1/stats", "/", "/v1/diagnoses?category=gpu_memory",
                 "/metrics", "/v1/diagnoses/orion/77000", "/healthz")
        for n in range(READS_EACH):
            reply = server.call("GET", paths[(r + n) % len(paths)], timeout=120)
            with lock:
                statuses.append(reply.status)
                if reply.status >= 500:
                    failures.append(f"{paths[(r + n) % len(paths)]}: {reply.status} {reply.body[:200]!r}")

    with ThreadPoolExecutor(max_workers=WRITERS + READERS) as pool:
        futures = [pool.submit(writer, w) for w in range(WRITERS)] + [pool.submit(reader, r) for r in range(READERS)]
        for future in futures:
            future.result()
    assert len(statuses) == WRITERS * POSTS_EACH + READERS * READS_EACH
    # 503 would be "store unavailable"; the only 404 allowed is the one job a reader may ask for too early
    assert failures == []
    assert all(s in (200, 404) for s in statuses)
    listed = server.call("GET", "/v1/diagnoses?cluster=orion&limit=1000").json()["items"]
    assert set(bodies) <= {row["job_id"] for row in listed}
    for job in bodies:
        assert server.call("GET", f"/v1/diagnoses/orion/{job}").status == 200
