"""Extraction on several cores: the same bytes whatever the worker count, the order the files come
in or the order the workers finish in; the pool only for bundles big enough to pay for it."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

import pytest

from slurm_attrib import canonical
from slurm_attrib.bundle import load_bundle
from slurm_attrib.engine import Engine, fanout
from slurm_attrib.settings import EngineSettings

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
BUNDLES = sorted(p / "bundle" for p in GOLDEN.iterdir() if len(list((p / "bundle").rglob("*.log"))) >= 3)


def _json(engine: Engine, bundle: Path, workers: int, reverse: bool = False) -> str:
    loaded = load_bundle(bundle)
    if reverse:
        loaded = replace(loaded, files=list(reversed(loaded.files)))
    return canonical.dumps(engine.diagnose(loaded, replace(engine.settings, workers=workers)).to_dict())


def test_there_are_bundles_of_several_files() -> None:
    assert len(BUNDLES) >= 5


@pytest.mark.parametrize("bundle", BUNDLES, ids=[b.parent.name for b in BUNDLES])
def test_json_identical_across_worker_counts_and_file_order(engine: Engine, bundle: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fanout, "PARALLEL_MIN_BYTES", 0)  # the pool even for a small bundle
    monkeypatch.delenv(fanout.WORKERS_ENV, raising=False)
    first = _json(engine, bundle, 1)
    assert all(_json(engine, bundle, w, reverse) == first for w in (1, 2, 4) for reverse in (False, True))


def test_results_are_folded_in_file_order_whichever_worker_finishes_first(engine: Engine,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker that sleeps on the first file finishes it last; the run's context is unchanged."""
    bundle = load_bundle(BUNDLES[0])
    scan = engine.extractor._scan_file
    first_file = bundle.files[0].rel

    def slow_first(ctx: object, bf: object) -> None:
        if getattr(bf, "rel", "") == first_file:
            time.sleep(0.2)
        scan(ctx, bf)  # type: ignore[arg-type]

    monkeypatch.setattr(fanout, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(engine.extractor, "_scan_file", slow_first)
    parallel = canonical.dumps(engine.diagnose(bundle, replace(engine.settings, workers=3)).to_dict())
    monkeypatch.setattr(engine.extractor, "_scan_file", scan)
    assert parallel == canonical.dumps(engine.diagnose(bundle, replace(engine.settings, workers=1)).to_dict())


def test_a_small_bundle_is_extracted_without_a_pool(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pool(*_args: object) -> None:
        raise AssertionError("a pool was started for a small bundle")

    monkeypatch.setattr(fanout, "_in_workers", no_pool)
    engine.diagnose(BUNDLES[0], replace(engine.settings, workers=4))


def test_the_worker_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(fanout.WORKERS_ENV, raising=False)
    assert fanout.worker_count(0) == len(os.sched_getaffinity(0))
    assert fanout.worker_count(3) == 3
    monkeypatch.setenv(fanout.WORKERS_ENV, "1")
    assert fanout.worker_count(8) == 1
    assert EngineSettings().workers == 0
