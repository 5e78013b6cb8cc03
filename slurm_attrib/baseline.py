"""The clean baseline: logs of healthy nodes and successful jobs that no rule may match.

It ships as package data (``slurm_attrib/data/baseline``, see its README) so that an installed site
checks its own rules against it (``rules lint --origin site``), not only the project's tests.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .engine import Engine
from .model import Symptom

# Where each baseline folder's files go in a bundle (DESIGN.md §3): kernel logs are a node's syslog,
# app logs the job's output.
BUNDLE_PLACES = {"kernel": "syslog/node-01.log", "app": "applog/job.out"}
JOB_YAML = "job_id: '1'\nnodes: [node-01]\nstate: COMPLETED\nexit_code: '0:0'\n"


@dataclass(frozen=True)
class BaselineLog:
    """One clean log: its name (``kernel/dmesg_T_a100.log``), where it goes in a bundle, its bytes."""

    name: str
    place: str
    content: bytes


def baseline_logs() -> list[BaselineLog]:
    """Every file of the baseline (any extension), sorted by name."""
    root = resources.files("slurm_attrib.data") / "baseline"
    logs = [BaselineLog(f"{folder}/{item.name}", place, item.read_bytes())
            for folder, place in sorted(BUNDLE_PLACES.items())
            for item in (root / folder).iterdir() if item.is_file()]
    return sorted(logs, key=lambda log: log.name)


def write_bundle(log: BaselineLog, target: Path) -> Path:
    """A bundle of a successful one-node job whose only evidence is this clean log."""
    (target / "job.yaml").write_text(JOB_YAML, encoding="utf-8")
    path = target / log.place
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(log.content)
    return target


def baseline_matches(engine: Engine) -> list[tuple[BaselineLog, Symptom]]:
    """Every symptom a line-matching rule extracts from a baseline log: each one is a false positive."""
    found: list[tuple[BaselineLog, Symptom]] = []
    for log in baseline_logs():
        with tempfile.TemporaryDirectory(prefix="slurm-attrib-baseline-") as tmp:
            ctx = engine.run(write_bundle(log, Path(tmp)))
        matching = {r.id for r in engine.ruleset.rules if r.match is not None}
        found.extend((log, s) for s in ctx.symptoms if s.rule_id in matching)
    return found
