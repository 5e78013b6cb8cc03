"""Generate a cluster-scale evidence bundle: N nodes x G GPUs of training logs plus kernel logs.

The application logs carry what a healthy large job prints (progress lines, NCCL INFO chatter, the
odd harmless warning) and, at the end, the cascade of a real fault: one node's GPU falls off the bus
(XID 79 in its kernel log), 30 s later every peer rank reports NCCL errors and watchdog timeouts and
srun reports the task exits. Kernel logs hold healthy-node noise with that one fault. Deterministic
for a given seed. This is the "cascade" profile; ``--profile noisy`` writes the realistic-noise bundle
of :mod:`noisy` (NCCL INFO on every rank, kernel chatter, benign lines holding every rule anchor), and
``--profile flood`` the cascade with one node that repeats its errors for hours (:mod:`flood`).

    python bench/scan/generate.py --out /tmp/scan-1g --size 1GiB [--profile cascade|noisy|flood]
                                  [--nodes 512 --gpus 8 --seed 1]
"""

from __future__ import annotations

import argparse
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

START = datetime(2026, 11, 20, 8, 0, 0, tzinfo=timezone.utc)
UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def parse_size(text: str) -> int:
    for unit, factor in UNITS.items():
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * factor)
    return int(text)


def healthy_app_lines(rng: random.Random, node: str, ranks: list[int], count: int, start: datetime,
                       step_s: float) -> list[str]:
    lines = []
    for i in range(count):
        rank = ranks[i % len(ranks)]
        local = rank % len(ranks)
        when = start + timedelta(seconds=i * step_s)
        kind = rng.random()
        if kind < 0.45:
            stamp = when.strftime("%Y-%m-%d %H:%M:%S,") + f"{when.microsecond // 1000:03d}"
            lines.append(f"{rank}: {stamp} - train - INFO - step {i} | loss {2.0 + rng.random():.3f} | "
                         f"lr 3.0e-4 | {rng.randint(380, 460)} TFLOPs | tokens/s {rng.randint(9000, 12000)}")
        elif kind < 0.93:
            peer = rng.randrange(4096)
            lines.append(f"{rank}: {node}:{40000 + local}:{41000 + local} [{local}] NCCL INFO Channel "
                         f"{rng.randrange(32):02d}/32 : {rank}[{local}] -> {peer}[{peer % 8}] "
                         f"[send] via NET/IB/{local}/GDRDMA")
        elif kind < 0.99:
            lines.append(f"{rank}: {node}:{40000 + local}:{41000 + local} [{local}] NCCL INFO comm 0x"
                         f"{rng.getrandbits(40):010x} rank {rank} nranks 4096 cudaDev {local} nvmlDev {local}"
                         f" busId {0x18 + local * 0x10:02x}000 commId 0x{rng.getrandbits(60):015x} - Init COMPLETE")
        else:
            lines.append(f"{rank}: /opt/conda/lib/python3.11/site-packages/torch/utils/checkpoint.py:92: "
                         "UserWarning: None of the inputs have requires_grad=True. Gradients will be None")
    return lines


def failure_lines(node: str, ranks: list[int], fault_node: str, fault_at: datetime) -> list[str]:
    at = fault_at + timedelta(seconds=30)
    stamp = f"{at.month}{at.day:02d} {at.strftime('%H:%M:%S')}.{at.microsecond:06d}"
    out = []
    for rank in ranks:
        local = rank % len(ranks)
        out.append(f"{rank}: [rank{rank}]:[E{stamp} ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught "
                   f"collective operation timeout: WorkNCCL(SeqNum=88231, OpType=ALLREDUCE, NumelIn=65536, "
                   f"NumelOut=65536, Timeout(ms)=30000) ran for 30012 milliseconds before timing out.")
        out.append(f"{rank}: {node}:{40000 + local}:{41000 + local} [{local}] transport/net_ib.cc:1696 NCCL WARN "
                   f"NET/IB : Got completion from peer {fault_node}<5{local}311> with status=12 opcode=0 len=0 "
                   "vendor err 129 (Recv)")
    out.append(f"srun: error: {node}: tasks {ranks[0]}-{ranks[-1]}: Exited with exit code 1")
    return out


def syslog_stamp(when: datetime) -> str:
    """RFC 3164's stamp as rsyslog writes it: the day padded with a space, the hour with a zero. (Until
    2026-12-03 this replaced the first " 0" and so padded single-digit hours with a space on two-digit
    days, "Nov 20  8:18:00", which no syslog writes and the engine rightly reads as no stamp: the cascade
    bundles' kernel noise before 10:00 was cheaper than real lines.)"""
    return f"{when:%b} {when.day:2d} {when:%H:%M:%S}"


