"""Token files: regular, owner-only, checked before they are opened."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from slurm_attrib.errors import ConfigError
from slurm_attrib.tokenfile import read_token_file


def test_tokens_one_a_line_comments_skipped(tmp_path: Path) -> None:
    path = tmp_path / "t"
    path.write_text("# tokens\n a \n\nb\n")
    path.chmod(0o600)
    assert read_token_file(str(path)) == ["a", "b"]
    assert read_token_file(str(tmp_path / "missing")) == []


def test_a_fifo_is_refused_without_being_opened(tmp_path: Path) -> None:
    """Opening a FIFO for reading blocks until a writer comes: the type is checked first."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(ConfigError, match="regular file"):
        read_token_file(str(fifo))
