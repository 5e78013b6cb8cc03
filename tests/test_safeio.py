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
