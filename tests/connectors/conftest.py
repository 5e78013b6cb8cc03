"""Fixtures the connector tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from . import promserver
from .promserver import PromServer


@pytest.fixture(scope="session")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PromServer]:
    """One real Prometheus for the session (skipped, with the reason, where it is not installed)."""
    why = promserver.missing_tools()
    if why:
        pytest.skip(f"no real Prometheus: {why}")
    with promserver.prometheus(tmp_path_factory.mktemp("prometheus")) as server:
        yield server
