"""ruff and mypy are part of the test suite: a lint failure fails the build like any test."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str) -> str:
    local = Path(sys.executable).parent / name
    found = str(local) if local.exists() else shutil.which(name)
    if not found:
        pytest.skip(f"{name} is not installed (pip install -e '.[test]')")
    return found


def test_ruff_clean() -> None:
    paths = [p for p in ("slurm_attrib", "tests", "bench", "connectors") if (ROOT / p).exists()]
    result = subprocess.run([_tool("ruff"), "check", *paths], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_clean() -> None:
    """One run over everything: slurm_attrib/connectors is a symlink to connectors/, so mypy checks the
    connectors as the slurm_attrib.connectors modules they are installed as."""
    result = subprocess.run([_tool("mypy")], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_package_is_installed() -> None:
    """A subpackage missing from setup.cfg works in an editable install and breaks `pip install .`."""
    import configparser

    root = Path(__file__).resolve().parents[1]
    config = configparser.ConfigParser()
    config.read(root / "setup.cfg")
    listed = set(config["options"]["packages"].split())
    found = {".".join(p.parent.relative_to(root).parts) for p in (root / "slurm_attrib").rglob("__init__.py")}
    assert found <= listed, sorted(found - listed)


# Test folders that are not a subpackage of slurm_attrib, and what they hold instead.
NOT_PACKAGES = {
    "golden": "golden cases: bundle → expected diagnosis",
    "rules": "rule fixtures, mirroring rules/",
    "data": "captured tool output shared by several test folders",
    "epilog": "the /bin/sh wrapper of epilog/",
    "integration": "scenarios on a real Slurm test cluster (marker slurm)",
    "adversarial": "issue 11's attacks and faults, one test each, on real processes; fuzzers of the parsers",
}


def test_test_folders_mirror_the_package() -> None:
    """tests/<x>/ tests slurm_attrib/<x>/ (connectors/ included, as slurm_attrib.connectors); other folders
    are named above with what they hold."""
    packages = {p.name for p in (ROOT / "slurm_attrib").iterdir() if (p / "__init__.py").exists()}
    folders = {p.name for p in (ROOT / "tests").iterdir() if p.is_dir() and not p.name.startswith((".", "_"))}
    assert folders - packages - set(NOT_PACKAGES) == set()


def test_tests_import_the_connectors_as_installed() -> None:
    """connectors/ is installed as slurm_attrib.connectors (a symlink here): a test importing the bare
    name passes in the checkout and fails in the RPM's %check."""
    import re

    bare = re.compile(r"^\s*(?:from|import) connectors\b", re.M)
    offenders = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "tests").rglob("*.py"))
                 if bare.search(p.read_text(encoding="utf-8"))]
    assert offenders == []
