"""Shared fixtures: one Engine with the bundled rules only (site rules never leak into tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_attrib.engine import Engine
from slurm_attrib.ruleset import load_ruleset

TESTS = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def engine() -> Engine:
    return Engine(load_ruleset(include_site=False))
