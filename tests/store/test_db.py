"""Recording verdicts: one row per key, history on re-attribution, culprit events, bundles, file mode."""

from __future__ import annotations

import copy
import json
import stat
from pathlib import Path

from slurm_attrib.data import demo_bundle
from slurm_attrib.engine import Engine
from slurm_attrib.store import Store
from slurm_attrib.store.db import resolve_store_path

from .conftest import VERDICT_TIME


def test_record_insert_unchanged_update(tmp_path: Path, engine: Engine) -> None:
    diag = engine.diagnose(demo_bundle()).to_dict()
    with Store.open(tmp_path / "s.sqlite") as store:
        first = store.record(diag, VERDICT_TIME, bundle_dir=demo_bundle())
        again = store.record(diag, VERDICT_TIME)
        changed = copy.deepcopy(diag)
        changed["category"] = "gpu_hardware"
        updated = store.record(changed, VERDICT_TIME.replace(day=2))
        rows = list(store.rows("SELECT category, verdict_id FROM diagnoses"))
        history = list(store.rows("SELECT category, verdict_id, replaced_time FROM history"))
        culprits = list(store.rows("SELECT node, gpu, category FROM culprits"))
        bundle = store.bundle(first.diagnosis_id)
    assert (first.action, again.action, updated.action) == ("inserted", "unchanged", "updated")
    assert first.verdict_id == again.verdict_id != updated.verdict_id and len(first.verdict_id) == 16
    assert rows == [{"category": "gpu_hardware", "verdict_id": updated.verdict_id}]
    assert history == [{"category": "nvlink", "verdict_id": first.verdict_id,
                        "replaced_time": "2026-12-02T00:00:00.000000Z"}]
    assert culprits == [{"node": "node-02", "gpu": "0000:3b:00", "category": "gpu_hardware"}]
    assert bundle is not None and bundle["files"] == 9 and not bundle["capped"]  # kept across the update


def test_columns_and_hours(tmp_path: Path, engine: Engine) -> None:
    with Store.open(tmp_path / "s.sqlite") as store:
        store.record(engine.diagnose(demo_bundle()), VERDICT_TIME, bundle_dir=demo_bundle())
        row = next(store.rows("SELECT * FROM diagnoses"))
    assert row["cluster"] == "helios" and row["job_id"] == "318442" and row["status"] == "attributed"
    assert row["culprit_nodes"] == "node-02" and row["root_kind"] == "xid" and row["gpus_per_node"] == 8
    assert row["gpu_hours"] == round(row["node_hours"] * 8, 4) and row["job_day"] == row["end"][:10]
    assert json.loads(row["json"])["job"]["job_id"] == "318442"


def test_gpu_hours_not_guessed_without_gpus_per_node(tmp_path: Path, engine: Engine) -> None:
    bundle = tmp_path / "b"
    (bundle).mkdir()
    (bundle / "job.yaml").write_text("job_id: 7\ncluster: c\nnodes: [n1, n2]\nstate: FAILED\nexit_code: '1:0'\n"
                                     "start: '2026-11-01T00:00:00Z'\nend: '2026-11-01T02:00:00Z'\n")
    with Store.open(tmp_path / "s.sqlite") as store:
        store.record(engine.diagnose(bundle), VERDICT_TIME, bundle_dir=bundle)
        row = next(store.rows("SELECT node_hours, gpu_hours FROM diagnoses"))
    assert row == {"node_hours": 4.0, "gpu_hours": None}


def test_new_store_is_0640_and_wal(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    with Store.open(path) as store:
        mode = store.db.execute("PRAGMA journal_mode").fetchone()[0]
    assert stat.S_IMODE(path.stat().st_mode) == 0o640 and mode == "wal"


def test_store_path_resolution() -> None:
    assert resolve_store_path("/a", {"SLURM_ATTRIB_STORE": "/b"}) == "/a"
    assert resolve_store_path(None, {"SLURM_ATTRIB_STORE": "/b"}) == "/b"
    assert resolve_store_path(None, {}) == "/var/lib/slurm-attrib/store.sqlite"


def test_find_array_task_and_previous_restarts(tmp_path: Path, engine: Engine) -> None:
    diag = engine.diagnose(demo_bundle()).to_dict()
    diag["job"].update(job_id="900", array_job_id="899", array_task_id="3")
    restarted = copy.deepcopy(diag)
    restarted["job"]["restart_count"] = 1
    with Store.open(tmp_path / "s.sqlite") as store:
        store.record(diag, VERDICT_TIME)
        store.record(restarted, VERDICT_TIME)
        found = store.find("899_3")
        assert [r["restart_count"] for r in found] == [1, 0] and store.find("900") == found
        assert [p["restart_count"] for p in store.previous_verdicts(found[0])] == [0]
        assert store.has_verdict("helios", ("901",), "899", "3") and not store.has_verdict("helios", ("901",))


def test_spool_dir_resolution() -> None:
    from slurm_attrib.store.spool import resolve_spool_dir

    assert resolve_spool_dir("/x", {"SLURM_ATTRIB_SPOOL": "/s"}) == "/x"
    assert resolve_spool_dir(None, {"SLURM_ATTRIB_SPOOL": "/s"}) == "/s/verdicts"
    assert resolve_spool_dir(None, {}) == "/var/spool/slurm-attrib/verdicts"
