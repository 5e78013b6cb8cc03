"""Verdicts on failures captured on a real GPU machine (tests/data/gpu/h200-driver580, made by
tests/data/gpu/capture.py): PyTorch 2.11, NCCL 2.28, JAX 0.11 and driver 580's own words, none written here.

Each failure ran as its own job, one after another on the same GPU, so the node's kernel log (shipped whole
with every bundle, as the Epilog's margin would) holds the Xids of the jobs before and after each one: a
verdict must rest on the job's own evidence, and never blame the node for a process's own GPU fault."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pytest

from slurm_attrib.engine import Engine
from slurm_attrib.ruleset import load_ruleset

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu" / "h200-driver580"

# capture file -> (job start, job end) on 2026-12-04 UTC, around the run's own time in the capture
SECOND_MACHINE = {"misaligned_torch", "trap_torch"}  # a later capture on another machine: its own kernel log
WINDOWS = {
    "oom_huge": ("12:00:18", "12:00:24"),
    "oom_realistic": ("12:00:24", "12:00:27"),
    "device_assert": ("12:00:27", "12:00:33"),
    "illegal_cupy": ("12:00:33", "12:00:35"),
    "illegal_torch": ("12:00:35", "12:00:40"),
    "watchdog": ("12:00:45", "12:01:58"),
    "two_ranks_one_gpu": ("12:01:58", "12:02:07"),
    "store_server_timeout": ("12:02:07", "12:02:20"),
    "store_client_timeout": ("12:02:20", "12:02:33"),
    "child_raises": ("12:02:33", "12:02:39"),
    "child_killed": ("12:02:39", "12:02:46"),
    "jax_oom": ("12:02:46", "12:02:59"),
    "misaligned_torch": ("12:21:40", "12:21:49"),
    "trap_torch": ("12:21:49", "12:21:54"),
}

# capture -> (status, category, a substring of the root cause's raw line, or None)
EXPECTED: dict[str, tuple[str, Optional[str], Optional[str]]] = {
    "oom_huge": ("attributed", "gpu_oom", "Tried to allocate 1024.00 GiB"),
    "oom_realistic": ("attributed", "gpu_oom", "Tried to allocate 60.00 GiB"),
    "device_assert": ("attributed", "application", None),
    "illegal_cupy": ("attributed", "application", None),
    "illegal_torch": ("attributed", "application", None),
    # one rank whose collective waited behind its own long kernel: nothing in the evidence says why
    "watchdog": ("unattributed", None, None),
    "two_ranks_one_gpu": ("attributed", "application", None),
    # the store's timeouts name no culprit: the other rank never came, or nobody listened
    "store_server_timeout": ("unattributed", None, None),
    "store_client_timeout": ("unattributed", None, None),
    # the Xid 31 of a job two minutes before is that job's process's, not this one's cause
    "child_raises": ("attributed", "application", "ValueError: loss is nan at step 1200"),
    "child_killed": ("unattributed", None, None),
    "jax_oom": ("attributed", "gpu_oom", "RESOURCE_EXHAUSTED: Out of memory"),
    # a kernel's own misaligned write (three Xid 13 lines) and trap instruction (Xid 43): the program's
    "misaligned_torch": ("attributed", "application", None),
    "trap_torch": ("attributed", "application", None),
}


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine(load_ruleset(include_site=False))


def _bundle(root: Path, capture: str) -> Path:
    start, end = WINDOWS[capture]
    (root / "applog").mkdir(parents=True)
    (root / "syslog").mkdir()
    output = (DATA / f"{capture}.txt").read_bytes().split(b"\n", 1)[1]  # the capture script's header line off
    (root / "applog" / "vm.log").write_bytes(output)
    dmesg = "dmesg-iso.second-machine.txt" if capture in SECOND_MACHINE else "dmesg-iso.txt"
    kernel = (DATA / dmesg).read_bytes().split(b"\n", 1)[1]
    (root / "syslog" / "vm.log").write_bytes(kernel)
    (root / "job.yaml").write_text(f'job_id: "4242"\ncluster: h200\nuser: alice\npartition: gpu\nnodes: [vm]\n'
                                   f'state: FAILED\nexit_code: "1:0"\nderived_exit_code: "0:0"\n'
                                   f'start: "2026-12-04T{start}Z"\nend: "2026-12-04T{end}Z"\n')
    return root


@pytest.mark.parametrize("capture", sorted(EXPECTED))
def test_captured_failure_gets_its_own_verdict(engine: Engine, tmp_path: Path, capture: str) -> None:
    status, category, root_line = EXPECTED[capture]
    diagnosis: dict[str, Any] = engine.diagnose(_bundle(tmp_path, capture)).to_dict()
    assert diagnosis["status"] == status
    assert diagnosis["culprit_nodes"] == []  # a process's own fault, or nothing known: never the node
    if category is not None:
        assert diagnosis["category"] == category
    if root_line is not None:
        assert root_line in diagnosis["root_cause"]["evidence"][0]["raw"]


def test_the_captured_xids_are_read_and_name_their_processes(engine: Engine, tmp_path: Path) -> None:
    """Driver 580 writes 'channel 0x0000000a' where older drivers wrote 'Ch 00000008'; the Xid, its GPU and its
    process are still read, and an application-class Xid during the job is the application's."""
    diagnosis = engine.diagnose(_bundle(tmp_path, "illegal_torch")).to_dict()
    assert diagnosis["category"] == "application" and diagnosis["responsible"] == "workload"
    cited = [e["raw"] for e in diagnosis["evidence"] if e["source"] == "kernel"]
    assert any("Xid (PCI:0000:00:06): 31, pid=555, name=python3" in raw for raw in cited)
