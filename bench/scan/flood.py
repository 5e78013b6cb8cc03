"""The "flood" scan benchmark bundle: the cascade of :mod:`generate`, and one node that repeats its errors.

A training loop that catches an error and retries prints it every step on every rank it hits, NCCL's proxy
thread warns on every failed receive, and a faulting program can make the driver log an Xid for every kernel
it launches. All three are common in real failures and all three are a per-line engine's worst case: every
line is a prefilter hit whose rule matches it, yet past the symptom caps (engine.max_symptoms_per_rank and
_per_rule) a line only adds to a count. Here FLOOD_NODE's application log holds FLOOD_SHARE of the bundle's
bytes in such lines, interleaved with its ordinary ones over the six hours before the fault:

- each of its ranks failing a shard read and retrying, through Python logging at WARNING
  (``OSError: [Errno 5] Input/output error``, rule app.storage_errno);
- NCCL's proxy thread on each rank, unstamped (``NCCL WARN Net : Call to recv from ... failed``, rule
  app.net_nccl_socket_error): every such line also walks its neighbours for a time;

and its kernel log ``Xid 13`` (Graphics SM Warp Exception, rule kernel.nvidia_xid) on its eight GPUs in turn,
KERNEL_FLOOD_BYTES of them: about what the epilog keeps of a node's kernel log with the default
``collector.max_bundle_bytes`` (8 MiB, less the metric files). The other nodes' files are those of the cascade
bundle of the same seed, so the fault, the verdict and every other node are the cascade's.
"""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path

from generate import START, failure_lines, generate, healthy_app_lines, kernel_lines, syslog_stamp

FLOOD_NODE = "node-007"
FLOOD_SHARE = 0.10          # of the bundle's application bytes: the flooding node's error lines
KERNEL_FLOOD_BYTES = 4 << 20
MEAN_FLOOD_LINE = 147       # bytes, measured on the generated lines, so FLOOD_SHARE is about the real share
MEAN_XID_LINE = 176         # and of the kernel flood's, so KERNEL_FLOOD_BYTES is what it writes
BLOCK_LINES = 20_000        # lines per write: the flood takes no more memory than its block


def _flood_line(node: str, rank: int, local: int, i: int, when_text: str) -> str:
    if i % 2:
        return (f"{rank}: {when_text},{i % 1000:03d} - data - WARNING - shard {i % 4096:05d} read failed, retrying: "
                f"OSError: [Errno 5] Input/output error: '/lustre/datasets/tokens/shard-{i % 4096:05d}.bin'")
    return (f"{rank}: {node}:{40000 + local}:{42000 + local} [{local}] misc/socket.cc:540 NCCL WARN Net : Call to "
            f"recv from 10.12.{local}.{i % 250 + 1}<{40000 + i % 20000}> failed : Connection reset by peer")


def _write_flooding_node(out: Path, node: str, ranks: list[int], flood_lines: int, ordinary: list[str],
                         fault_node: str) -> None:
    """Its application log: the flood spread over the ordinary lines, then the cascade's end."""
    fault_at = START + timedelta(hours=6)
    step = max(1, flood_lines // max(1, len(ordinary)))
    with (out / "applog" / f"{node}.log").open("w") as handle:
        block: list[str] = []
        made = 0
        for line in ordinary:
            block.append(line)
            for _ in range(step if made < flood_lines else 0):
                when = START + timedelta(seconds=made * 6 * 3600 / flood_lines)
                local = made % len(ranks)
                block.append(_flood_line(node, ranks[local], local, made, f"{when:%Y-%m-%d %H:%M:%S}"))
                made += 1
            if len(block) >= BLOCK_LINES:
                handle.write("\n".join(block) + "\n")
                block = []
        block += failure_lines(node, ranks, fault_node, fault_at)
        handle.write("\n".join(block) + "\n")


def _write_flooding_kernel(out: Path, node: str, rng: random.Random) -> None:
    fault_at = START + timedelta(hours=6)
    lines = kernel_lines(rng, node, 120, False, fault_at)
    count = KERNEL_FLOOD_BYTES // MEAN_XID_LINE
    for i in range(count):
        when = START + timedelta(seconds=i * 6 * 3600 / count)
        uptime = 86400.0 + (when - START).total_seconds()
        bus = 0x18 + i % 8 * 16
        lines.append(f"{syslog_stamp(when)} {node} kernel: [{uptime:12.6f}] NVRM: Xid (PCI:0000:{bus:02x}:00): 13, "
                     "pid=4242, name=python3, Graphics SM Warp Exception on (GPC 1, TPC 2, SM 0): Out Of Range Address")
    lines.sort(key=lambda text: text[:15])  # the chatter and the Xids in time order, as syslog wrote them
    (out / "syslog" / f"{node}.log").write_text("\n".join(lines) + "\n")


def generate_flood(out: Path, size: int, nodes: int, gpus: int, seed: int) -> None:
    """The cascade bundle of ``seed`` with :data:`FLOOD_NODE`'s two logs rewritten as the module says."""
    generate(out, size, nodes, gpus, seed)
    names = [f"node-{i:03d}" for i in range(1, nodes + 1)]
    if FLOOD_NODE not in names:
        raise SystemExit(f"the flood profile needs {FLOOD_NODE}: --nodes {nodes} is too few")
    index = names.index(FLOOD_NODE)
    ranks = list(range(index * gpus, (index + 1) * gpus))
    rng = random.Random(seed + 1)
    count = max(100, size // nodes // 106)  # the ordinary lines of a node's share of the bundle
    ordinary = healthy_app_lines(rng, FLOOD_NODE, ranks, count, START, 6 * 3600 / count)
    flood_lines = int(size * FLOOD_SHARE) // MEAN_FLOOD_LINE
    _write_flooding_node(out, FLOOD_NODE, ranks, flood_lines, ordinary, names[len(names) // 3])
    _write_flooding_kernel(out, FLOOD_NODE, rng)
