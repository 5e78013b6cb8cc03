"""What a hostile or broken client sends: archives that would write outside their folder, links and
devices, gzip bombs, too many members, oversized bodies, floods; and text that must not become HTML."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import tempfile
from pathlib import Path

import pytest

from slurm_attrib.service.tarsafe import ArchiveRefused, Limits, extract

from .conftest import GOLDEN, TOKEN, Server, bundle_tar, tar_gz

JOB_YAML = (GOLDEN / "05_cuda_oom" / "bundle" / "job.yaml").read_bytes()


def crafted(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("job.yaml")
        info.size = len(JOB_YAML)
        tar.addfile(info, io.BytesIO(JOB_YAML))
        for member, data in members:
            tar.addfile(member, io.BytesIO(data) if data else None)
    return buffer.getvalue()


def member(name: str, kind: bytes = tarfile.REGTYPE, data: bytes = b"", target: str = "") -> tuple[tarfile.TarInfo,
                                                                                                      bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.linkname = kind, len(data), target
    return info, data


def gzip_bomb(unpacked: int) -> bytes:
    """A tar.gz whose one member is ``unpacked`` zero bytes (about a thousandth of that compressed)."""
    raw = io.BytesIO()
    with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9) as gz:
        header = tarfile.TarInfo("syslog/zeros.log")
        header.size = unpacked
        gz.write(header.tobuf(format=tarfile.GNU_FORMAT))
        block = bytes(1 << 20)
        for _ in range(unpacked >> 20):
            gz.write(block)
    return raw.getvalue()


HOSTILE = {
    "traversal": crafted(member("../../escaped.txt", data=b"pwned")),
    "traversal inside": crafted(member("syslog/../../escaped.txt", data=b"pwned")),
    "absolute": crafted(member("/tmp/slurm-attrib-escaped.txt", data=b"pwned")),
    "symlink": crafted(member("syslog/node.log", tarfile.SYMTYPE, target="/etc/shadow")),
    "hard link": crafted(member("syslog/node.log", tarfile.LNKTYPE, target="job.yaml")),
    "device": crafted(member("syslog/dev", tarfile.CHRTYPE)),
    "fifo": crafted(member("syslog/fifo", tarfile.FIFOTYPE)),
    "twice": crafted(member("syslog/a.log", data=b"1\n"), member("syslog/a.log", data=b"2\n")),
}


def leftovers() -> set[str]:
    return {p for p in os.listdir(tempfile.gettempdir()) if p.startswith("slurm-attrib-upload-")}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_archives_are_refused_with_one_line(server: Server, tmp_path: Path, name: str) -> None:
    before = leftovers()
    reply = server.call("POST", "/v1/diagnoses?store=true", HOSTILE[name], TOKEN)
    assert reply.status == 400, reply.body
    detail = reply.json()["detail"]
    assert detail.startswith("archive refused: ") and "\n" not in detail
    assert not Path("/tmp/slurm-attrib-escaped.txt").exists()
    assert not (server.root.parent / "escaped.txt").exists()
    assert leftovers() <= before  # the scratch folder went with the request
    assert server.call("GET", "/v1/diagnoses/orion/318790").status == 404


def test_a_gzip_bomb_is_refused_before_it_fills_anything(server: Server) -> None:
    bomb = gzip_bomb(2 << 30)  # 2 GiB of zeros in about 2 MB
    assert len(bomb) < 4 << 20
    reply = server.call("POST", "/v1/diagnoses", bomb, TOKEN)
    assert reply.status == 413
    assert reply.json() == {"detail": "archive refused: unpacks to more than 200 times its compressed size"}


def test_not_a_gzip_is_400(server: Server) -> None:
    reply = server.call("POST", "/v1/diagnoses", b"this is not a tar", TOKEN)
    assert reply.status == 400 and reply.json()["detail"].startswith("not a gzip'd tar")


def test_caps_on_members_size_and_body(strict_server: Server) -> None:
    many = tar_gz({"job.yaml": JOB_YAML, **{f"applog/{i}.log": b"x\n" for i in range(6)}})
    reply = strict_server.call("POST", "/v1/diagnoses", many, TOKEN)
    assert (reply.status, reply.json()) == (413, {"detail": "archive refused: more than 6 members"})
    big = tar_gz({"job.yaml": JOB_YAML, "applog/big.log": os.urandom(160_000).hex().encode()})
    reply = strict_server.call("POST", "/v1/diagnoses", big, TOKEN)
    assert reply.status == 413 and "300000 bytes" in reply.json()["detail"]
    reply = strict_server.call("POST", "/v1/diagnoses", os.urandom(200_001), TOKEN)
    assert (reply.status, reply.json()) == (413, {"detail": "request body larger than 200000 bytes"})


def test_reads_can_require_a_token(strict_server: Server) -> None:
    assert strict_server.call("GET", "/v1/rules").status == 401
    assert strict_server.call("GET", "/", token="wrong").status == 401
    assert strict_server.call("GET", "/v1/rules", token=TOKEN).status == 200
    assert strict_server.call("GET", "/healthz").status == 200  # for the load balancer


def test_a_flood_from_one_address_gets_429(strict_server: Server) -> None:
    codes = [strict_server.call("GET", "/healthz").status for _ in range(80)]
    assert 429 in codes and codes[0] == 200
    assert set(codes) == {200, 429}


def test_extract_writes_every_file_or_stops_at_a_cap(tmp_path: Path) -> None:
    bundle = GOLDEN / "05_cuda_oom" / "bundle"
    body = bundle_tar(bundle)
    (tmp_path / "ok").mkdir()
    (tmp_path / "few").mkdir()
    files = sorted(p.relative_to(bundle) for p in bundle.rglob("*") if p.is_file())
    assert extract(io.BytesIO(body), len(body), tmp_path / "ok", Limits()) == len(files)
    assert all((tmp_path / "ok" / f).read_bytes() == (bundle / f).read_bytes() for f in files)
    with pytest.raises(ArchiveRefused) as refused:
        extract(io.BytesIO(body), len(body), tmp_path / "few", Limits(max_entries=1))
    assert refused.value.status == 413


def test_user_text_is_escaped_in_html(server: Server, tmp_path: Path) -> None:
    bundle = tmp_path / "xss"
    job = JOB_YAML.decode().replace("job_id: '318790'", "job_id: '900001'")
    job = "\n".join(("user: '<script>alert(1)</script>'" if line.startswith("user:") else line)
                    for line in job.splitlines()) + "\n"
    (bundle / "applog").mkdir(parents=True)
    (bundle / "job.yaml").write_text(job)
    (bundle / "applog" / "node-01.log").write_text(
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory. <img src=x onerror=alert(2)>\n")
    assert server.call("POST", "/v1/diagnoses?store=true", bundle_tar(bundle), TOKEN).status == 200
    page = server.call("GET", "/jobs/orion/900001")
    assert page.status == 200, page.body
    html = page.body.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script" not in html and "<img" not in html
    assert "script-src" not in page.headers["content-security-policy"]
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
