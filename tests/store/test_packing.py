"""Bundles in the store: packed without following symlinks, capped by size, unpacked safely."""

from __future__ import annotations

import io
import os
import tarfile
from datetime import datetime, timezone
from pathlib import Path

from slurm_attrib.data import demo_bundle
from slurm_attrib.store import Store, packing


def test_round_trip(tmp_path: Path) -> None:
    packed = packing.pack_bundle(demo_bundle(), 10**7)
    assert packed.files == 9 and not packed.capped
    assert packing.unpack_bundle(packed.data, tmp_path) == 9
    assert (tmp_path / "job.yaml").read_bytes() == (demo_bundle() / "job.yaml").read_bytes()
    assert packing.gpus_per_node_of(packed.data) == 8
    assert packing.pack_bundle(demo_bundle(), 10**7).data == packed.data  # deterministic bytes


def test_symlinks_are_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("root password")
    bundle = tmp_path / "b"
    (bundle / "syslog").mkdir(parents=True)
    (bundle / "job.yaml").write_text("job_id: 1\n")
    os.symlink(secret, bundle / "syslog" / "node-01.log")
    os.symlink(tmp_path, bundle / "applog")
    packed = packing.pack_bundle(bundle, 10**7)
    with tarfile.open(fileobj=io.BytesIO(packed.data)) as tar:
        assert tar.getnames() == ["job.yaml"]


def test_cap_leaves_out_the_largest_evidence(tmp_path: Path) -> None:
    bundle = tmp_path / "b"
    (bundle / "applog").mkdir(parents=True)
    (bundle / "job.yaml").write_text("job_id: 1\n")
    (bundle / "applog" / "big.log").write_bytes(os.urandom(50_000))
    (bundle / "applog" / "small.log").write_text("hello\n")
    packed = packing.pack_bundle(bundle, 5_000)
    assert packed.capped and packed.omitted == ("applog/big.log",) and packed.files == 2
    assert len(packed.data) <= 5_000 and packed.original_bytes > 50_000


def test_unpack_skips_escaping_names_and_links(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name in ("../evil", "/abs", "ok/file"):
            info = tarfile.TarInfo(name)
            info.size = 2
            tar.addfile(info, io.BytesIO(b"hi"))
        link = tarfile.TarInfo("link")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    dest = tmp_path / "d"
    dest.mkdir()
    assert packing.unpack_bundle(buffer.getvalue(), dest) == 1
    assert (dest / "ok" / "file").read_bytes() == b"hi" and not (tmp_path / "evil").exists()


def test_the_bytes_do_not_depend_on_the_clock(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """tarfile's "w:gz" stamps the gzip header with time.time(): the same bundle packed a second later
    differed (seen as a flaky test under load)."""
    import time

    first = packing.pack_bundle(demo_bundle(), 10**7).data
    monkeypatch.setattr(time, "time", lambda: 4_000_000_000.0)
    assert packing.pack_bundle(demo_bundle(), 10**7).data == first
    assert first[4:8] == b"\x00\x00\x00\x00"  # the gzip header's MTIME field


def test_the_names_are_kept_at_record_time_and_read_from_the_archive_for_older_bundles(tmp_path: Path) -> None:
    """The job page and `show` list a stored bundle's files: from the names recorded with it (no 16 MB
    archive decompressed per page view), and for a bundle stored before the names were kept, from the
    archive, with the same answer."""
    packed = packing.pack_bundle(demo_bundle(), 10**7)
    assert list(packed.names) == packing.member_names(packed.data) and "job.yaml" in packed.names
    diag = {"job": {"job_id": "1", "cluster": "c", "nodes": ["node-01"]}, "status": "unattributed",
            "category": "unknown", "responsible": "unknown", "culprit_nodes": [], "ruleset": {"hash": "r"}}
    with Store.open(tmp_path / "s.sqlite") as store:
        store.record(diag, datetime(2026, 12, 1, tzinfo=timezone.utc), bundle=packed)
        (row,) = store.find("1")
        recorded = store.bundle_info(row["id"])
        store.db.execute("UPDATE bundles SET names = NULL")
        store.db.conn.commit()
        older = store.bundle_info(row["id"])
    assert recorded is not None and older is not None
    assert recorded["names"] == older["names"] == sorted(packed.names)
    assert "data" not in recorded
