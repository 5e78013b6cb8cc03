"""The finalizer end to end with a fake Slurm and a fake store, the real engine, a real spool."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml

from slurm_attrib import hooks, quarantine
from slurm_attrib.config import Config, FinalizerConfig, RemediationConfig
from slurm_attrib.connectors.base import SourceCoverage
from slurm_attrib.engine import Engine
from slurm_attrib.finalizer import Finalizer
from slurm_attrib.remediate import DrainLedger, Remediator
from slurm_attrib.slurm.errors import SlurmError
from slurm_attrib.slurm.records import AcctRecord, ControllerJob, NodeEvent

from .fakes import FakeSlurm, FakeStore

T0 = datetime(2026, 12, 2, 12, 0, 0, tzinfo=timezone.utc)


def _ctld_env(job: str, nodes: str, exit2: str = "1:0", **extra: str) -> dict[str, str]:
    env = {"SLURM_SCRIPT_CONTEXT": "epilog_slurmctld", "SLURM_CLUSTER_NAME": "c", "SLURM_JOB_ID": job,
           "SLURM_JOB_RESTART_COUNT": "0", "SLURM_JOB_NODELIST": nodes, "SLURM_JOB_EXIT_CODE2": exit2,
           "SLURM_JOB_DERIVED_EC": "0", "SLURM_JOB_USER": "alice", "SLURM_JOB_UID": str(os.getuid()),
           "SLURM_JOB_PARTITION": "debug", "SLURM_JOB_NAME": "train"}
    env.update(extra)
    return env


def _acct(job: str, state: str, exit_code: str, nodes: tuple[str, ...], shown: str = "") -> AcctRecord:
    return AcctRecord(job_id=shown or job, job_id_raw=job, state=state, state_text=state, exit_code=exit_code,
                      derived_exit_code="0:0", node_list=",".join(nodes), nodes=nodes, user="alice",
                      uid=os.getuid(), partition="debug", start=T0 - timedelta(minutes=10), end=T0)


def _ctl(job: str, state: str, nodes: tuple[str, ...], std_out: str = "", exit_code: str = "1:0",
         **kw: str) -> ControllerJob:
    return ControllerJob(job_id=job, state=state, exit_code=exit_code, nodes=nodes, node_list=",".join(nodes),
                         start=T0 - timedelta(minutes=10), end=T0, std_out=std_out, uid=os.getuid(), user="alice",
                         **kw)  # type: ignore[arg-type]


def _node_bundle(spool: Path, key: str, node: str, kern: str = "", sources_state: str = "ok",
                 origin: str = "journald") -> None:
    d = spool / "nodes" / key / node
    (d / "syslog").mkdir(parents=True)
    (d / "syslog" / f"{node}.log").write_text(kern)
    (d / "collection.yaml").write_text(yaml.safe_dump(
        {"sources": [{"source": "kernel_log", "state": sources_state, "reason": "", "bytes": len(kern),
                      **({"origin": origin} if origin else {})}]}))


def _finalizer(tmp_path: Path, engine: Engine, slurm: FakeSlurm, store: FakeStore, **fin: object) -> Finalizer:
    cfg = Config(finalizer=FinalizerConfig(node_bundle_deadline_s=20, sacct_retries=3, sacct_retry_delay_s=2,
                                           **fin))  # type: ignore[arg-type]
    return Finalizer(config=cfg, spool=tmp_path, slurm=slurm, engine=engine, store=store)


def test_success_gets_no_diagnosis_and_no_comment(tmp_path: Path, engine: Engine) -> None:
    hooks.enqueue("epilog_slurmctld", _ctld_env("5", "node-01", "0:0"), str(tmp_path), T0.timestamp())
    slurm = FakeSlurm(jobs={"5": _ctl("5", "COMPLETED", ("node-01",))})
    store = FakeStore()
    results = _finalizer(tmp_path, engine, slurm, store).step(T0 + timedelta(seconds=1))
    assert [r.outcome for r in results] == ["success"]
    assert store.recorded == [] and slurm.comments == {} and not any("sacctmgr" in c for c in slurm.calls)
    assert (tmp_path / "done" / "c_5_0.json").exists() and not list((tmp_path / "queue").glob("*.json"))


def test_failed_job_waits_for_bundles_then_attributes_xid79(tmp_path: Path, engine: Engine) -> None:
    nodes = ("node-01", "node-02")
    out = tmp_path / "out.txt"
    out.write_text("[rank1]: RuntimeError: NCCL error: remote process exited or there was a network error\n")
    hooks.enqueue("epilog_slurmctld", _ctld_env("7", "node-[01-02]"), str(tmp_path), T0.timestamp())
    slurm = FakeSlurm(jobs={"7": _ctl("7", "FAILED", nodes, std_out=str(out))},
                      acct={"7": [_acct("7", "FAILED", "1:0", nodes)]})
    slurm.comments["7"] = "JS1:other tool"
    store = FakeStore()
    fin = _finalizer(tmp_path, engine, slurm, store)
    assert fin.step(T0 + timedelta(seconds=1))[0].outcome == "waiting"
    kern = "2026-12-02T11:59:58.000000+00:00 node-02 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python, " \
           "GPU has fallen off the bus.\n"
    _node_bundle(tmp_path, "c_7_0", "node-01")
    _node_bundle(tmp_path, "c_7_0", "node-02", kern)
    (result,) = fin.step(T0 + timedelta(seconds=2))
    assert result.outcome == "diagnosed", result
    diag = store.recorded[0]
    assert diag["category"] == "gpu_hardware" and diag["culprit_nodes"] == ["node-02"]
    assert slurm.comments["7"].startswith("JS1:other tool; slurm-attrib/v1:st=attributed,cat=gpu_hardware,"
                                          "node=node-02,gpu=0000:3b:00,root=xid-79,id=v1")
    job_yaml = yaml.safe_load((store.bundles[0] / "job.yaml").read_text())
    assert job_yaml["collection"]["node_bundles"] == {"node-01": "ok", "node-02": "ok"}
    assert (store.bundles[0] / "applog" / "slurm-7.out").read_text().startswith("[rank1]")
    assert not (tmp_path / "nodes" / "c_7_0").exists()


def test_missing_bundle_after_the_deadline_is_recorded(tmp_path: Path, engine: Engine) -> None:
    nodes = ("node-01", "node-02")
    hooks.enqueue("epilog_slurmctld", _ctld_env("8", "node-[01-02]"), str(tmp_path), T0.timestamp())
    slurm = FakeSlurm(jobs={"8": _ctl("8", "FAILED", nodes)}, acct={"8": [_acct("8", "FAILED", "1:0", nodes)]})
    store = FakeStore()
    fin = _finalizer(tmp_path, engine, slurm, store)
    _node_bundle(tmp_path, "c_8_0", "node-01")
    (tmp_path / "nodes" / "c_8_0" / ".tmp-node-02-4242").mkdir()
    assert fin.step(T0 + timedelta(seconds=19))[0].outcome == "waiting"
    assert fin.step(T0 + timedelta(seconds=21))[0].outcome == "diagnosed"
    job_yaml = yaml.safe_load((store.bundles[0] / "job.yaml").read_text())
    assert job_yaml["collection"]["node_bundles"] == {"node-01": "ok", "node-02": "timeout"}


def test_node_fail_names_the_node_that_went_down(tmp_path: Path, engine: Engine) -> None:
    nodes = ("node-03", "node-04")
    hooks.enqueue("epilog_slurmctld", _ctld_env("9", "node-[03-04]", "0:0"), str(tmp_path), T0.timestamp())
    slurm = FakeSlurm(jobs={"9": _ctl("9", "NODE_FAIL", nodes)}, acct={"9": [_acct("9", "NODE_FAIL", "0:0", nodes)]},
                      events=[NodeEvent("node-04", T0 - timedelta(seconds=5), None, "DOWN", "not responding")])
    store = FakeStore()
    (result,) = _finalizer(tmp_path, engine, slurm, store).step(T0 + timedelta(seconds=1))
    assert result.outcome == "diagnosed"
    assert store.recorded[0]["category"] == "node_failure" and store.recorded[0]["culprit_nodes"] == ["node-04"]


class _NoDbd(FakeSlurm):
    def node_events(self, nodes: Sequence[str], since: datetime, until: datetime) -> list[NodeEvent]:
        raise SlurmError("sacctmgr: slurmdbd not responding")

    def node_history(self, nodes: Sequence[str], since: datetime, until: datetime,
                     states: Sequence[str] = ()) -> list[AcctRecord]:
        return [_acct("3", "NODE_FAIL", "0:0", ("node-01",))]


def test_an_accounting_source_that_fails_is_a_note_and_the_others_still_write(tmp_path: Path,
                                                                              engine: Engine) -> None:
    nodes = ("node-01",)
    hooks.enqueue("epilog_slurmctld", _ctld_env("6", "node-01", "0:0"), str(tmp_path), T0.timestamp())
    slurm = _NoDbd(jobs={"6": _ctl("6", "NODE_FAIL", nodes)}, acct={"6": [_acct("6", "NODE_FAIL", "0:0", nodes)]})
    store = FakeStore()
    assert _finalizer(tmp_path, engine, slurm, store).step(T0 + timedelta(seconds=1))[0].outcome == "diagnosed"
    job_yaml = yaml.safe_load((store.bundles[0] / "job.yaml").read_text())
    assert "not collected: sacctmgr: slurmdbd not responding" in job_yaml["collection"]["notes"]
    assert sorted(p.name for p in (store.bundles[0] / "sacct").iterdir()) == ["job.json", "node_history.json"]


def test_comment_is_retried_until_the_job_is_in_the_db(tmp_path: Path, engine: Engine) -> None:
    hooks.enqueue("epilog_slurmctld", _ctld_env("10", "node-01", SLURM_ARRAY_JOB_ID="3", SLURM_ARRAY_TASK_ID="2"),
                  str(tmp_path), T0.timestamp())
    slurm = FakeSlurm(jobs={"10": _ctl("10", "FAILED", ("node-01",))},
                      acct={"3": [_acct("10", "FAILED", "1:0", ("node-01",), shown="3_2")]}, in_db_after=2)
    _node_bundle(tmp_path, "c_10_0", "node-01")
    fin = _finalizer(tmp_path, engine, slurm, FakeStore())
    assert fin.step(T0 + timedelta(seconds=1))[0].outcome == "diagnosed"
    assert "3_2" not in slurm.comments and not fin.idle()
    fin.step(T0 + timedelta(seconds=4))
    results = fin.step(T0 + timedelta(seconds=7))
    assert [r.outcome for r in results] == ["commented"]
    assert set(slurm.comments) == {"3_2"} and fin.idle()
    assert all(c in ("sacctmgr 3_2",) for c in slurm.calls if c.startswith("sacctmgr"))


def test_both_hooks_for_one_job_give_one_verdict(tmp_path: Path, engine: Engine) -> None:
    hooks.enqueue("epilog_slurmctld", _ctld_env("11", "node-01"), str(tmp_path), T0.timestamp())
    hooks.enqueue("jobcomp", {"JOBID": "11", "CLUSTER": "c", "JOBSTATE": "FAILED", "EXITCODE": "1:0",
                              "DERIVED_EC": "0:0", "NODES": "node-01", "UID": str(os.getuid())},
                  str(tmp_path), T0.timestamp())
    slurm = FakeSlurm(acct={"11": [_acct("11", "FAILED", "1:0", ("node-01",))]})
    _node_bundle(tmp_path, "c_11_0", "node-01")
    store = FakeStore()
    fin = _finalizer(tmp_path, engine, slurm, store)
    results = fin.step(T0 + timedelta(seconds=1))
    assert [r.outcome for r in results] == ["diagnosed"] and len(store.recorded) == 1
    assert not any(c.startswith("scontrol") and "FAILED" in c for c in slurm.calls)
    hooks.enqueue("epilog_slurmctld", _ctld_env("11", "node-01"), str(tmp_path), T0.timestamp())  # replayed
    assert [r.outcome for r in fin.step(T0 + timedelta(seconds=2))] == ["duplicate"]
    assert len(store.recorded) == 1


def test_jobcomp_only_requeue_keeps_each_run_under_its_own_key(tmp_path: Path, engine: Engine) -> None:
    """jobcomp/script as the only trigger (the one that does not slow 22.05's scheduler): run 0 is
    preempted and requeued, run 1 fails. Run 0's record must not take run 1's key (it was diagnosed as
    'preempted' under it, and run 1's real failure was then dropped as its duplicate)."""
    comp = {"JOBID": "21", "CLUSTER": "c", "EXITCODE": "0:0", "DERIVED_EC": "0:0", "NODES": "node-01",
            "UID": str(os.getuid())}
    run0_start = int((T0 - timedelta(minutes=30)).timestamp())
    hooks.enqueue("jobcomp", {**comp, "JOBSTATE": "PREEMPTED", "START": str(run0_start)}, str(tmp_path),
                  T0.timestamp() - 600)
    slurm = FakeSlurm(jobs={"21": _ctl("21", "RUNNING", ("node-01",), restart_count=1)},  # run 1 began T0-10min
                      acct={"21": [_acct("21", "PREEMPTED", "0:0", ("node-01",))]})
    fin = _finalizer(tmp_path, engine, slurm, FakeStore())
    (first,) = fin.step(T0)
    assert (first.key, first.outcome) == ("c_21_0", "diagnosed") and "preempted" in first.detail
    assert not (tmp_path / "done" / "c_21_1.json").exists()
    run1_start = int((T0 - timedelta(minutes=10)).timestamp())
    hooks.enqueue("jobcomp", {**comp, "JOBSTATE": "FAILED", "EXITCODE": "1:0", "START": str(run1_start)},
                  str(tmp_path), T0.timestamp())
    slurm.jobs["21"] = _ctl("21", "FAILED", ("node-01",), restart_count=1)
    slurm.acct["21"] = [_acct("21", "FAILED", "1:0", ("node-01",))]
    _node_bundle(tmp_path, "c_21_1", "node-01")
    results = fin.step(T0 + timedelta(seconds=10))
    assert [(r.key, r.outcome) for r in results] == [("c_21_1", "diagnosed")]


def test_requeued_job_is_left_for_its_next_run(tmp_path: Path, engine: Engine) -> None:
    hooks.enqueue("epilog_slurmctld", _ctld_env("12", "node-01", "0:0"), str(tmp_path), T0.timestamp())
    slurm = FakeSlurm(jobs={"12": _ctl("12", "PENDING", ("node-01",))})
    (result,) = _finalizer(tmp_path, engine, slurm, FakeStore()).step(T0 + timedelta(seconds=1))
    assert result.outcome == "requeued" and not (tmp_path / "done" / "c_12_0.json").exists()


def test_sacct_row_not_yet_started_is_not_a_requeue(tmp_path: Path, engine: Engine) -> None:
    # seen in CI: a job that exited 0 ended while slurmdbd still held its submit-time row (PENDING, no
    # start); the finalizer took sacct's PENDING for a requeue and the job never got its done marker
    hooks.enqueue("epilog_slurmctld", _ctld_env("14", "node-01", "0:0"), str(tmp_path), T0.timestamp())
    slurm = FakeSlurm(jobs={"14": _ctl("14", "COMPLETING", ("node-01",), exit_code="0:0")},
                      acct={"14": [_acct("14", "PENDING", "0:0", ())]})
    fin = _finalizer(tmp_path, engine, slurm, FakeStore())
    assert fin.step(T0 + timedelta(seconds=1))[0].outcome == "waiting"
    slurm.acct["14"] = [_acct("14", "COMPLETED", "0:0", ("node-01",))]
    (result,) = fin.step(T0 + timedelta(seconds=3))
    assert result.outcome == "success" and (tmp_path / "done" / "c_14_0.json").exists()


def test_state_from_sacct_with_retries(tmp_path: Path, engine: Engine) -> None:
    hooks.enqueue("epilog_slurmctld", _ctld_env("13", "node-01", "0:0"), str(tmp_path), T0.timestamp())
    slurm = FakeSlurm()
    fin = _finalizer(tmp_path, engine, slurm, FakeStore())
    assert fin.step(T0 + timedelta(seconds=1))[0].outcome == "waiting"
    slurm.acct["13"] = [_acct("13", "TIMEOUT", "0:0", ("node-01",))]
    assert fin.step(T0 + timedelta(seconds=2))[0].detail == "retry later"
    (result,) = fin.step(T0 + timedelta(seconds=4))
    assert result.outcome == "diagnosed" and "job_limit" in result.detail


def test_completing_is_not_a_state_success_of_an_array_task_gets_no_verdict(tmp_path: Path,
                                                                               engine: Engine) -> None:
    # measured on 22.05 under load: the finalizer saw task 1 (exit 0) while its node Epilog still ran;
    # scontrol said JobState=COMPLETING, which was taken as the state, and "the job did not fail" was
    # written onto the task's record. sacct already has the final state: it is the one that counts.
    hooks.enqueue("epilog_slurmctld", _ctld_env("10", "node-01", "0:0", SLURM_ARRAY_JOB_ID="9",
                                                SLURM_ARRAY_TASK_ID="1"), str(tmp_path), T0.timestamp())
    slurm = FakeSlurm(jobs={"10": _ctl("10", "COMPLETING", ("node-01",), exit_code="0:0")},
                      acct={"9": [_acct("10", "COMPLETED", "0:0", ("node-01",), shown="9_1")]})
    store = FakeStore()
    (result,) = _finalizer(tmp_path, engine, slurm, store).step(T0 + timedelta(seconds=1))
    assert result.outcome == "success", result
    assert store.recorded == [] and slurm.comments == {} and not any("sacctmgr" in c for c in slurm.calls)


def test_completing_waits_for_a_final_state_then_uses_it(tmp_path: Path, engine: Engine) -> None:
    hooks.enqueue("epilog_slurmctld", _ctld_env("16", "node-01", "0:0"), str(tmp_path), T0.timestamp())
    slurm = FakeSlurm(jobs={"16": _ctl("16", "COMPLETING", ("node-01",), exit_code="0:0")},
                      acct={"16": [_acct("16", "RUNNING", "0:0", ("node-01",))]})
    store = FakeStore()
    fin = _finalizer(tmp_path, engine, slurm, store)
    (first,) = fin.step(T0 + timedelta(seconds=1))
    assert first.outcome == "waiting" and first.detail == "job state not known yet"
    slurm.acct["16"] = [_acct("16", "TIMEOUT", "0:0", ("node-01",))]
    (result,) = fin.step(T0 + timedelta(seconds=3))
    assert result.outcome == "diagnosed" and "job_limit" in result.detail, result
    assert set(slurm.comments) == {"16"}


def test_bare_array_id_is_never_given_to_sacctmgr(tmp_path: Path, engine: Engine) -> None:
    # no array ids from any hook: the ref would be the raw id 9, which is also the array's id (the last
    # task keeps it), and ``where jobid=9`` modifies every task: the task's own id 9_2 is used instead
    hooks.enqueue("epilog_slurmctld", _ctld_env("9", "node-01", "4:0"), str(tmp_path), T0.timestamp())
    slurm = FakeSlurm(jobs={"9": _ctl("9", "FAILED", ("node-01",))},
                      acct={"9": [_acct("10", "COMPLETED", "0:0", ("node-02",), shown="9_1"),
                                  _acct("9", "FAILED", "4:0", ("node-01",), shown="9_2")]})
    _node_bundle(tmp_path, "c_9_0", "node-01")
    (result,) = _finalizer(tmp_path, engine, slurm, FakeStore()).step(T0 + timedelta(seconds=1))
    assert result.outcome == "diagnosed"
    assert set(slurm.comments) == {"9_2"}
    assert [c for c in slurm.calls if c.startswith("sacctmgr")] == ["sacctmgr 9_2"]


def test_remediation_drains_an_attributed_gpu_fault(tmp_path: Path, engine: Engine) -> None:
    nodes = ("node-01", "node-02")
    hooks.enqueue("epilog_slurmctld", _ctld_env("14", "node-[01-02]"), str(tmp_path), T0.timestamp())
    slurm = FakeSlurm(jobs={"14": _ctl("14", "FAILED", nodes)}, acct={"14": [_acct("14", "FAILED", "1:0", nodes)]})
    _node_bundle(tmp_path, "c_14_0", "node-01")
    _node_bundle(tmp_path, "c_14_0", "node-02", "2026-12-02T11:59:58+00:00 node-02 kernel: NVRM: Xid "
                 "(PCI:0000:3b:00): 79, pid=1, name=python, GPU has fallen off the bus.\n")
    fin = _finalizer(tmp_path, engine, slurm, FakeStore())
    fin.remediator = Remediator(RemediationConfig(drain=True, dry_run=False, max_partition_percent=50),
                                slurm, DrainLedger(tmp_path / "drains.json"))
    fin.step(T0 + timedelta(seconds=1))
    assert slurm.drained["node-02"].startswith("slurm-attrib: gpu_hardware xid 79 job 14")


@pytest.mark.parametrize("origin", ["mixed-file", ""])
def test_a_kernel_line_a_user_could_have_written_never_drains(tmp_path: Path, engine: Engine, origin: str) -> None:
    """The same Xid from /var/log/messages (where `logger -t kernel` writes), or from a collector that did
    not record where it read: an ambiguous verdict of that category, marked unverified; the node is neither
    blamed nor drained."""
    nodes = ("node-01", "node-02")
    hooks.enqueue("epilog_slurmctld", _ctld_env("15", "node-[01-02]"), str(tmp_path), T0.timestamp())
    slurm = FakeSlurm(jobs={"15": _ctl("15", "FAILED", nodes)}, acct={"15": [_acct("15", "FAILED", "1:0", nodes)]})
    _node_bundle(tmp_path, "c_15_0", "node-01")
    _node_bundle(tmp_path, "c_15_0", "node-02", "2026-12-02T11:59:58+00:00 node-02 kernel: NVRM: Xid "
                 "(PCI:0000:3b:00): 79, pid=1, name=python, GPU has fallen off the bus.\n", origin=origin)
    store = FakeStore()
    fin = _finalizer(tmp_path, engine, slurm, store)
    fin.remediator = Remediator(RemediationConfig(drain=True, dry_run=False, max_partition_percent=50),
                                slurm, DrainLedger(tmp_path / "drains.json"))
    fin.step(T0 + timedelta(seconds=1))
    diag = store.recorded[-1]
    assert diag["status"] == "ambiguous" and diag["category"] == "gpu_hardware" and diag["culprit_nodes"] == []
    assert diag["candidates"][0]["evidence"][0]["trust"] == "unverified"
    assert slurm.drained == {}


@pytest.mark.parametrize("state", ["ok", "timeout"])
def test_node_state_from_collection_yaml(tmp_path: Path, state: str) -> None:
    from slurm_attrib.finalizer import nodebundles

    _node_bundle(tmp_path, "k", "n1", sources_state=state)
    assert nodebundles.node_state(tmp_path / "nodes" / "k" / "n1")[0] == state
    (tmp_path / "nodes" / "k" / "n2").mkdir()
    assert nodebundles.node_state(tmp_path / "nodes" / "k" / "n2")[0] == "error"


def test_each_verdict_carries_the_time_it_was_made(tmp_path: Path, engine: Engine) -> None:
    """A pass over a long queue takes minutes; verdict_time was the pass's start for every job in it."""
    nodes = ("node-01",)
    for job in ("31", "32"):
        hooks.enqueue("epilog_slurmctld", _ctld_env(job, "node-01"), str(tmp_path), T0.timestamp())
        _node_bundle(tmp_path, f"c_{job}_0", "node-01")
    slurm = FakeSlurm(jobs={j: _ctl(j, "FAILED", nodes) for j in ("31", "32")},
                      acct={j: [_acct(j, "FAILED", "1:0", nodes)] for j in ("31", "32")})
    ticks = iter([T0 + timedelta(seconds=5), T0 + timedelta(seconds=95)])
    fin = _finalizer(tmp_path, engine, slurm, FakeStore())
    fin.clock = lambda: next(ticks)
    assert [r.outcome for r in fin.step(T0 + timedelta(seconds=1))] == ["diagnosed", "diagnosed"]
    times = sorted(json.loads(p.read_text())["time"] for p in (tmp_path / "done").glob("c_3*_0.json"))
    assert times == [(T0 + timedelta(seconds=5)).isoformat(), (T0 + timedelta(seconds=95)).isoformat()]


def test_quarantined_input_is_removed_after_its_retention(tmp_path: Path, engine: Engine) -> None:
    """Old quarantine entries (the finalizer's and the spooled verdicts') go at the hourly prune; recent ones,
    and all of them with a retention of 0, stay for an admin to look at."""
    old = quarantine.quarantine(tmp_path / quarantine.FOLDER, "queue entry", "old", [], "bad JSON")
    new = quarantine.quarantine(tmp_path / quarantine.FOLDER, "queue entry", "new", [], "bad JSON")
    verdict = quarantine.quarantine(tmp_path / "verdicts" / quarantine.FOLDER, "spooled verdict", "v", [], "bad")
    month = time.time() - 31 * 86400
    for entry in (old, verdict):
        os.utime(entry, (month, month))
    keep = _finalizer(tmp_path, engine, FakeSlurm(), FakeStore(), quarantine_retention_days=0)
    keep.prune(datetime.now(timezone.utc))
    assert old.exists() and verdict.exists()
    _finalizer(tmp_path, engine, FakeSlurm(), FakeStore(), quarantine_retention_days=30).prune(
        datetime.now(timezone.utc))
    assert not old.exists() and not verdict.exists() and new.exists()


class _ShippedKernel:
    """A remote connector (Loki in production) holding the kernel log of a node that sent no bundle."""

    name = "loki"

    def __init__(self, text: str) -> None:
        self.text, self.asked = text, []

    def collect(self, workload: Any, window: Any, bundle: Any, limits: Any) -> SourceCoverage:
        self.asked.append((workload.nodes, dict(workload.args), window.start, window.end))
        written = [f"syslog/{node}.log" for node in workload.nodes if node == "node-02"]
        for rel in written:
            bundle.write(rel, self.text.encode())
        return SourceCoverage(self.name, "ok", query='{job="kernel", host="node-02"}', files=tuple(written),
                              facts={"kernel_nodes": ["node-02"]}, origin="shipped")


def test_a_node_without_its_bundle_is_asked_of_the_gap_connectors(tmp_path: Path, engine: Engine) -> None:
    """node-02 rebooted before its Epilog ran: the finalizer asks the gap connector for that node only (not
    the job's output, which it has), the Xid it brings explains the verdict, recorded as shipped (unverified:
    in a job that did not end NODE_FAIL it names no node and never drains), and the connector's line is in the
    coverage."""
    nodes = ("node-01", "node-02")
    hooks.enqueue("epilog_slurmctld", _ctld_env("12", "node-[01-02]"), str(tmp_path), T0.timestamp())
    slurm = FakeSlurm(jobs={"12": _ctl("12", "FAILED", nodes)}, acct={"12": [_acct("12", "FAILED", "1:0", nodes)]})
    store = FakeStore()
    kern = ("2026-12-02T11:59:58.000000+00:00 node-02 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, "
            "name=python, GPU has fallen off the bus.\n")
    loki = _ShippedKernel(kern)
    fin = _finalizer(tmp_path, engine, slurm, store)
    fin.gap_sources = [loki]
    _node_bundle(tmp_path, "c_12_0", "node-01")
    assert fin.step(T0 + timedelta(seconds=21))[0].outcome == "diagnosed"
    ((asked_nodes, args, start, end),) = loki.asked
    assert asked_nodes == ("node-02",) and args == {"loki": {"app": False}}
    assert (start, end) == (T0 - timedelta(minutes=10), T0)  # the job's window
    diag = store.recorded[0]
    assert diag["status"] == "ambiguous" and diag["category"] == "gpu_hardware" and diag["culprit_nodes"] == []
    assert diag["candidates"][0]["node"] == "node-02" and diag["candidates"][0]["evidence"][0]["trust"] == "unverified"
    assert {c["connector"]: c["state"] for c in diag["coverage"]}["loki"] == "ok"
    job_yaml = yaml.safe_load((store.bundles[0] / "job.yaml").read_text())
    assert job_yaml["collection"]["node_bundles"]["node-02"] == "missing"
    assert job_yaml["collection"]["sources"][0]["source"] == "loki"
