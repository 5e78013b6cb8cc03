"""The "noisy" scan benchmark bundle: what a real large job's evidence looks like before the fault.

Per node an application log with NCCL_DEBUG=INFO chatter on every rank (init, channels, rings and
trees, communicator set-up and tear-down), training progress lines, tqdm progress bars redrawn with
carriage returns, and benign lines that contain the anchors of the bundled rules without matching
them (a config dump, a log filter, a docstring quoted in a warning); per node a kernel log with
mlx5_core, NFS, audit and corrected-AER chatter and the anchors' benign kernel forms. At the end the
cascade of :mod:`generate` (XID 79 on one node, watchdog timeouts and NCCL IB errors on every rank,
srun task exits). Deterministic for a seed; files are written in blocks, so memory does not grow
with the bundle.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import TextIO

from generate import START, failure_lines, fault_kernel_lines, syslog_stamp, write_job_yaml

from slurm_attrib.engine.ranks import split_rank
from slurm_attrib.model import SOURCE_APP, SOURCE_KERNEL
from slurm_attrib.ruleset import Rule, load_ruleset

KERNEL_SHARE = 0.15       # of the bytes: the job window of each node's kern.log
BENIGN_EVERY = 200        # one benign anchor line per this many application lines
BAR_EVERY = 400           # one tqdm bar (many \r redraws) per this many lines of local rank 0
MEAN_APP_LINE = 120       # bytes, measured on the generated logs, so --size is about the real total
MEAN_KERNEL_LINE = 160
INIT_BYTES_PER_RANK = 3200  # the NCCL init block each rank prints first
BLOCK_LINES = 20_000      # lines per write

# Places for an anchor where no rule's regex fires: quoted in a config dump, a filter, a docstring.
BENIGN_TEMPLATES = (
    "INFO log_filter: suppressing known-harmless lines matching '{a}' (0 suppressed so far)",
    "DEBUG alerting: pattern[{i}] = \"{a}\"",
    "INFO docs: see FAQ entry 'What does {a}\" mean in my job log?'",
    "INFO rsync: resumed checkpoint mirror; last message was '{a}' (retried, OK)",
)
BENIGN_LINE_END = "INFO log_filter: pattern {i} ends the line: {a}"


def _rule_matches(rules: list[Rule], text: str) -> bool:
    """Whether any of these rules would extract a symptom from the line (regex hit, not excluded)."""
    for rule in rules:
        assert rule.match is not None
        if rule.match.regex.search(text) and not (rule.match.exclude and rule.match.exclude.search(text)):
            return True
    return False


def benign_anchor_lines(source: str) -> tuple[list[str], list[str]]:
    """One benign line per anchor of the bundled rules of ``source`` (app lines without their rank
    label), verified against every rule of that source; and the anchors no template could hide."""
    rules = [r for r in load_ruleset(include_site=False).rules if r.match and r.match.source == source]
    anchors = sorted({a for r in rules if r.match for a in r.match.anchors})
    lines, missed = [], []
    for i, anchor in enumerate(anchors):
        if anchor.endswith("\n"):
            candidates = [BENIGN_LINE_END.format(i=i, a=anchor[:-1])]
        else:
            candidates = [t.format(i=i, a=anchor) for t in BENIGN_TEMPLATES]
        good = [c for c in candidates if anchor.rstrip("\n") in c and not _rule_matches(rules, _as_seen(source, c))]
        if good:
            lines.append(good[0])
        else:
            missed.append(anchor)
    return lines, missed


def _as_seen(source: str, text: str) -> str:
    """The text a rule's regex sees for this line once written: app rules see it without its srun
    label, kernel rules the whole syslog line."""
    if source == SOURCE_APP:
        return split_rank(f"0: {text}")[1]
    return f"Nov 20 08:00:00 node-001 kernel: [ 86400.000000] {text}"


def _stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M:%S,") + f"{when.microsecond // 1000:03d}"


def _nccl_init(rng: random.Random, node: str, rank: int, local: int, nranks: int) -> list[str]:
    """What NCCL_DEBUG=INFO prints when one rank joins a communicator."""
    head = f"{node}:{40000 + local}:{41000 + local} [{local}] NCCL INFO"
    comm = f"0x{rng.getrandbits(44):011x}"
    bus = f"{0x18 + local * 0x10:02x}000"
    nxt, prv = (rank + 1) % nranks, (rank - 1) % nranks
    return [
        f"{head} Bootstrap : Using ib0:10.{rank // 8 // 250}.{rank // 8 % 250}.{10 + local}<0>",
        f"{head} NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB ; OOB ib0:10.0.0.1<0>",
        f"{head} Using network IB",
        f"{head} ncclCommInitRank comm {comm} rank {rank} nranks {nranks} cudaDev {local} nvmlDev {local} "
        f"busId {bus} commId 0x{rng.getrandbits(60):015x} - Init START",
        f"{head} Setting affinity for GPU {local} to ffff,ffffffff,00000000,0000ffff,ffffffff",
        f"{head} NVLS multicast support is available on dev {local}",
        f"{head} comm {comm} rank {rank} nRanks {nranks} nNodes {nranks // 8} localRanks 8 localRank {local} "
        "MNNVL 0",
        f"{head} Trees [0] {nxt}/-1/-1->{rank}->{prv} [1] {nxt}/-1/-1->{rank}->{prv}",
        f"{head} P2P Chunksize set to 524288",
        *(f"{head} Channel {c:02d}/0 : {rank}[{local}] -> {nxt}[{nxt % 8}] via P2P/CUMEM" for c in range(8)),
        *(f"{head} Channel {c:02d}/1 : {rank}[{local}] -> {nxt}[{nxt % 8}] [send] via NET/IB/{local}/GDRDMA"
          for c in range(4)),
        f"{head} Connected all rings",
        f"{head} Connected all trees",
        f"{head} threadThresholds 8/8/64 | {nranks * 8}/8/64 | 512 | 512",
        f"{head} 32 coll channels, 32 collnet channels, 16 nvls channels, 32 p2p channels, 32 p2p channels per peer",
        f"{head} comm {comm} rank {rank} nranks {nranks} cudaDev {local} busId {bus} - Init COMPLETE",
    ]


def _progress_bar(rng: random.Random, epoch: int) -> str:
    """A tqdm bar as the file sees it: one physical line, every redraw after a carriage return."""
    total = 1000
    parts = []
    for done in range(0, total + 1, 50):
        filled = done * 20 // total
        parts.append(f"Epoch {epoch}: {done * 100 // total:3d}%|{'#' * filled}{' ' * (20 - filled)}| "
                     f"{done}/{total} [{done // 60:02d}:{done % 60:02d}<00:00, {rng.uniform(5, 6):.2f}it/s, "
                     f"loss={2 + rng.random():.3f}]")
    return "\r".join(parts)


def _training_line(rng: random.Random, node: str, rank: int, local: int, nranks: int, i: int,
                   when: datetime) -> str:
    kind = rng.random()
    if kind < 0.40:
        return (f"{_stamp(when)} - train - INFO - step {i} | loss {2.0 + rng.random():.3f} | lr 3.0e-4 | "
                f"{rng.randint(380, 460)} TFLOPs | tokens/s {rng.randint(9000, 12000)} | grad_norm "
                f"{rng.uniform(0.2, 1.5):.3f}")
    if kind < 0.75:
        peer = rng.randrange(nranks)
        return (f"{node}:{40000 + local}:{41000 + local} [{local}] NCCL INFO Channel {rng.randrange(32):02d}/1 : "
                f"{rank}[{local}] -> {peer}[{peer % 8}] [receive] via NET/IB/{local}/GDRDMA/Shared")
    if kind < 0.85:
        return (f"{node}:{40000 + local}:{41000 + local} [{local}] NCCL INFO comm 0x{rng.getrandbits(44):011x} "
                f"rank {rank} nranks {nranks} cudaDev {local} busId {0x18 + local * 0x10:02x}000 - Init COMPLETE")
    if kind < 0.93:
        return (f"{node}:{40000 + local}:{41000 + local} [{local}] NCCL INFO [Service thread] Connection closed "
                f"by localRank {rng.randrange(8)}")
    if kind < 0.97:
        return (f"{_stamp(when)} - data - INFO - shard {rng.randrange(4096):05d} opened: "
                f"/lustre/datasets/pile/train-{rng.randrange(4096):05d}-of-04096.arrow ({rng.randint(200, 900)} MB)")
    return ("/opt/conda/lib/python3.11/site-packages/torch/utils/checkpoint.py:92: UserWarning: None of the "
            "inputs have requires_grad=True. Gradients will be None")


def _app_log(rng: random.Random, node: str, ranks: list[int], nranks: int, count: int,
             benign: list[str]) -> Iterator[str]:
    """The application log of one node: srun --label prefixes on every line."""
    gpus = len(ranks)
    for rank in ranks:
        for line in _nccl_init(rng, node, rank, rank % gpus, nranks):
            yield f"{rank}: {line}"
    step_s = 6 * 3600 / max(count, 1)
    for i in range(count):
        rank = ranks[i % gpus]
        if i % BENIGN_EVERY == BENIGN_EVERY // 2:
            yield f"{rank}: {benign[(i // BENIGN_EVERY) % len(benign)]}"
        elif i % BAR_EVERY == 0:
            yield f"{ranks[0]}: {_progress_bar(rng, i // BAR_EVERY)}"
        else:
            when = START + timedelta(seconds=i * step_s)
            yield f"{rank}: {_training_line(rng, node, rank, rank % gpus, nranks, i, when)}"


def _kernel_noise(rng: random.Random, index: int) -> str:
    """One healthy-node kernel line: audit, corrected AER, mlx5_core and NFS chatter (none a symptom)."""
    kind = rng.random()
    if kind < 0.08:
        return rng.choice([
            "mlx5_core 0000:18:00.0: mlx5_pcie_event:301:(pid 1221): PCIe slot advertised sufficient power (75W).",
            "mlx5_core 0000:18:00.0: E-Switch: Total vports 2, per vport: max uc(128) max mc(2048)",
            "mlx5_core 0000:18:00.0: MLX5E: StrdRq(1) RqSz(8) StrdSz(2048) RxCqeCmprss(0 basic)",
            "mlx5_core 0000:18:00.0: firmware version: 28.39.1002",
            "mlx5_core 0000:18:00.0: 252.048 Gb/s available PCIe bandwidth (16.0 GT/s PCIe x16 link)",
        ])
    if kind < 0.10:
        return "nfs: server storage01 OK"
    if kind < 0.50:
        return (f"audit: type=1130 audit(1795177954.{index % 1000:03d}:{index}): pid=1 uid=0 auid=4294967295 "
                "ses=4294967295 subj=unconfined msg='unit=slurm-attrib-collect comm=\"systemd\" "
                "exe=\"/usr/lib/systemd/systemd\" hostname=? addr=? terminal=? res=success'")
    if kind < 0.70:
        return "pcieport 0000:00:01.0: AER: Corrected error received: 0000:01:00.0"
    if kind < 0.80:
        return "pcieport 0000:00:01.0: AER: Multiple Corrected error received: 0000:01:00.0"
    if kind < 0.90:
        return "perf: interrupt took too long (2502 > 2498), lowering kernel.perf_event_max_sample_rate to 79750"
    return "IPv6: ADDRCONF(NETDEV_CHANGE): ib0: link becomes ready"


def _kernel_log(rng: random.Random, node: str, count: int, benign: list[str]) -> Iterator[str]:
    boot = 86400.0
    step_s = 6 * 3600 / max(count, 1)
    for i in range(count):
        when = START + timedelta(seconds=i * step_s)
        stamp = syslog_stamp(when)
        uptime = boot + i * step_s
        msg = benign[(i // BENIGN_EVERY) % len(benign)] if i % BENIGN_EVERY == 7 else _kernel_noise(rng, i)
        yield f"{stamp} {node} kernel: [{uptime:12.6f}] {msg}"


def _write_lines(path: Path, lines: Iterator[str]) -> None:
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        _write_blocks(fh, lines)


def _write_blocks(fh: TextIO, lines: Iterator[str]) -> None:
    block: list[str] = []
    for line in lines:
        block.append(line)
        if len(block) >= BLOCK_LINES:
            fh.write("\n".join(block) + "\n")
            block.clear()
    if block:
        fh.write("\n".join(block) + "\n")


def generate_noisy(out: Path, size: int, nodes: int, gpus: int, seed: int) -> None:
    """Write the noisy bundle of about ``size`` bytes into ``out``."""
    rng = random.Random(seed)
    names = [f"node-{i:03d}" for i in range(1, nodes + 1)]
    fault_node = names[len(names) // 3]
    fault_at = START + timedelta(seconds=6 * 3600)
    ranks = {n: list(range(i * gpus, (i + 1) * gpus)) for i, n in enumerate(names)}
    app_benign, _ = benign_anchor_lines(SOURCE_APP)
    kernel_benign, _ = benign_anchor_lines(SOURCE_KERNEL)
    per_node = size // nodes
    app_count = max(100, (int(per_node * (1 - KERNEL_SHARE)) - gpus * INIT_BYTES_PER_RANK) // MEAN_APP_LINE)
    kernel_count = max(50, int(per_node * KERNEL_SHARE) // MEAN_KERNEL_LINE)
    (out / "applog").mkdir(parents=True, exist_ok=True)
    (out / "syslog").mkdir(exist_ok=True)
    write_job_yaml(out, names, ranks, gpus, fault_at)
    for node in names:
        app = _app_log(rng, node, ranks[node], nodes * gpus, app_count, app_benign)
        cascade = failure_lines(node, ranks[node], fault_node, fault_at)
        _write_lines(out / "applog" / f"{node}.log", _chain(app, cascade))
        kernel = _kernel_log(rng, node, kernel_count, kernel_benign)
        fault = fault_kernel_lines(node, fault_at) if node == fault_node else []
        _write_lines(out / "syslog" / f"{node}.log", _chain(kernel, fault))


def _chain(first: Iterator[str], rest: list[str]) -> Iterator[str]:
    yield from first
    yield from rest


def main() -> None:
    """Print the benign anchor lines and the anchors no template could hide (a check of the rules)."""
    for source in (SOURCE_APP, SOURCE_KERNEL):
        lines, missed = benign_anchor_lines(source)
        print(f"{source}: {len(lines)} benign anchor lines; no benign form for {missed}")
        for line in lines:
            print(f"  {line!r}")


if __name__ == "__main__":
    main()
