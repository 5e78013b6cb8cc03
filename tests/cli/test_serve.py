"""``slurm-attrib serve`` as a command: its defaults, and a token file others can read stops it with one
line before it listens."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from slurm_attrib.cli import build_parser
from slurm_attrib.config import load_config


def test_defaults_are_loopback_8470_and_documented(tmp_path: Path) -> None:
    args = build_parser().parse_args(["serve"])
    assert (args.host, args.port, args.demo) == (None, None, False)  # the configuration decides
    service = load_config(str(tmp_path / "absent.yaml")).service
    assert (service.host, service.port) == ("127.0.0.1", 8470)
    shipped = load_config(str(Path(__file__).resolve().parents[2] / "etc" / "slurm-attrib.yaml")).service
    assert shipped == service  # the example documents every key with its default


def test_a_token_file_others_can_read_is_refused(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("secret\n")
    tokens.chmod(0o644)
    config = tmp_path / "c.yaml"
    config.write_text(f"store:\n  path: {tmp_path / 's.sqlite'}\nservice:\n  token_file: {tokens}\n")
    done = subprocess.run([sys.executable, "-m", "slurm_attrib.cli", "serve", "--config", str(config), "--port", "1",
                           "--no-site-rules"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr == (f"slurm-attrib: error: {tokens}: tokens must be in a regular file only its owner "
                           "can read (chmod 600)\n")
    assert not (tmp_path / "s.sqlite").exists()