def kernel_lines(rng: random.Random, node: str, count: int, fault: bool, fault_at: datetime) -> list[str]:
    boot = 86400.0
    lines = []
    for i in range(count):
        when = START + timedelta(seconds=i * 60)
        uptime = boot + (when - START).total_seconds()
        stamp = syslog_stamp(when)
        msg = rng.choice([
            "mlx5_core 0000:18:00.0 mlx5_0: Port: 1 Link ACTIVE",
            "perf: interrupt took too long (2502 > 2498), lowering kernel.perf_event_max_sample_rate to 79750",
            "audit: type=1400 audit(1795177954.850:367): apparmor=\"DENIED\" operation=\"open\" profile=\"chronyd\"",
            "nvidia-peermem: loading out-of-tree module taints kernel.",
            "IPv6: ADDRCONF(NETDEV_CHANGE): ib0: link becomes ready",
        ])
        lines.append(f"{stamp} {node} kernel: [{uptime:12.6f}] {msg}")
    if fault:
        lines += fault_kernel_lines(node, fault_at)
    return lines


def fault_kernel_lines(node: str, fault_at: datetime) -> list[str]:
    """The faulty node's kernel lines: its GPU's identity, then XID 79."""
    uptime = 86400.0 + (fault_at - START).total_seconds()
    stamp = syslog_stamp(fault_at)
    return [f"{stamp} {node} kernel: [{uptime:12.6f}] NVRM: GPU at PCI:0000:9b:00: "
            "GPU-509665ad-b600-ac93-3616-d754b23d636d",
            f"{stamp} {node} kernel: [{uptime + 0.000026:12.6f}] NVRM: Xid (PCI:0000:9b:00): 79, "
            "pid='<unknown>', name=<unknown>, GPU has fallen off the bus."]


def write_job_yaml(out: Path, names: list[str], ranks: dict[str, list[int]], gpus: int,
                   fault_at: datetime) -> None:
    """The scheduler's view: a failed job on every node, ending two minutes after the fault."""
    job = ["job_id: '900001'", "cluster: bench", "user: bench", "partition: gpu", "state: FAILED",
           "exit_code: '1:0'", f"start: '{START.strftime('%Y-%m-%dT%H:%M:%SZ')}'",
           f"end: '{(fault_at + timedelta(seconds=120)).strftime('%Y-%m-%dT%H:%M:%SZ')}'",
           f"gpus_per_node: {gpus}", "nodes:"] + [f"  - {n}" for n in names] + ["ranks:"]
    job += [f"  {r}: {n}" for n in names for r in ranks[n]]
    (out / "job.yaml").write_text("\n".join(job) + "\n")


def generate(out: Path, size: int, nodes: int, gpus: int, seed: int) -> None:
    rng = random.Random(seed)
    names = [f"node-{i:03d}" for i in range(1, nodes + 1)]
    fault_node = names[len(names) // 3]
    per_node = size // nodes
    line_bytes = 106  # measured mean length of the generated lines, so --size is the real total
    count = max(100, per_node // line_bytes)
    duration_s = 6 * 3600
    fault_at = START + timedelta(seconds=duration_s)
    (out / "applog").mkdir(parents=True, exist_ok=True)
    (out / "syslog").mkdir(exist_ok=True)
    ranks = {n: list(range(i * gpus, (i + 1) * gpus)) for i, n in enumerate(names)}
    write_job_yaml(out, names, ranks, gpus, fault_at)
    for node in names:
        body = healthy_app_lines(rng, node, ranks[node], count, START, duration_s / count)
        body += failure_lines(node, ranks[node], fault_node, fault_at)
        (out / "applog" / f"{node}.log").write_text("\n".join(body) + "\n")
        kernel = kernel_lines(rng, node, 120, node == fault_node, fault_at)
        (out / "syslog" / f"{node}.log").write_text("\n".join(kernel) + "\n")


PROFILES = ("cascade", "noisy", "flood")


def generate_profile(profile: str, out: Path, size: int, nodes: int = 512, gpus: int = 8, seed: int = 1) -> None:
    """Write the bundle of one profile: "cascade" (this module), "noisy" (:mod:`noisy`) or "flood" (:mod:`flood`)."""
    if profile == "noisy":
        from noisy import generate_noisy  # imports the rule set: only for the profile that needs it

        generate_noisy(out, size, nodes, gpus, seed)
    elif profile == "flood":
        from flood import generate_flood

        generate_flood(out, size, nodes, gpus, seed)
    else:
        generate(out, size, nodes, gpus, seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--size", default="1GiB", help="total app log size, e.g. 256MiB, 1GiB, 4GiB")
    parser.add_argument("--nodes", type=int, default=512)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", choices=PROFILES, default="cascade")
    args = parser.parse_args()
    generate_profile(args.profile, args.out, parse_size(args.size), args.nodes, args.gpus, args.seed)


if __name__ == "__main__":
    main()
