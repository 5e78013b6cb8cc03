"""Slurm commands of the CLI (finalize, collect, enqueue); filled in by the Slurm integration work."""

from __future__ import annotations

from typing import Any


def register(sub: Any) -> None:
    """Add the Slurm-facing commands to the top-level subparsers."""
