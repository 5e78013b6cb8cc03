"""From a real Prometheus to a verdict: the connector's files, a job.yaml and the job's own log (NCCL
watchdog timeouts on every rank) make a bundle, and the engine judges it. The bundles under
``promql_golden/`` were made the same way and then completed by hand (a kernel log, a CUDA error); they
run without Prometheus. They live here, not in tests/golden, whose cases also feed the store's reviewed
outputs (tests/store/expected)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from slurm_attrib.config import PrometheusConfig
from slurm_attrib.connectors.base import Limits, MemoryBundle, Window, Workload
from slurm_attrib.connectors.prometheus import PrometheusSource
from slurm_attrib.engine import Engine
from slurm_attrib.model import Diagnosis

from .promserver import NODES, PromServer, at

CASES_DIR = Path(__file__).parent / "promql_golden"
CASES = sorted(p.name for p in CASES_DIR.iterdir() if (p / "expect.yaml").is_file())
RANKS = {rank: NODES[rank // 2] for rank in range(2 * len(NODES))}  # two ranks per node



def _timeouts(when: datetime, nodes: tuple[str, ...]) -> str:
    """What every rank prints when a collective never completes (PyTorch's NCCL watchdog)."""
    stamp = when.strftime("%m%d %H:%M:%S")
    lines = []
    for rank, node in RANKS.items():
        if node in nodes:
            lines.append(f"[rank{rank}]:[E{stamp}.{117302425 + rank} ProcessGroupNCCL.cpp:607] [Rank {rank}] Watchdog "
                         "caught collective operation timeout: WorkNCCL(SeqNum=2733, OpType=ALLREDUCE, NumelIn=1, "
                         "NumelOut=1, Timeout(ms)=600000) ran for 600217 milliseconds before timing out.")
    return "\n".join(lines) + "\n"


def _diagnose(engine: Engine, url: str, job: str, window: Window, nodes: tuple[str, ...], tmp: Path) -> Diagnosis:
    bundle = MemoryBundle()
    coverage = PrometheusSource(PrometheusConfig(url=url)).collect(
        Workload("c1", job, nodes=nodes), window, bundle, Limits(10.0, 1 << 20))
    assert coverage.state == "ok", coverage.reason
    ranks = {rank: node for rank, node in RANKS.items() if node in nodes}
    job_yaml = {"job_id": job, "nodes": list(nodes), "start": window.start.isoformat(), "end": window.end.isoformat(),
                "state": "FAILED", "exit_code": "1:0", "ranks": ranks}
    (tmp / "job.yaml").write_text(yaml.safe_dump(job_yaml))
    for rel, data in bundle.files.items():
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / rel).write_bytes(data)
    (tmp / "applog").mkdir()
    (tmp / "applog" / f"slurm-{job}.out").write_text(_timeouts(window.end - timedelta(seconds=20), nodes))
    return engine.diagnose(tmp)


def test_an_xid_seen_by_prometheus_on_one_node_explains_the_timeouts_everywhere(
        engine: Engine, prom: PromServer, tmp_path: Path) -> None:
    window = Window(at(10, 0), at(10, 14), timedelta(minutes=5), timedelta(minutes=1))
    diag = _diagnose(engine, prom.url, "8101", window, ("gpu-a2", "gpu-a3"), tmp_path)
    assert (diag.status, diag.category, diag.responsible) == ("attributed", "gpu_hardware", "infrastructure"), \
        diag.summary
    assert diag.culprit_nodes == ["gpu-a2"]
    root = diag.root_cause
    assert root is not None and (root.kind, root.gpu, root.fields.get("code")) == ("promql_xid", "0000:5d:00", 79)
    assert root.evidence[0].raw.startswith("2026-11-20T10:12:00Z promql changed xid node=gpu-a2 gpu=1 ")
    assert root.evidence[0].file == "metrics/gpu-a2.promql.log"
    assert len(diag.supporting) >= 4  # the watchdog timeouts of both nodes


def test_a_dbe_count_from_before_the_job_is_not_blamed(engine: Engine, prom: PromServer, tmp_path: Path) -> None:
    window = Window(at(10, 40), at(11, 0), timedelta(minutes=5), timedelta(minutes=1))
    diag = _diagnose(engine, prom.url, "8102", window, ("gpu-a1", "gpu-a3"), tmp_path)
    assert diag.culprit_nodes == [] and diag.status != "attributed", diag.summary
    assert diag.category not in ("gpu_memory", "gpu_hardware") and diag.root_cause is None
    (metrics,) = [c for c in diag.coverage if c.connector == "gpu_metrics"]
    assert (metrics.files, metrics.symptoms) == (2, 4)  # DBE 2 and 4, SBE 1, last Xid 13: all context


def test_a_slowed_gpu_alone_makes_the_verdict_ambiguous_not_a_hardware_blame(
        engine: Engine, prom: PromServer, tmp_path: Path) -> None:
    window = Window(at(11, 5), at(11, 25), timedelta(minutes=5), timedelta(minutes=1))
    diag = _diagnose(engine, prom.url, "8103", window, NODES, tmp_path)
    assert diag.status == "ambiguous", diag.summary
    assert diag.culprit_nodes == [] and diag.responsible != "infrastructure"
    assert {c.kind for c in diag.candidates} == {"promql_throttle_straggler"}
    assert {c.category for c in diag.candidates} == {"gpu_hardware", "application"}


@pytest.mark.parametrize("case", CASES)
def test_promql_golden_verdict(engine: Engine, case: str) -> None:
    expect: dict[str, Any] = yaml.safe_load((CASES_DIR / case / "expect.yaml").read_text())
    diag = engine.diagnose(CASES_DIR / case / "bundle")
    assert (diag.status, diag.category, diag.responsible) == (
        expect["status"], expect["category"], expect["responsible"]), diag.summary
    assert sorted(diag.culprit_nodes) == sorted(expect["culprit_nodes"]), diag.summary
    root = diag.root_cause
    assert root is not None and root.evidence[0].raw
    assert (root.kind, root.node, root.gpu) == (expect["root_kind"], expect["root_node"], expect["root_gpu"])
    assert len(diag.supporting) >= expect["supporting_min"], [s.summary for s in diag.supporting]
    again = engine.diagnose(CASES_DIR / case / "bundle")
    assert json.dumps(again.to_dict(), sort_keys=True) == json.dumps(diag.to_dict(), sort_keys=True)


def test_there_are_promql_golden_cases() -> None:
    assert len(CASES) == 4
