"""AdminComment segment and merge, job facts from real hook environments, remediation caps (output-path
patterns and the safe tail read: tests/connectors/test_applog.py)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from slurm_attrib.config import RemediationConfig
from slurm_attrib.finalizer import comment, jobinfo
from slurm_attrib.finalizer.queue import QueueEntry, group_entries
from slurm_attrib.remediate import DrainLedger, RemediationError, Remediator
from slurm_attrib.slurm.records import AcctRecord, ControllerJob

from .fakes import FakeSlurm

DUMPS = Path(__file__).resolve().parents[1] / "slurm" / "data"
DIAG = {"status": "attributed", "category": "gpu_hardware", "responsible": "infrastructure",
        "culprit_nodes": ["node-02"], "annotations": [],
        "root_cause": {"kind": "xid", "gpu": "0000:3B:00", "fields": {"code": 79}, "time": "2026-12-02T11:00:00Z",
                       "evidence": [{"source": "kernel", "trust": "kernel", "node": "node-02"}]}}


def test_segment_is_short_lower_case_and_safe() -> None:
    seg = comment.verdict_segment({**DIAG, "category": 'Gpu"Hardware|x'}, "AbC'1")
    assert seg == "slurm-attrib/v1:st=attributed,cat=gpu-hardware-x,node=node-02,gpu=0000:3b:00,root=xid-79,id=abc-1"
    assert seg == seg.lower() and not set("\"'| ;") & set(seg)


@pytest.mark.parametrize("existing, expected", [
    ("", "S"), ("JS1:abcd", "JS1:abcd; S"),
    ("slurm-attrib/v1:st=old,id=1", "S"),
    ("js1:x; slurm-attrib/v1:st=old,id=1; note", "js1:x; note; S"),
    ("slurm-attrib/v0:st=old; keep me", "keep me; S"),
])
def test_merge_replaces_only_our_segment(existing: str, expected: str) -> None:
    assert comment.merge(existing, "S") == expected


def test_array_tasks_are_addressed_as_array_underscore_task() -> None:
    assert comment.job_ref("8", "7", "1") == "7_1" and comment.job_ref("12", "", "") == "12"


def _row(shown: str, raw: str) -> AcctRecord:
    return AcctRecord(job_id=shown, job_id_raw=raw, state="FAILED")


@pytest.mark.parametrize("ref, job_id, rows, expected", [
    ("9_2", "9", [], "9_2"),  # <array>_<task> names one task
    ("12", "12", [_row("12", "12"), _row("12.batch", "12.batch")], "12"),  # not an array
    ("9", "9", [_row("9_1", "10"), _row("9_2", "9"), _row("9_2.batch", "9.batch")], "9_2"),
    ("9", "9", [_row("9_1", "10"), _row("9_[2]", "9")], None),  # own task record not in sacct yet
    ("9", "9", [_row("9_1", "10"), _row("9", "9")], None),
])
def test_safe_ref_never_lets_an_array_id_through(ref: str, job_id: str, rows: list[AcctRecord],
                                                 expected: str) -> None:
    assert comment.safe_ref(ref, job_id, rows) == expected


@pytest.mark.parametrize("state, ok", [("COMPLETED", True), ("FAILED", True), ("PENDING", True),
                                       ("COMPLETING", False), ("RUNNING", False), ("", False)])
def test_only_settled_states_count(state: str, ok: bool) -> None:
    assert jobinfo.settled(state) is ok
    info = jobinfo.JobInfo(job_id="5", cluster="c", restart_count=0)
    ctl = ControllerJob(job_id="5", state=state, exit_code="0:0")
    assert jobinfo.with_controller(info, ctl).state == (state if ok else "")
    alloc = AcctRecord(job_id="5", job_id_raw="5", state=state)
    assert jobinfo.with_accounting(info, alloc).state == (state if ok and state != "PENDING" else "")


@pytest.mark.parametrize("state", ["REQUEUED", "REQUEUE_HOLD"])
def test_sacct_says_requeued_only_in_so_many_words(state: str) -> None:
    info = jobinfo.JobInfo(job_id="5", cluster="c", restart_count=0)
    assert jobinfo.with_accounting(info, AcctRecord(job_id="5", job_id_raw="5", state=state)).state == state


def _entry(name: str, hook: str) -> QueueEntry:
    lines = (DUMPS / name).read_text().splitlines()
    env = dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))
    return QueueEntry(Path(name), hook, 1.0, env)


def test_job_facts_from_real_hook_environments() -> None:
    (job,) = group_entries([_entry("hook-epilog_slurmctld-step-exit7.env", "epilog_slurmctld")])
    info = jobinfo.from_hooks(job)
    assert info.exit_code == "0:0" and info.derived_exit_code == "7:0" and info.nodes == ("node-01", "node-02")
    assert jobinfo.node_epilog_collects(job, False) is True
    (arr,) = group_entries([_entry("hook-epilog_slurmctld-array.env", "epilog_slurmctld")])
    assert (arr.key, jobinfo.from_hooks(arr).array_job_id, jobinfo.from_hooks(arr).array_task_id) == ("mini_7_0", "7",
                                                                                                       "2")
    (comp,) = group_entries([_entry("hook-jobcomp-timeout.env", "jobcomp")])
    facts = jobinfo.from_hooks(comp)
    assert comp.restart_count is None and facts.state == "TIMEOUT" and facts.state_source == "jobcomp"
    assert facts.array_job_id == "" and facts.end == datetime.fromtimestamp(1796218434, tz=timezone.utc)
    assert jobinfo.node_epilog_collects(comp, False) is False


NOW = datetime(2026, 12, 2, 12, tzinfo=timezone.utc)


def _remediator(tmp_path: Path, slurm: FakeSlurm, **cfg: object) -> Remediator:
    config = RemediationConfig(**{"drain": True, "dry_run": False, "max_partition_percent": 50.0,
                                  "max_nodes_per_hour": 2, **cfg})  # type: ignore[arg-type]
    return Remediator(config, slurm, DrainLedger(tmp_path / "drains.json"))


def test_remediation_off_by_default_and_dry_run(tmp_path: Path) -> None:
    slurm = FakeSlurm()
    off = Remediator(RemediationConfig(), slurm, DrainLedger(tmp_path / "d.json"))
    assert off.consider(DIAG, "debug", "5", NOW)[0].action == "skipped"
    assert _remediator(tmp_path, slurm, dry_run=True).consider(DIAG, "debug", "5", NOW)[0].action == "dry-run"
    assert slurm.drained == {}


def test_remediation_caps_and_gates(tmp_path: Path) -> None:
    slurm = FakeSlurm()
    rem = _remediator(tmp_path, slurm)
    assert rem.consider({**DIAG, "category": "application"}, "debug", "1", NOW)[0].action == "skipped"
    assert rem.consider({**DIAG, "status": "ambiguous"}, "debug", "1", NOW)[0].action == "skipped"
    assert rem.consider(DIAG, "debug", "1", NOW)[0].action == "drained"
    second = rem.consider({**DIAG, "culprit_nodes": ["node-03"]}, "debug", "2", NOW + timedelta(minutes=1))[0]
    assert second.action == "drained"
    third = rem.consider({**DIAG, "culprit_nodes": ["node-04"]}, "debug", "3", NOW + timedelta(minutes=2))[0]
    assert third.action == "skipped" and "cap" in third.why
    hourly = _remediator(tmp_path / "h", FakeSlurm(), max_nodes_per_hour=1, max_partition_percent=100.0)
    hourly.consider(DIAG, "debug", "1", NOW)
    assert "last hour" in hourly.consider({**DIAG, "culprit_nodes": ["node-03"]}, "debug", "2",
                                          NOW + timedelta(minutes=5))[0].why
    assert hourly.consider({**DIAG, "culprit_nodes": ["node-03"]}, "debug", "2",
                           NOW + timedelta(hours=2))[0].action == "drained"


def test_repeat_offender_requirement(tmp_path: Path) -> None:
    rem = _remediator(tmp_path, FakeSlurm(), require_repeat_offender=True)
    assert rem.consider(DIAG, "debug", "1", NOW)[0].action == "skipped"
    flagged = {**DIAG, "annotations": ["repeat offender: node-02 was the culprit of 3 earlier job(s)"]}
    assert rem.consider(flagged, "debug", "1", NOW)[0].action == "drained"


def test_never_resumes_a_node_it_did_not_drain(tmp_path: Path) -> None:
    slurm = FakeSlurm(drained={"node-01": "admin: bad dimm"})
    rem = _remediator(tmp_path, slurm)
    with pytest.raises(RemediationError, match="not drained by slurm-attrib"):
        rem.resume("node-01", NOW)
    rem.consider(DIAG, "debug", "1", NOW)
    slurm.drained["node-02"] = "admin took over"
    with pytest.raises(RemediationError, match="no longer ours"):
        rem.resume("node-02", NOW)
    slurm.drained["node-02"] = "slurm-attrib: gpu_hardware xid 79 job 1"
    assert rem.resume("node-02", NOW).action == "resumed" and "node-02" not in slurm.drained
    assert slurm.drained == {"node-01": "admin: bad dimm"}


@pytest.mark.parametrize("evidence", [
    [{"source": "app", "node": "node-02"}],  # `CUDA error: uncorrectable ECC error` printed by the job
    [{"source": "kernel", "trust": "unverified", "node": "node-02"}],  # a kernel-tagged line in /var/log/messages
    [{"source": "kernel", "node": "node-02"}],  # no trust recorded: never assumed
    [{"source": "diag", "node": "node-02"}],  # tool output someone pasted into the bundle
    [],
])
def test_only_evidence_a_user_cannot_write_drains(tmp_path: Path, evidence: list[dict[str, str]]) -> None:
    slurm = FakeSlurm()
    diag = {**DIAG, "root_cause": {**DIAG["root_cause"], "evidence": evidence}}  # type: ignore[dict-item]
    decision = _remediator(tmp_path, slurm).consider(diag, "debug", "1", NOW)[0]
    assert decision.action == "skipped" and "a user could have written" in decision.why and slurm.drained == {}
    telemetry = {**DIAG, "root_cause": {**DIAG["root_cause"], "evidence": [  # type: ignore[dict-item]
        *evidence, {"source": "metrics", "node": "node-02"}]}}
    assert _remediator(tmp_path / "m", slurm).consider(telemetry, "debug", "1", NOW)[0].action == "drained"


def test_an_event_one_of_our_drains_answered_never_drains_again(tmp_path: Path) -> None:
    """Xid at 11:00, drained for job 1; the admin resumes the node; job 2's bundle still carries the
    11:00 line (the Epilog ships the last hour): no second drain. A new Xid at 12:30 drains again."""
    slurm = FakeSlurm()
    rem = _remediator(tmp_path, slurm, max_partition_percent=100.0)
    assert rem.consider(DIAG, "debug", "1", NOW)[0].action == "drained"
    del slurm.drained["node-02"]  # scontrol update nodename=node-02 state=resume, by the admin
    again = rem.consider(DIAG, "debug", "2", NOW + timedelta(minutes=20))[0]
    assert again.action == "skipped" and "already remediated" in again.why and "node-02" not in slurm.drained
    fresh = {**DIAG, "root_cause": {**DIAG["root_cause"], "time": (NOW + timedelta(minutes=30)).isoformat()}}
    assert rem.consider(fresh, "debug", "3", NOW + timedelta(minutes=40))[0].action == "drained"


def test_a_node_bundle_contributes_its_own_nodes_evidence_only(tmp_path: Path) -> None:
    """node-02's bundle carrying syslog/node-01.log (an Xid) would overwrite node-01's own log and get
    node-01 blamed and drained; it is left out and named."""
    from slurm_attrib.finalizer import nodebundles

    source = tmp_path / "nodes" / "c_1_0" / "node-02"
    (source / "syslog").mkdir(parents=True)
    (source / "metrics").mkdir()
    (source / "syslog" / "node-02.log").write_text("Dec  2 12:00:00 node-02 kernel: ok\n")
    (source / "syslog" / "node-01.log").write_text("Dec  2 12:00:00 node-01 kernel: NVRM: Xid (PCI:0000:3b:00): 79\n")
    (source / "metrics" / "node-02.dcgm.txt").write_text("")
    (source / "metrics" / "node-020.xml").write_text("")
    dest = tmp_path / "job"
    skipped: list[str] = []
    assert nodebundles.copy_evidence(source, dest, "node-02", skipped=skipped) == 2
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()) == [
        "metrics/node-02.dcgm.txt", "syslog/node-02.log"]
    assert skipped == ["node-02: syslog/node-01.log left out: a node bundle holds its own node's evidence only",
                       "node-02: metrics/node-020.xml left out: a node bundle holds its own node's evidence only"]


def test_a_jobcomp_record_without_a_cluster_joins_its_job(tmp_path: Path) -> None:
    """jobcomp/script for a user without an association: CLUSTER is empty. It made a second job (and a
    second verdict) under the cluster 'cluster'; it joins the job's EpilogSlurmctld entry, or takes the
    configured cluster when it is alone."""
    ctld = QueueEntry(tmp_path / "a.json", "epilog_slurmctld", 100.0,
                      {"SLURM_CLUSTER_NAME": "mini", "SLURM_JOB_ID": "44", "SLURM_JOB_RESTART_COUNT": "0"})
    comp = QueueEntry(tmp_path / "b.jobcomp.json", "jobcomp", 100.1, {"CLUSTER": "", "JOBID": "44",
                                                                      "JOBSTATE": "FAILED", "START": "90"})
    (job,) = group_entries([ctld, comp])
    assert job.key == "mini_44_0" and [e.hook for e in job.entries] == ["epilog_slurmctld", "jobcomp"]
    (alone,) = group_entries([comp], default_cluster="mini")
    assert (alone.cluster, alone.job_id, alone.restart_count) == ("mini", "44", None)
