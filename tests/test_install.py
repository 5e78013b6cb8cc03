"""The installed environment has the compiled prefilter wherever PyPI has wheels for it (issue 10):
``pip install .`` must give the speed CI measures, not the pure-``re`` fallback."""

from __future__ import annotations

import importlib
import importlib.metadata

import pytest
from packaging.requirements import Requirement

from slurm_attrib.engine import prefilter
from slurm_attrib.ruleset import load_ruleset

FAST = ("hyperscan", "numpy")


def _default_requirements() -> dict[str, Requirement]:
    """The installed distribution's requirements that no extra asks for, by name."""
    found = {}
    for text in importlib.metadata.requires("slurm-attrib") or []:
        req = Requirement(text)
        if req.marker is None or "extra" not in str(req.marker):
            found[req.name] = req
    return found


def test_the_default_install_asks_for_the_fast_path() -> None:
    assert set(FAST) <= set(_default_requirements())


@pytest.mark.parametrize("name", FAST)
def test_what_the_markers_ask_for_here_is_installed(name: str) -> None:
    req = _default_requirements()[name]
    if req.marker is not None and not req.marker.evaluate():
        pytest.skip(f"no {name} wheels for this platform: the pure fallback runs")
    importlib.import_module(name)


def test_the_scan_uses_hyperscan_where_it_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    req = _default_requirements()["hyperscan"]
    if req.marker is not None and not req.marker.evaluate():
        pytest.skip("no hyperscan wheels for this platform: the re prefilter runs")
    monkeypatch.delenv("SLURM_ATTRIB_PREFILTER", raising=False)
    assert prefilter.kind() == "hyperscan"
    rules = [r for r in load_ruleset(include_site=False).rules if r.match]
    assert isinstance(prefilter.build(rules), prefilter.HyperscanPrefilter)
