"""The node-side command group registers its commands with help."""

from __future__ import annotations

import argparse

from slurm_attrib.cli.node import register


def test_commands_register_with_help() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    register(sub)
    for name in ("collect", "epilog-config"):
        assert sub.choices[name].description
    args = parser.parse_args(["collect", "--spool", "/x", "--budget", "3"])
    assert args.spool == "/x" and args.budget == 3.0 and args.func.__name__ == "cmd_collect"
