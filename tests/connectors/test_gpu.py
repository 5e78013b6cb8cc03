"""GPU gatherers fed with real captured output (tests/data/gpu) through fakes, plus a real local scrape."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurm_attrib.connectors.gpu import (
    DcgmExporterSource,
    DcgmiSource,
    NvidiaSmiSource,
    UrllibFetcher,
    parse_nvidia_smi_xml,
)
from slurm_attrib.connectors.runner import CommandResult, FakeRunner

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu"
A100 = (DATA / "nvidia-smi-q-x.a100-sxm4-mig.xml").read_bytes()
PROM = (DATA / "dcgm-exporter.prom").read_bytes()
H200 = (DATA / "h200-driver580" / "nvidia-smi-q-x.xml").read_bytes()  # captured by tests/data/gpu/capture.py


def test_parse_real_a100_xml() -> None:
    facts = parse_nvidia_smi_xml(A100)
    assert facts["driver_version"] == "535.54.03"
    assert facts["cuda_version"] == "12.2"
    assert facts["gpu_model"] == "NVIDIA A100-SXM4-80GB"
    assert facts["gpus"] == [{"index": 0, "pci": "0000:01:00", "uuid": "GPU-513536b6-7d19-9063-b049-1e69664bb298",
                              "name": "NVIDIA A100-SXM4-80GB", "minor_number": 1, "serial": "1650522003820"}]


def test_parse_real_h200_xml_of_driver_580() -> None:
    """nvsmi_device_v13.dtd, as driver 580 writes it on a VM (the GPU at bus 00, device 06)."""
    facts = parse_nvidia_smi_xml(H200)
    assert facts["driver_version"] == "580.159.04"
    assert facts["cuda_version"] == "13.0"
    assert facts["gpus"] == [{"index": 0, "pci": "0000:00:06", "uuid": "GPU-be25fdc8-9fdf-4565-5896-3256e1307dfa",
                              "name": "NVIDIA H200", "minor_number": 0, "serial": "1653924120792"}]


def test_nvidia_smi_ok_keeps_the_raw_xml() -> None:
    runner = FakeRunner({"nvidia-smi": A100})
    snap = NvidiaSmiSource(runner).gather(timeout=3, cap=1 << 20)
    assert snap.state == "ok" and snap.data == A100
    assert snap.facts["gpus"][0]["pci"] == "0000:01:00"
    assert runner.calls == [("nvidia-smi", "-q", "-x")]


def test_nvidia_smi_hung_is_a_timeout_missing_is_skipped() -> None:
    assert NvidiaSmiSource(FakeRunner({"nvidia-smi": "hang"})).gather(3, 1 << 20).state == "timeout"
    assert NvidiaSmiSource(FakeRunner({})).gather(3, 1 << 20).state == "skipped"


def test_nvidia_smi_hung_for_real_is_bounded(tmp_path: Path) -> None:
    from slurm_attrib.connectors.runner import SubprocessRunner

    tool = tmp_path / "nvidia-smi"
    tool.write_text("#!/bin/sh\nexec /bin/sleep 60\n")
    tool.chmod(0o755)
    began = time.monotonic()
    snap = NvidiaSmiSource(SubprocessRunner(), command=str(tool)).gather(timeout=0.5, cap=1 << 20)
    assert snap.state == "timeout" and time.monotonic() - began < 1.5


@pytest.mark.parametrize("garbage", [b"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
                                     b"<html><body>nope</body></html>", b"<nvidia_smi_log><gpu><pci>"])
def test_nvidia_smi_garbage_is_error(garbage: bytes) -> None:
    snap = NvidiaSmiSource(FakeRunner({"nvidia-smi": garbage})).gather(3, 1 << 20)
    assert snap.state == "error" and snap.data == garbage


def test_nvidia_smi_non_zero_exit_is_error() -> None:
    result = CommandResult("error", b"No devices were found\n", 6, "nvidia-smi: exit status 6")
    snap = NvidiaSmiSource(FakeRunner({"nvidia-smi": result})).gather(3, 1 << 20)
    assert snap.state == "error" and "exit status 6" in snap.reason


def test_nvidia_smi_huge_output_is_capped_and_error() -> None:
    snap = NvidiaSmiSource(FakeRunner({"nvidia-smi": A100 * 10})).gather(3, cap=4096)
    assert snap.state == "error" and len(snap.data) == 4096 and "larger than" in snap.reason


def test_dcgmi_runs_health_and_discovery_with_headers() -> None:
    runner = FakeRunner({"dcgmi": lambda argv: f"output of {' '.join(argv)}\n".encode()})
    snap = DcgmiSource(runner).gather(3, 1 << 20)
    assert snap.state == "ok"
    assert snap.data.splitlines() == [b"==> dcgmi health -c (ok) <==", b"output of dcgmi health -c",
                                      b"==> dcgmi discovery -l (ok) <==", b"output of dcgmi discovery -l"]


def test_dcgmi_states() -> None:
    assert DcgmiSource(FakeRunner({})).gather(3, 100).state == "skipped"
    assert DcgmiSource(FakeRunner({"dcgmi": "hang"})).gather(3, 100).state == "timeout"
    failed = CommandResult("error", b"Error: unable to establish a connection to the specified host: localhost\n", 255,
                           "dcgmi: exit status 255")
    snap = DcgmiSource(FakeRunner({"dcgmi": failed})).gather(3, 1000)
    assert snap.state == "error" and b"unable to establish" in snap.data


class _Fetcher:
    def __init__(self, body: bytes = b"", exc: Exception | None = None) -> None:
        self.body, self.exc = body, exc

    def get(self, url: str, timeout: float, max_bytes: int) -> tuple[bytes, bool]:
        if self.exc:
            raise self.exc
        return self.body[:max_bytes], len(self.body) > max_bytes


def test_exporter_real_sample_ok() -> None:
    snap = DcgmExporterSource(_Fetcher(PROM), "http://127.0.0.1:9400/metrics").gather(3, 1 << 20)
    assert snap.state == "ok" and snap.data == PROM


def test_exporter_states() -> None:
    url = "http://127.0.0.1:9400/metrics"
    assert DcgmExporterSource(_Fetcher(), "").gather(3, 100).state == "skipped"
    assert DcgmExporterSource(_Fetcher(b""), url).gather(3, 100).state == "empty"
    assert DcgmExporterSource(_Fetcher(b"<html>502 Bad Gateway</html>\n"), url).gather(3, 100).state == "error"
    assert DcgmExporterSource(_Fetcher(exc=TimeoutError("timed out")), url).gather(3, 100).state == "timeout"
    assert DcgmExporterSource(_Fetcher(exc=ConnectionRefusedError(111, "refused")), url).gather(3, 100).state == "error"
    capped = DcgmExporterSource(_Fetcher(PROM), url).gather(3, 300)
    assert capped.state == "ok" and len(capped.data) <= 300 and capped.data.endswith(b"\n")


@pytest.fixture()
def exporter() -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/slow":
                time.sleep(2)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(PROM)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_exporter_scrape_over_loopback(exporter: str) -> None:
    snap = DcgmExporterSource(UrllibFetcher(), exporter + "/metrics").gather(3, 1 << 20)
    assert snap.state == "ok" and snap.data == PROM


def test_exporter_slow_endpoint_is_a_timeout(exporter: str) -> None:
    began = time.monotonic()
    snap = DcgmExporterSource(UrllibFetcher(), exporter + "/slow").gather(0.5, 1 << 20)
    assert snap.state == "timeout" and time.monotonic() - began < 1.5
