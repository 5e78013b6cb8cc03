"""The service as users run it: ``slurm-attrib serve`` in its own process on a loopback port, with a
configuration of its own (token file, spool, store), called over HTTP and stopped at the end."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pytest

TESTS = Path(__file__).resolve().parents[1]
GOLDEN = TESTS / "golden"
TOKEN = "test-write-token-1f0c"
FILE_TOKEN = "file-token-77aa"
NOW = "2026-12-01T00:00:00Z"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Reply:
    status: int
    body: bytes
    headers: dict[str, str]

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Server:
    """A running ``slurm-attrib serve``; :meth:`call` never raises on an HTTP error status."""

    url: str
    process: subprocess.Popen[bytes]
    root: Path
    log: Path
    opener: Optional[urllib.request.OpenerDirector] = None

    @property
    def spool(self) -> Path:
        return self.root / "spool"

    @property
    def store(self) -> Path:
        """The configured store, or the temporary one ``--demo`` made (its path is in the log)."""
        for line in self.log.read_text().splitlines():
            if line.startswith("slurm-attrib: demo store "):
                return Path(line.removeprefix("slurm-attrib: demo store "))
        return self.root / "store.sqlite"

    def call(self, method: str, path: str, body: Optional[bytes] = None, token: Optional[str] = None,
             headers: Optional[dict[str, str]] = None, timeout: float = 60.0) -> Reply:
        sent = dict(headers or {})
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        request = urllib.request.Request(self.url + path, data=body, headers=sent, method=method)
        opener = self.opener or urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(request, timeout=timeout) as response:
                return Reply(response.status, response.read(), dict(response.headers))
        except urllib.error.HTTPError as exc:
            return Reply(exc.code, exc.read(), dict(exc.headers))

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def write_config(root: Path, extra: str = "") -> Path:
    tokens = root / "tokens"
    tokens.write_text(f"# test tokens\n{FILE_TOKEN}\n")
    tokens.chmod(0o600)
    config = root / "slurm-attrib.yaml"
    config.write_text(f"rules_dir: {root / 'no-rules.d'}\n"
                      f"spool:\n  dir: {root / 'spool'}\n"
                      f"store:\n  path: {root / 'store.sqlite'}\n"
                      f"service:\n  token_file: {tokens}\n  node_networks: [127.0.0.0/8]\n"
                      f"  rate_per_s: 0\n{extra}")
    return config


def start_server(root: Path, *args: str, config_extra: str = "", env: Optional[dict[str, str]] = None,
                 scheme: str = "http", opener: Optional[urllib.request.OpenerDirector] = None) -> Server:
    """Start ``slurm-attrib serve`` with a configuration under ``root``; wait for /healthz."""
    root.mkdir(parents=True, exist_ok=True)
    config = write_config(root, config_extra)
    port = free_port()
    log = root / "server.log"
    full_env = {**os.environ, "SLURM_ATTRIB_SERVICE_TOKEN": TOKEN, **(env or {})}
    full_env.pop("SLURM_ATTRIB_STORE", None)
    full_env.pop("SLURM_ATTRIB_SPOOL", None)
    with log.open("wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "slurm_attrib.cli", "serve", "--config", str(config),
                                    "--port", str(port), "--no-site-rules", "--now", NOW, *args],
                                   stdout=out, stderr=subprocess.STDOUT, env=full_env)
    server = Server(f"{scheme}://127.0.0.1:{port}", process, root, log, opener)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"server exited {process.returncode}: {log.read_text()}")
        try:
            if server.call("GET", "/healthz", timeout=2).status == 200:
                return server
        except OSError:
            pass
        time.sleep(0.2)
    server.stop()
    raise AssertionError(f"server did not answer in 60 s: {log.read_text()}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """An empty store, the test tokens, node bundles accepted from loopback without a token."""
    running = start_server(tmp_path_factory.mktemp("service"))
    yield running
    running.stop()


@pytest.fixture(scope="module")
def demo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``serve --demo``: the demo and golden verdicts in a temporary store."""
    running = start_server(tmp_path_factory.mktemp("demo"), "--demo")
    yield running
    running.stop()


@pytest.fixture(scope="module")
def strict_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """Small caps, no networks trusted for node bundles, reads need a token, a low rate."""
    running = start_server(tmp_path_factory.mktemp("strict"), config_extra=(
        "  max_request_bytes: 200000\n  max_entries: 6\n  max_unpacked_bytes: 300000\n  node_networks: []\n"
        "  read_token_required: true\n  rate_per_s: 2\n  rate_burst: 40\n"))
    yield running
    running.stop()


def tar_gz(files: dict[str, bytes], prefix: str = "") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(prefix + name)
            info.size = len(data)
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def bundle_tar(bundle: Path, prefix: str = "") -> bytes:
    """A bundle directory as the tar.gz a client would POST."""
    files = {p.relative_to(bundle).as_posix(): p.read_bytes() for p in sorted(bundle.rglob("*")) if p.is_file()}
    return tar_gz(files, prefix)
