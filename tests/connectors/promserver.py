"""A real Prometheus for the connector tests: synthetic dcgm-exporter series written as OpenMetrics text,
turned into a TSDB by ``promtool tsdb create-blocks-from openmetrics``, served by ``prometheus`` on a
free loopback port with no scrape jobs. The series are fixed in time (:data:`EPOCH`), so the findings
are the same on every run; retention is 100 years so blocks in the past are kept.

The story the series tell (three nodes, two GPUs each, every 15 s from 09:30 to 11:30 UTC):

- ``gpu-a2`` GPU 1: DCGM_FI_DEV_XID_ERRORS 0, then 79 from 10:12:00 (with ``err_code`` following it,
  as dcgm-exporter does, so the series changes label set);
- ``gpu-a1`` GPU 0: ECC DBE volatile 0, then 2 from 10:20:00;
- ``gpu-a3`` GPU 0: ECC DBE volatile 4 throughout (from before every job);
- ``gpu-a1`` GPU 1: ECC SBE volatile 10, reset to 0 at 10:10:00 (driver reload), 1 from 10:15:00;
  its Xid gauge holds 13 throughout;
- ``gpu-a3`` GPU 1: clocks-event reasons 0x4 (SW power cap, normal) with 0x8 (HW slowdown) from
  11:08:00 to 11:20:00, at 92 C; every other GPU 0x4 (or 0) at 60 C.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable

EPOCH = datetime(2026, 11, 20, 9, 30, tzinfo=timezone.utc)
END = datetime(2026, 11, 20, 11, 30, tzinfo=timezone.utc)
STEP = 15
NODES = ("gpu-a1", "gpu-a2", "gpu-a3")
UUIDS = {(n, g): f"GPU-{i:08x}-aaaa-bbbb-cccc-{g:012d}" for i, n in enumerate(NODES, 1) for g in (0, 1)}
PCI = {0: "00000000:3B:00.0", 1: "00000000:5D:00.0"}


def at(hour: int, minute: int, second: int = 0) -> datetime:
    return datetime(2026, 11, 20, hour, minute, second, tzinfo=timezone.utc)


def missing_tools() -> str:
    """Why the real Prometheus cannot run here ("" when it can)."""
    absent = [tool for tool in ("prometheus", "promtool") if shutil.which(tool) is None]
    return f"{' and '.join(absent)} not installed (Debian: apt-get install prometheus)" if absent else ""


Value = Callable[[str, int, datetime], "float | None"]  # node, gpu, time -> value (None: no sample)


def _xid(node: str, gpu: int, t: datetime) -> float:
    if (node, gpu) == ("gpu-a2", 1) and t >= at(10, 12):
        return 79
    return 13 if (node, gpu) == ("gpu-a1", 1) else 0


def _dbe(node: str, gpu: int, t: datetime) -> float:
    if (node, gpu) == ("gpu-a1", 0):
        return 2 if t >= at(10, 20) else 0
    return 4 if (node, gpu) == ("gpu-a3", 0) else 0


def _sbe(node: str, gpu: int, t: datetime) -> float:
    if (node, gpu) != ("gpu-a1", 1):
        return 0
    return 10 if t < at(10, 10) else (0 if t < at(10, 15) else 1)


def _slowed(node: str, gpu: int, t: datetime) -> bool:
    return (node, gpu) == ("gpu-a3", 1) and at(11, 8) <= t <= at(11, 20)


def _throttle(node: str, gpu: int, t: datetime) -> float:
    return 0x4 | (0x8 if _slowed(node, gpu, t) else 0)


def _temp(node: str, gpu: int, t: datetime) -> float:
    return 92 if _slowed(node, gpu, t) else 60


def _power(node: str, gpu: int, t: datetime) -> float:
    return 310.5 if _slowed(node, gpu, t) else 550.0


SIGNALS: tuple[tuple[str, Value], ...] = (
    ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", _throttle),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", _dbe),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", _sbe),
    ("DCGM_FI_DEV_GPU_TEMP", _temp),
    ("DCGM_FI_DEV_POWER_USAGE", _power),
    ("DCGM_FI_DEV_XID_ERRORS", _xid),
)


def _labels(node: str, gpu: int, extra: str = "") -> str:
    return (f'gpu="{gpu}",UUID="{UUIDS[(node, gpu)]}",pci_bus_id="{PCI[gpu]}",device="nvidia{gpu}",'
            f'modelName="NVIDIA H100 80GB HBM3",Hostname="{node}"{extra}')


def openmetrics() -> str:
    """The whole story as one OpenMetrics text (families contiguous, one series' samples in time order).
    Every family is a gauge: dcgm-exporter's counters are not named ``_total`` as OpenMetrics wants."""
    out: list[str] = []
    times = [EPOCH + timedelta(seconds=s) for s in range(0, int((END - EPOCH).total_seconds()) + 1, STEP)]
    for metric, value in SIGNALS:
        out += [f"# HELP {metric} synthetic dcgm-exporter series", f"# TYPE {metric} gauge"]
        for node in NODES:
            for gpu in (0, 1):
                series: dict[str, list[str]] = {}
                for t in times:
                    v = value(node, gpu, t)
                    if v is None:
                        continue
                    extra = f',err_code="{int(v)}"' if metric == "DCGM_FI_DEV_XID_ERRORS" else ""
                    series.setdefault(extra, []).append(f"{metric}{{{_labels(node, gpu, extra)}}} {v:g} "
                                                        f"{int(t.timestamp())}")
                for lines in series.values():
                    out += lines
    out.append("# EOF")
    return "\n".join(out) + "\n"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class PromServer:
    url: str
    data: Path


def _ready(url: str, process: subprocess.Popen[bytes], log: Path, seconds: float) -> None:
    limit = time.monotonic() + seconds
    while time.monotonic() < limit:
        if process.poll() is not None:
            raise RuntimeError(f"prometheus exited {process.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"prometheus not ready in {seconds:.0f} s: {log.read_text()[-2000:]}")


@contextmanager
def prometheus(workdir: Path) -> Iterator[PromServer]:
    """Build the TSDB from :func:`openmetrics` and serve it; the server is killed on the way out."""
    source, data = workdir / "dcgm.om", workdir / "tsdb"
    source.write_text(openmetrics())
    subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(source), str(data)],
                   check=True, capture_output=True, timeout=120)
    config = workdir / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 15s\nscrape_configs: []\n")
    port = _free_port()
    log = workdir / "prometheus.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={data}",
             f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=100y"],
            stdout=sink, stderr=subprocess.STDOUT, cwd=workdir, env={**os.environ, "GOMAXPROCS": "2"})
    url = f"http://127.0.0.1:{port}"
    try:
        _ready(url, process, log, 30)
        yield PromServer(url, data)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
