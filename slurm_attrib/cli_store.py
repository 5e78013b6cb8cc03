"""Store commands of the CLI (show, query, nodes, stats, replay, sweep); filled in by the store work."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    """Add the store commands to the top-level subparsers."""


def record_if_asked(args: argparse.Namespace, diagnosis: Any, bundle: Any) -> None:
    """`diagnose --store PATH` records the diagnosis; without a store it does nothing."""
