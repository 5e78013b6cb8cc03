"""Extraction on several cores: the same bytes whatever the worker count, the order the files come
in or the order the workers finish in; the pool only for bundles big enough to pay for it."""

from __future__ import annotations

import multiprocessing
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


def _in_helper_only(engine: Engine, monkeypatch: pytest.MonkeyPatch, act: object) -> None:
    """Make every forked helper ``act`` on each file it takes; this process extracts as usual."""
    scan = engine.extractor._scan_file
    parent = os.getpid()

    def scan_or_act(ctx: object, bf: object) -> None:
        if os.getpid() != parent:
            act()  # type: ignore[operator]
        scan(ctx, bf)  # type: ignore[arg-type]

    monkeypatch.setattr(fanout, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(engine.extractor, "_scan_file", scan_or_act)


def test_files_a_dead_helper_took_are_extracted_here(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """A helper killed mid-file (the OOM killer, a crash) leaves no hole: this process takes its files."""
    bundle = load_bundle(BUNDLES[0])
    alone = canonical.dumps(engine.diagnose(bundle, replace(engine.settings, workers=1)).to_dict())
    _in_helper_only(engine, monkeypatch, lambda: os._exit(9))
    assert canonical.dumps(engine.diagnose(bundle, replace(engine.settings, workers=3)).to_dict()) == alone


def test_a_file_that_fails_in_a_helper_fails_here_as_without_helpers(engine: Engine,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    bundle = load_bundle(BUNDLES[0])
    scan = engine.extractor._scan_file
    broken = bundle.files[-1].rel

    def fails_on_one(ctx: object, bf: object) -> None:
        if getattr(bf, "rel", "") == broken:
            raise ValueError(f"cannot scan {broken}")
        scan(ctx, bf)  # type: ignore[arg-type]

    monkeypatch.setattr(fanout, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(engine.extractor, "_scan_file", fails_on_one)
    with pytest.raises(ValueError, match="cannot scan"):
        engine.diagnose(bundle, replace(engine.settings, workers=1))
    with pytest.raises(ValueError, match="cannot scan"):
        engine.diagnose(bundle, replace(engine.settings, workers=3))


def test_this_process_extracts_too_and_helpers_send_only_their_files(engine: Engine,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """With two workers, one helper is forked and this process takes files from the same counter."""
    bundle = load_bundle(BUNDLES[0])
    here: list[str] = []
    scan = engine.extractor._scan_file
    parent = os.getpid()

    def note(ctx: object, bf: object) -> None:
        if os.getpid() == parent:
            here.append(getattr(bf, "rel", ""))
        else:
            time.sleep(0.05)  # a slow helper: this process must not wait for it with files left
        scan(ctx, bf)  # type: ignore[arg-type]

    monkeypatch.setattr(fanout, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(engine.extractor, "_scan_file", note)
    started: list[object] = []
    real_process = multiprocessing.get_context("fork").Process

    class Counted(real_process):  # type: ignore[misc,valid-type]
        def start(self) -> None:
            started.append(self)
            super().start()

    monkeypatch.setattr(type(multiprocessing.get_context("fork")), "Process", Counted)
    engine.diagnose(bundle, replace(engine.settings, workers=2))
    assert len(started) == 1
    assert here  # not idle while the helper works
    assert len(here) == len(set(here))  # no file twice


def test_a_small_bundle_is_extracted_without_a_pool(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pool(*_args: object) -> None:
        raise AssertionError("a pool was started for a small bundle")

    monkeypatch.setattr(fanout, "_in_workers", no_pool)
    engine.diagnose(BUNDLES[0], replace(engine.settings, workers=4))


def test_processes_grow_with_the_bundle_not_only_with_the_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    files = load_bundle(BUNDLES[0]).files
    total = sum(os.stat(bf.path).st_size for bf in files)
    monkeypatch.setattr(fanout, "PARALLEL_MIN_BYTES", total + 1)
    assert fanout.processes(files, 64) == 1  # under the minimum: no helper
    monkeypatch.setattr(fanout, "PARALLEL_MIN_BYTES", total)
    assert fanout.processes(files, 64) == 2  # one process per half of the minimum
    monkeypatch.setattr(fanout, "PARALLEL_MIN_BYTES", 0)
    assert fanout.processes(files, 64) == len(files)  # never more than one per file
    assert fanout.processes(files, 2) == 2
    assert fanout.processes(files, 1) == 1


def test_the_worker_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(fanout.WORKERS_ENV, raising=False)
    assert fanout.worker_count(0) == len(os.sched_getaffinity(0))
    assert fanout.worker_count(3) == 3
    monkeypatch.setenv(fanout.WORKERS_ENV, "1")
    assert fanout.worker_count(8) == 1
    assert EngineSettings().workers == 0


def test_the_scan_hears_how_much_each_process_will_read_before_the_fork(engine: Engine,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """So numpy's newline count is imported once, before the fork, when each process's share pays for it."""
    from slurm_attrib.engine import extract

    bundle = load_bundle(BUNDLES[0])
    total = sum(os.stat(bf.path).st_size for bf in bundle.files)
    heard: list[int] = []
    monkeypatch.setattr(extract, "will_count", heard.append)
    monkeypatch.setattr(fanout, "PARALLEL_MIN_BYTES", 0)
    engine.diagnose(bundle, replace(engine.settings, workers=1))
    engine.diagnose(bundle, replace(engine.settings, workers=2))
    assert heard == [total, total // 2]


def test_a_helpers_symptoms_come_back_whole_and_built_by_their_constructor(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a helper sends is unpickled through Symptom's and EvidenceRef's own constructors (their
    ``__reduce__``): every field comes back, a frozen EvidenceRef stays frozen, and the instance is an
    ordinary one (its attributes in a dictionary that shares its class's keys, which later phases read fast)."""
    import pickle
    from datetime import datetime, timezone

    from slurm_attrib.model import EvidenceRef, Symptom

    when = datetime(2026, 11, 20, 14, 0, 30, tzinfo=timezone.utc)
    ev = EvidenceRef(source="kernel", node="node-171", file="syslog/node-171.log", line=7, offset=512, time=when,
                     raw="NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.", trust="kernel")
    sym = Symptom(kind="gpu_lost", rule_id="kernel.nvidia_xid", node="node-171", time=when, evidence=[ev],
                  gpu="0000:18:00", rank=3, fields={"code": 79, "readings": ["gpu"]}, role="root",
                  category="gpu_hardware", responsible="node", strength=9, summary="s", actions=("drain",),
                  id="s0001", dropped="why", supports="s0002", notes=["n"])
    back = pickle.loads(pickle.dumps([sym, sym]))
    assert back[0] == sym and back[0] is back[1]  # one object sent twice is one object received
    assert back[0].evidence[0] == ev
    with pytest.raises(AttributeError):
        back[0].evidence[0].line = 8
    # built by __init__: an attribute no field names comes back too, set after it
    sym.extra = "kept"  # type: ignore[attr-defined]
    again = pickle.loads(pickle.dumps(sym))
    assert again == sym and again.extra == "kept"
    built: list[str] = []
    original = Symptom.__init__

    def spy(self: Symptom, *args: object, **kwargs: object) -> None:
        built.append(str(args[0] if args else kwargs.get("kind")))
        original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Symptom, "__init__", spy)
    pickle.loads(pickle.dumps(sym))
    assert built == ["gpu_lost"]
