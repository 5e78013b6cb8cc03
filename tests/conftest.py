"""Shared fixtures: one Engine with the bundled rules only (site rules never leak into tests)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurm_attrib.diskcache import CACHE_ENV
from slurm_attrib.engine import Engine
from slurm_attrib.ruleset import load_ruleset

TESTS = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def engine() -> Engine:
    return Engine(load_ruleset(include_site=False))


@pytest.fixture(scope="session", autouse=True)
def prefilter_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Compiled prefilter databases and parsed rules go to a folder of the test session, never the user's ~/.cache
    (the CLI tests' subprocesses inherit it)."""
    before = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = str(tmp_path_factory.mktemp("prefilter-cache"))
    yield
    if before is None:
        os.environ.pop(CACHE_ENV, None)
    else:
        os.environ[CACHE_ENV] = before
