"""Issue 11 §1, "one old event, many victims": the Epilog ships a margin of kernel log before each job's
start, so one Xid 79 is in the bundle of every job that starts on the node soon after it. It must not
become the root cause of jobs that never met it, nor count once per job as a repeat offender."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import yaml

from slurm_attrib.engine import Engine
from slurm_attrib.ruleset import load_ruleset
from slurm_attrib.store import Store, settings_with_history
from slurm_attrib.store.rows import JobKey

UTC = timezone.utc
XID_AT = datetime(2026, 11, 20, 9, 59, 0, tzinfo=UTC)
XID = (f"{XID_AT:%b} {XID_AT.day:2d} {XID_AT:%H:%M:%S} node-01 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, "
       "name=python, GPU has fallen off the bus.\n")


def _job(root: Path, job_id: str, start: datetime, app: str, cluster: str = "c1") -> Path:
    folder = root / f"{cluster}-{job_id}"
    (folder / "syslog").mkdir(parents=True)
    (folder / "applog").mkdir()
    end = start + timedelta(minutes=20)
    (folder / "job.yaml").write_text(yaml.safe_dump({
        "job_id": job_id, "cluster": cluster, "nodes": ["node-01", "node-02"], "state": "FAILED", "exit_code": "1:0",
        "start": start.isoformat(), "end": end.isoformat(), "ranks": {0: "node-01", 1: "node-02"}}))
    (folder / "syslog" / "node-01.log").write_text(XID)
    (folder / "applog" / "job.out").write_text(app)
    return folder


def _diagnose(engine: Engine, store: Store, bundle: Path, job_id: str, start: datetime,
              cluster: str = "c1") -> dict[str, object]:
    end = start + timedelta(minutes=20)
    settings = settings_with_history(engine.settings, store, ["node-01", "node-02"], end, 30,
                                     JobKey(cluster, job_id, "", 0))
    diag = engine.diagnose(bundle, settings)
    store.record(diag, end)
    return diag.to_dict()


def test_jobs_that_never_met_an_old_xid_are_not_its_victims(tmp_path: Path) -> None:
    engine = Engine(load_ruleset(include_site=False))
    own_error = "0: Traceback (most recent call last):\n0: KeyError: 'input_ids'\n"
    with Store.open(tmp_path / "s.sqlite") as store:
        for number in range(5):  # five jobs start 30-90 s after the Xid, each dies of its own KeyError
            start = XID_AT + timedelta(seconds=30 + 15 * number)
            diag = _diagnose(engine, store, _job(tmp_path, f"20{number}", start, own_error), f"20{number}", start)
            assert diag["category"] == "application" and diag["culprit_nodes"] == [], diag["summary"]


def test_a_job_that_met_it_gets_it_as_a_pre_existing_fault(tmp_path: Path) -> None:
    engine = Engine(load_ruleset(include_site=False))
    start = XID_AT + timedelta(seconds=40)
    with Store.open(tmp_path / "s.sqlite") as store:
        diag = _diagnose(engine, store, _job(tmp_path, "301", start, "0: RuntimeError: CUDA error: unknown error\n"),
                         "301", start)
    root = diag["root_cause"]
    assert diag["culprit_nodes"] == ["node-01"] and root["fields"]["pre_existing"] is True  # type: ignore[index]
    assert any("pre-existing fault" in n for n in root["notes"])  # type: ignore[index]


def test_one_event_met_by_many_jobs_is_one_fault_in_the_history(tmp_path: Path) -> None:
    """Three restarts of the pipeline all met the same Xid: one fault, no repeat offender; the same node
    name on another cluster is another machine and never counts."""
    engine = Engine(load_ruleset(include_site=False))
    met = "0: RuntimeError: CUDA error: unknown error\n"
    with Store.open(tmp_path / "s.sqlite") as store:
        for number in range(3):
            start = XID_AT + timedelta(seconds=20 + 20 * number)
            diag = _diagnose(engine, store, _job(tmp_path, f"40{number}", start, met), f"40{number}", start)
            assert diag["culprit_nodes"] == ["node-01"]
            assert not any("repeat offender" in str(a) for a in diag["annotations"]), diag["annotations"]  # type: ignore[attr-defined]
        for number in range(3):  # cluster c2's own node-01 faults three times
            start = XID_AT + timedelta(minutes=30 * number + 30)
            other = _job(tmp_path, f"50{number}", start, met, cluster="c2")
            (other / "syslog" / "node-01.log").write_text(_xid_at(start + timedelta(minutes=5)))
            _diagnose(engine, store, other, f"50{number}", start, cluster="c2")
        later = XID_AT + timedelta(hours=3)
        bundle = _job(tmp_path, "600", later, met)
        (bundle / "syslog" / "node-01.log").write_text(_xid_at(later + timedelta(minutes=5)))
        diag = _diagnose(engine, store, bundle, "600", later)
        assert not any("repeat offender" in str(a) for a in diag["annotations"]), diag["annotations"]  # type: ignore[attr-defined]
        window = (later - timedelta(days=30), later + timedelta(hours=1))
        assert store.culprit_events(["node-01"], *window, cluster="c1") == {"node-01": 2}  # old Xid (3 jobs), new one
        assert store.culprit_events(["node-01"], *window, cluster="c2") == {"node-01": 3}


def _xid_at(when: datetime) -> str:
    return XID.replace(f"{XID_AT:%H:%M:%S}", f"{when:%H:%M:%S}")


def test_a_node_clock_behind_the_controllers_is_corrected_and_said(tmp_path: Path) -> None:
    """node-01's clock was 300 s behind (the collector recorded it): its Xid, stamped 09:57 on that clock,
    happened at 10:02 on the controller's, inside the job. Without the record it would be dropped as before
    the start, silently as far as the verdict's reader could tell why."""
    engine = Engine(load_ruleset(include_site=False))
    start = datetime(2026, 11, 20, 10, 0, 0, tzinfo=UTC)
    # the job's own error is one the GPU fault explains (a KeyError is the code's own and would co-lead)
    bundle = _job(tmp_path, "700", start, "0: RuntimeError: CUDA error: unspecified launch failure\n")
    (bundle / "syslog" / "node-01.log").write_text(_xid_at(start - timedelta(minutes=3)))
    before = engine.diagnose(bundle).to_dict()
    assert before["culprit_nodes"] == []
    (bundle / "collection").mkdir()
    (bundle / "collection" / "node-01.yaml").write_text(yaml.safe_dump(
        {"clock_skew_s": -300.0, "sources": [{"source": "kernel_log", "state": "ok", "origin": "journald"}]}))
    after = engine.diagnose(bundle).to_dict()
    assert after["culprit_nodes"] == ["node-01"] and after["category"] == "gpu_hardware"
    assert any("node-01's clock was 300 s behind the controller's" in a for a in after["annotations"])  # type: ignore[attr-defined]
