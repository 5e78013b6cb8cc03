"""Untrusted paths: symlinks and FIFOs are refused without blocking; size limits hold."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from slurm_attrib.safeio import open_regular, read_regular


def test_regular_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"abc")
    assert read_regular(path) == b"abc"
    with open_regular(path) as handle:
        assert handle.read() == b"abc"


def test_symlink_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "secret"
    target.write_bytes(b"root only")
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(OSError):
        read_regular(link)


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        open_regular(fifo)


def test_limit(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 11)
    assert read_regular(path, 11) == b"x" * 11
    with pytest.raises(ValueError, match="larger than 10 bytes"):
        read_regular(path, 10)


def test_a_fifo_is_never_opened(tmp_path: Path) -> None:
    """A writer blocked in open() is released by any reader: refusing after opening is too late
    (opening /dev/watchdog arms it)."""
    import subprocess
    import time

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    marker = tmp_path / "released"
    writer = subprocess.Popen(["sh", "-c", f"exec 3>'{fifo}'; touch '{marker}'"])
    try:
        with pytest.raises(OSError, match="not a regular file"):
            open_regular(fifo)
        time.sleep(0.2)
        assert not marker.exists()
    finally:
        writer.kill()
        writer.wait()


def test_a_symlink_is_refused_with_eloop(tmp_path: Path) -> None:
    import errno

    (tmp_path / "target").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    with pytest.raises(OSError) as caught:
        open_regular(tmp_path / "link")
    assert caught.value.errno == errno.ELOOP


def test_copy_regular_streams_refuses_large_files_and_never_overwrites(tmp_path: Path) -> None:
    from slurm_attrib.safeio import copy_regular

    source = tmp_path / "src"
    source.write_bytes(b"y" * 3000)
    assert copy_regular(source, tmp_path / "dst", 3000) == 3000
    assert (tmp_path / "dst").read_bytes() == b"y" * 3000
    with pytest.raises(ValueError, match="more than 2999"):
        copy_regular(source, tmp_path / "dst2", 2999)
    assert not (tmp_path / "dst2").exists()
    with pytest.raises(FileExistsError):
        copy_regular(source, tmp_path / "dst", 3000)
    (tmp_path / "planted").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(FileExistsError):
        copy_regular(source, tmp_path / "planted", 3000)
    assert not (tmp_path / "elsewhere").exists()
