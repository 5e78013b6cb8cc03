"""Generate a large rsyslog ``kern.log`` (RFC 3164 lines) with a failed job's window near its end.

Usage: python bench/kernel_window/generate.py [--size-gib 4] [--out /tmp/slurm-attrib-bench/kern.log]

The file covers consecutive seconds ending at a fixed time, ~24 kernel lines a second drawn from a
realistic mix (NIC/IB link chatter, audit denials, cgroup and OOM notices, NVRM/nvidia-nvswitch
info, PCIe AER corrected errors, TCP/IPv6 noise). The job ran from END-3h to END-1h; one XID 79 is
written 5 minutes before the job ended. Prints the job start/end (Unix time) for bench/kernel_window/run.py.
Generated into /tmp; never commit the output.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from datetime import datetime, timezone

END = datetime(2026, 11, 20, 12, 0, 0, tzinfo=timezone.utc)
JOB_START_BEFORE_END_S = 3 * 3600
JOB_END_BEFORE_END_S = 1 * 3600
XID_BEFORE_END_S = 3600 + 300  # five minutes before the job ended
LINES_PER_SECOND = 24
HOST = "node-02"
XID = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1818990, name=python3, GPU has fallen off the bus."

BODIES = [
    "mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link ACTIVE",
    "mlx5_core 0000:ab:00.0: mlx5_fw_tracer_handle_traces:740:(pid 1423): FW tracer: no new traces",
    "audit: type=1400 audit(1795166168.578:843): apparmor=\"DENIED\" operation=\"open\" class=\"file\" "
    "profile=\"/usr/sbin/chronyd\" name=\"/etc/ssl/openssl.cnf\" pid=3138 comm=\"chronyd\"",
    "IPv6: ADDRCONF(NETDEV_CHANGE): ib0: link becomes ready",
    "TCP: request_sock_TCP: Possible SYN flooding on port 6817. Sending cookies.",
    "nvidia-nvswitch2: SXid (PCI:0000:86:00.0): 12028, Non-fatal, Link 36 egress non-posted PRIV error (First)",
    "NVRM: GPU at PCI:0000:1b:00: GPU-49cfbee0-00f6-3a9d-6016-0ef138b617c0",
    "pcieport 0000:00:03.1: AER: Corrected error received: 0000:3b:00.0",
    "nvidia 0000:3b:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)",
    "Memory cgroup out of memory: Killed process 42817 (python3) total-vm:91234560kB, anon-rss:81234567kB",
    "EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode. Quota mode: none.",
    "Lustre: 2881:0:(client.c:2310:ptlrpc_expire_one_request()) @@@ Request sent has timed out for slow reply",
    "perf: interrupt took too long (2503 > 2500), lowering kernel.perf_event_max_sample_rate to 79750",
    "slurmstepd[2204]: cgroup/v2: _get_cgroup_path: reading cgroup memory.events",
    "nvidia-peermem: loading out-of-tree module taints kernel.",
    "infiniband mlx5_3: mlx5_ib_event:2911:(pid 0): warning: event on port 1",
]


def stamp(epoch: int) -> str:
    t = datetime.fromtimestamp(epoch, tz=timezone.utc)
    return f"{t:%b} {t.day:2d} {t:%H:%M:%S}"


def generate(path: str, size: int, seed: int = 7) -> tuple[int, int, int]:
    """Write about ``size`` bytes of whole seconds ending at END; returns (job start, job end, lines)."""
    rng = random.Random(seed)
    pool = [rng.choice(BODIES) for _ in range(4096)]
    end = int(END.timestamp())
    overhead = len(f"{stamp(end)} {HOST} kernel: [{1000000:7d}.{0:06d}] \n")
    per_line = sum(len(b) for b in pool) / len(pool) + overhead
    seconds = int(size / (per_line * LINES_PER_SECOND)) + 1
    first = end - seconds
    boot = first - 86400
    xid_at = end - XID_BEFORE_END_S
    lines = 0
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", buffering=8 << 20) as out:
        for epoch in range(first, end):
            prefix = f"{stamp(epoch)} {HOST} kernel: [{epoch - boot:7d}.{epoch % 1000000:06d}] "
            start = (epoch * 7) % (len(pool) - LINES_PER_SECOND)
            bodies = pool[start:start + LINES_PER_SECOND]
            if epoch == xid_at:
                bodies = [*bodies[:3], XID, *bodies[3:]]
            chunk = prefix + ("\n" + prefix).join(bodies) + "\n"
            out.write(chunk)
            lines += len(bodies)
    return end - JOB_START_BEFORE_END_S, end - JOB_END_BEFORE_END_S, lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-gib", type=float, default=4.0)
    parser.add_argument("--out", default="/tmp/slurm-attrib-bench/kern.log")
    args = parser.parse_args()
    began = time.monotonic()
    start, end, lines = generate(args.out, int(args.size_gib * (1 << 30)))
    size = os.path.getsize(args.out)
    print(f"wrote {args.out}: {size / (1 << 30):.2f} GiB, {lines} lines in {time.monotonic() - began:.1f} s; "
          f"job start={start} end={end}")


if __name__ == "__main__":
    main()
