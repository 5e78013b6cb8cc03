"""Atomic node-bundle spool, replacement of an earlier bundle, HTTP POST and its fallbacks."""

from __future__ import annotations

import http.server
import io
import os
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurm_attrib.connectors.spool import NodeBundle, deliver, job_key, safe_name, stage


def _bundle(parent: Path, node: str = "node-01", text: bytes = b"x") -> NodeBundle:
    bundle = NodeBundle.create(parent, node)
    bundle.write(f"syslog/{node}.log", text)
    bundle.write("collection.yaml", b"schema: 1\n")
    return bundle


def test_job_key_and_safe_names() -> None:
    assert job_key("mini", "7_3", 0) == "mini_7_3_0"
    assert job_key("", "12", 2) == "cluster_12_2"
    assert safe_name("../etc") == ".._etc" and safe_name("..") == "_" and safe_name("a b/c") == "a_b_c"


def test_staging_is_renamed_into_place(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    bundle, notes = stage(spool, tmp_path / "fallback", "mini_1_0", "node-01", http=False)
    assert bundle.staging == spool / "nodes" / "mini_1_0" / f".tmp-node-01-{os.getpid()}"
    bundle.write("syslog/node-01.log", b"line\n")
    delivery = deliver(bundle, spool, tmp_path / "fallback", "mini_1_0", "node-01")
    final = spool / "nodes" / "mini_1_0" / "node-01"
    assert delivery.destination == "spool" and delivery.path == str(final) and notes == []
    assert (final / "syslog" / "node-01.log").read_bytes() == b"line\n"
    assert sorted(p.name for p in final.parent.iterdir()) == ["node-01"]  # no staging left behind


def test_an_earlier_bundle_is_replaced(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    parent = spool / "nodes" / "k"
    deliver(_bundle(parent, text=b"old"), spool, tmp_path / "fb", "k", "node-01")
    deliver(_bundle(parent, text=b"new"), spool, tmp_path / "fb", "k", "node-01")
    assert (parent / "node-01" / "syslog" / "node-01.log").read_bytes() == b"new"
    assert sorted(p.name for p in parent.iterdir()) == ["node-01"]


def test_files_are_created_exclusively_and_not_through_links(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path / "p")
    with pytest.raises(FileExistsError):
        bundle.write("collection.yaml", b"again")
    (bundle.staging / "metrics").mkdir()
    (bundle.staging / "metrics" / "n.xml").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError):
        bundle.write("metrics/n.xml", b"data")
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write into a read-only directory")
def test_unwritable_spool_falls_back_to_the_local_dir(tmp_path: Path) -> None:
    spool = tmp_path / "ro"
    spool.mkdir(mode=0o500)
    bundle, notes = stage(spool, tmp_path / "fallback", "k", "node-01", http=False)
    delivery = deliver(bundle, spool, tmp_path / "fallback", "k", "node-01")
    assert delivery.destination == "fallback" and notes and "not writable" in notes[0]


def test_spool_that_is_a_file_falls_back_to_the_local_dir(tmp_path: Path) -> None:
    spool = tmp_path / "not-a-dir"
    spool.write_text("")
    bundle, notes = stage(spool, tmp_path / "fallback", "k", "node-01", http=False)
    bundle.write("collection.yaml", b"schema: 1\n")
    delivery = deliver(bundle, spool, tmp_path / "fallback", "k", "node-01")
    assert delivery.destination == "fallback"
    assert (tmp_path / "fallback" / "nodes" / "k" / "node-01" / "collection.yaml").is_file()
    assert any("not writable" in n for n in notes)


class _Receiver:
    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self.status = 201
        self.delay = 0.0


@pytest.fixture()
def receiver() -> Iterator[tuple[str, _Receiver]]:
    state = _Receiver()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            time.sleep(state.delay)
            state.requests.append((dict(self.headers), body))
            self.send_response(state.status)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/bundles", state
    server.shutdown()
    server.server_close()


def test_http_post_sends_a_tar_gz_with_headers(tmp_path: Path, receiver: tuple[str, _Receiver]) -> None:
    url, state = receiver
    bundle, _ = stage(tmp_path / "spool", tmp_path / "fb", "mini_1_0", "node-01", http=True)
    bundle.write("syslog/node-01.log", b"kernel line\n")
    delivery = deliver(bundle, tmp_path / "spool", tmp_path / "fb", "mini_1_0", "node-01", http_url=url)
    assert delivery.destination == "http"
    headers, body = state.requests[0]
    assert headers["X-Slurm-Attrib-Job-Key"] == "mini_1_0" and headers["X-Slurm-Attrib-Node"] == "node-01"
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
        assert tar.getnames() == ["syslog/node-01.log"]
        member = tar.extractfile("syslog/node-01.log")
        assert member is not None and member.read() == b"kernel line\n"
    assert not bundle.staging.exists() and not (tmp_path / "spool").exists()


def test_http_error_status_falls_back_to_the_spool(tmp_path: Path, receiver: tuple[str, _Receiver]) -> None:
    url, state = receiver
    state.status = 500
    bundle, _ = stage(tmp_path / "spool", tmp_path / "fb", "k", "node-01", http=True)
    bundle.write("collection.yaml", b"schema: 1\n")
    delivery = deliver(bundle, tmp_path / "spool", tmp_path / "fb", "k", "node-01", http_url=url)
    assert delivery.destination == "spool" and "HTTP 500" in delivery.notes[0]
    assert (tmp_path / "spool" / "nodes" / "k" / "node-01" / "collection.yaml").is_file()


def test_http_timeout_falls_back_within_the_timeout(tmp_path: Path, receiver: tuple[str, _Receiver]) -> None:
    url, state = receiver
    state.delay = 3.0
    bundle, _ = stage(tmp_path / "spool", tmp_path / "fb", "k", "node-01", http=True)
    bundle.write("collection.yaml", b"schema: 1\n")
    began = time.monotonic()
    delivery = deliver(bundle, tmp_path / "spool", tmp_path / "fb", "k", "node-01", http_url=url, http_timeout=0.5)
    assert time.monotonic() - began < 2.0
    assert delivery.destination == "spool"


def test_http_refused_falls_back(tmp_path: Path) -> None:
    bundle, _ = stage(tmp_path / "spool", tmp_path / "fb", "k", "node-01", http=True)
    bundle.write("collection.yaml", b"schema: 1\n")
    delivery = deliver(bundle, tmp_path / "spool", tmp_path / "fb", "k", "node-01",
                       http_url="http://127.0.0.1:9/none", http_timeout=0.5)
    assert delivery.destination == "spool"
