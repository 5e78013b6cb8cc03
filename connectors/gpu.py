"""GPU snapshot gatherers: ``nvidia-smi -q -x``, ``dcgmi`` and a local dcgm-exporter scrape.

Each gatherer runs its tool once through an injected runner (or fetcher), bounded in time and
bytes, and returns the raw output plus a state. :func:`parse_nvidia_smi_xml` turns the XML into the
node facts the engine reads: the driver version (selects the XID 144-150 decode branch) and the GPU
list (index, PCI address ``dddd:bb:dd``, UUID) that maps an Xid's PCI address to a GPU.
"""

from __future__ import annotations

import re
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any, Protocol

from .base import BundleWriter, Limits, SourceCoverage, Window, Workload
from .runner import CommandResult, CommandRunner
from .spool import safe_name

__all__ = [
    "DcgmExporterSource",
    "DcgmiSource",
    "GpuSnapshot",
    "HttpFetcher",
    "NvidiaSmiSource",
    "UrllibFetcher",
    "parse_nvidia_smi_xml",
]

# https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format
_PROM_LINE = re.compile(rb"^(?:#.*|[A-Za-z_:][A-Za-z0-9_:]*(?:\{.*\})?[ \t]+\S+(?:[ \t]+-?\d+)?)?[ \t]*\r?$")


@dataclass(frozen=True)
class GpuSnapshot:
    """Raw output of one GPU tool, its state, and (nvidia-smi only) the facts parsed from it."""

    state: str
    data: bytes
    reason: str
    seconds: float
    facts: dict[str, Any] = field(default_factory=dict)

    def write(self, source: str, bundle: BundleWriter, rel: str, query: str) -> SourceCoverage:
        """Write the raw output (whatever the state, when there is any) as ``rel``; the coverage line."""
        written = bundle.write(rel, self.data) if self.data else 0
        return SourceCoverage(source, self.state, self.reason, (rel,) if self.data else (), written, self.seconds,
                              query, facts=self.facts)


def parse_nvidia_smi_xml(data: bytes) -> dict[str, Any]:
    """``driver_version``, ``cuda_version``, ``gpu_model`` and ``gpus: [{index, pci, uuid, ...}]``.

    Raises ValueError when ``data`` is not an ``nvidia_smi_log`` document.
    """
    from slurm_attrib.nvidia.parse import normalise_pci

    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise ValueError(f"not XML: {exc}") from None
    if root.tag != "nvidia_smi_log":
        raise ValueError(f"not nvidia-smi XML (root element {root.tag!r})")
    gpus = []
    for index, gpu in enumerate(root.findall("gpu")):
        bus_id = gpu.findtext("pci/pci_bus_id") or gpu.get("id") or ""
        try:
            pci = normalise_pci(bus_id)
        except ValueError:
            raise ValueError(f"GPU {index}: PCI address {bus_id!r} not understood") from None
        entry: dict[str, Any] = {"index": index, "pci": pci, "uuid": (gpu.findtext("uuid") or "").strip()}
        for key, path in (("name", "product_name"), ("minor_number", "minor_number"), ("serial", "serial")):
            text = (gpu.findtext(path) or "").strip()
            if text and text != "N/A":
                entry[key] = int(text) if key == "minor_number" and text.isdigit() else text
        gpus.append(entry)
    facts: dict[str, Any] = {"gpus": gpus}
    for key in ("driver_version", "cuda_version"):
        text = (root.findtext(key) or "").strip()
        if text:
            facts[key] = text
    if gpus and gpus[0].get("name"):
        facts["gpu_model"] = gpus[0]["name"]
    return facts


class NvidiaSmiSource:
    """``nvidia-smi -q -x``: the full XML report (written as metrics/NODE.xml) and facts from it."""

    name = "nvidia_smi"

    def __init__(self, runner: CommandRunner, command: str = "nvidia-smi") -> None:
        self.runner = runner
        self.command = command

    def collect(self, workload: Workload, window: Window, bundle: BundleWriter, limits: Limits) -> SourceCoverage:
        snap = self.gather(limits.seconds, limits.max_bytes)
        return snap.write(self.name, bundle, f"metrics/{safe_name(workload.node)}.xml", f"{self.command} -q -x")

    def gather(self, timeout: float, cap: int) -> GpuSnapshot:
        result = self.runner.run([self.command, "-q", "-x"], timeout, cap)
        if result.state != "ok":
            return GpuSnapshot(result.state, result.stdout, result.reason, result.seconds)
        if result.truncated:
            return GpuSnapshot("error", result.stdout, f"output larger than {cap} bytes; cut", result.seconds)
        if not result.stdout.strip():
            return GpuSnapshot("empty", b"", "nvidia-smi printed nothing", result.seconds)
        try:
            facts = parse_nvidia_smi_xml(result.stdout)
        except ValueError as exc:
            return GpuSnapshot("error", result.stdout, str(exc), result.seconds)
        return GpuSnapshot("ok", result.stdout, f"{len(facts['gpus'])} GPU(s)", result.seconds, facts)


