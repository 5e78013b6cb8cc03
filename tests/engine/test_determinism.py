"""Same evidence, same bytes: hash seed, file creation order and the current time change nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from slurm_attrib import canonical
from slurm_attrib.data import demo_bundle
from slurm_attrib.engine import Engine


def _run_cli(bundle: Path, seed: str) -> bytes:
    env = {**os.environ, "PYTHONHASHSEED": seed, "TZ": "Pacific/Auckland" if seed == "1" else "UTC"}
    return subprocess.run([sys.executable, "-m", "slurm_attrib.cli", "diagnose", "--no-site-rules", "--bundle",
                           str(bundle), "--format", "json"], env=env, capture_output=True, check=True,
                          timeout=120).stdout


def test_json_identical_across_hash_seeds_and_zones() -> None:
    outputs = {_run_cli(demo_bundle(), seed) for seed in ("0", "1", "12345")}
    assert len(outputs) == 1


def test_json_identical_when_files_are_created_in_reverse_order(engine: Engine, tmp_path: Path) -> None:
    source = demo_bundle()
    files = sorted(p for p in source.rglob("*") if p.is_file())
    for path in reversed(files):
        target = tmp_path / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        os.utime(target, (1, 1))
    first = canonical.dumps(engine.diagnose(source).to_dict())
    assert canonical.dumps(engine.diagnose(tmp_path).to_dict()) == first


def test_output_holds_no_wall_clock(engine: Engine) -> None:
    text = canonical.dumps(engine.diagnose(demo_bundle()).to_dict())
    assert "2026-12" not in text  # today's date never leaks into a verdict on November evidence


def _every_bundle() -> list[Path]:
    root = Path(__file__).resolve().parents[2]
    return sorted([*root.glob("tests/golden/*/bundle"), *(p.parent for p in root.glob("corpus/*/job.yaml"))])


def test_symptoms_stay_in_sort_key_order_through_every_phase() -> None:
    """ctx.active() is the symptoms in Symptom.sort_key order, which the filter, refine and report code
    relies on instead of sorting 20,000 symptoms again in every rule: no phase may add a symptom after
    the sort or change its time, node, evidence or rule."""
    from slurm_attrib.engine import Engine, _run_rule
    from slurm_attrib.model import Symptom
    from slurm_attrib.ruleset import load_ruleset

    engine = Engine(load_ruleset(include_site=False))
    checked = 0
    for bundle in _every_bundle():
        ctx = engine.run(bundle)
        assert ctx.symptoms == sorted(ctx.symptoms, key=Symptom.sort_key), bundle
        keys = [s.sort_key() for s in ctx.symptoms]
        for phase in ("filter", "refine", "final", "post_outcome"):  # again, after the whole run
            for rule in engine.ruleset.by_phase(phase):
                _run_rule(ctx, rule)
        assert [s.sort_key() for s in ctx.symptoms] == keys, bundle
        checked += 1
    assert checked > 150