class DcgmiSource:
    """``dcgmi health -c`` and ``dcgmi discovery -l``, written together as metrics/NODE.dcgm.txt.

    dcgmi needs a running nv-hostengine; without one it exits non-zero and the source is ``error``.
    """

    COMMANDS = (("health", "-c"), ("discovery", "-l"))
    name = "dcgmi"

    def __init__(self, runner: CommandRunner, command: str = "dcgmi") -> None:
        self.runner = runner
        self.command = command

    def collect(self, workload: Workload, window: Window, bundle: BundleWriter, limits: Limits) -> SourceCoverage:
        snap = self.gather(limits.seconds, limits.max_bytes)
        query = "; ".join(" ".join((self.command, *args)) for args in self.COMMANDS)
        return snap.write(self.name, bundle, f"metrics/{safe_name(workload.node)}.dcgm.txt", query)

    def gather(self, timeout: float, cap: int) -> GpuSnapshot:
        began = time.monotonic()
        if self.runner.which(self.command) is None:
            return GpuSnapshot("skipped", b"", f"{self.command}: not found", 0.0)
        parts: list[bytes] = []
        results: list[CommandResult] = []
        for args in self.COMMANDS:
            left = timeout - (time.monotonic() - began)
            result = self.runner.run([self.command, *args], left, max(0, cap - sum(map(len, parts))))
            results.append(result)
            header = f"==> {self.command} {' '.join(args)} ({result.state}) <==\n".encode()
            parts.append(header + result.stdout + (b"" if result.stdout.endswith(b"\n") else b"\n"))
            if result.state == "timeout":
                break
        states = [r.state for r in results]
        state = "timeout" if "timeout" in states else "ok" if all(s == "ok" for s in states) else "error"
        reason = "; ".join(r.reason for r in results if r.reason)
        return GpuSnapshot(state, b"".join(parts), reason, time.monotonic() - began)


class HttpFetcher(Protocol):
    """GETs ``url`` within ``timeout`` seconds, at most ``max_bytes``: (body, truncated)."""

    def get(self, url: str, timeout: float, max_bytes: int) -> tuple[bytes, bool]: ...


class UrllibFetcher:
    """The real fetcher (stdlib urllib; no proxy: the exporter is local)."""

    def get(self, url: str, timeout: float, max_bytes: int) -> tuple[bytes, bool]:
        import urllib.request  # imported here: urllib costs ~40 ms of the collector's start

        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(url, timeout=timeout) as response:
            body: bytes = response.read(max_bytes + 1)
        return body[:max_bytes], len(body) > max_bytes


class DcgmExporterSource:
    """A scrape of the node's dcgm-exporter (Prometheus text), written as metrics/NODE.prom."""

    name = "dcgm_exporter"

    def __init__(self, fetcher: HttpFetcher, url: str) -> None:
        self.fetcher = fetcher
        self.url = url

    def collect(self, workload: Workload, window: Window, bundle: BundleWriter, limits: Limits) -> SourceCoverage:
        snap = self.gather(limits.seconds, limits.max_bytes)
        return snap.write(self.name, bundle, f"metrics/{safe_name(workload.node)}.prom", self.url)

    def gather(self, timeout: float, cap: int) -> GpuSnapshot:
        began = time.monotonic()
        if not self.url:
            return GpuSnapshot("skipped", b"", "no dcgm-exporter URL configured", 0.0)
        if timeout <= 0:
            return GpuSnapshot("skipped", b"", "no time left in the budget", 0.0)
        try:
            body, truncated = self.fetcher.get(self.url, timeout, cap)
        except TimeoutError:
            return GpuSnapshot("timeout", b"", f"{self.url}: no answer within {timeout:.1f} s",
                               time.monotonic() - began)
        except (OSError, ValueError) as exc:  # urllib's URLError is an OSError
            state = "timeout" if "timed out" in str(exc) else "error"
            return GpuSnapshot(state, b"", f"{self.url}: {exc}", time.monotonic() - began)
        seconds = time.monotonic() - began
        if truncated:
            body = body[: body.rfind(b"\n") + 1]
        if not body.strip():
            return GpuSnapshot("empty", b"", "the exporter returned no samples", seconds)
        bad = next((line for line in body.splitlines()[:50] if not _PROM_LINE.match(line)), None)
        if bad is not None:
            return GpuSnapshot("error", body, f"not Prometheus text: {bad[:80]!r}", seconds)
        reason = f"output larger than {cap} bytes; head kept" if truncated else ""
        return GpuSnapshot("ok", body, reason, seconds)
