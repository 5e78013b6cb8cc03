"""Issue 11 §1: evidence has a trust level, and only evidence a user cannot write can blame a node.

Each test builds the bundle a hostile user or a broken node could produce and runs the real
``slurm-attrib diagnose`` process on it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

import pytest
import yaml

XID79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python, GPU has fallen off the bus."
JOB = {"job_id": "101", "cluster": "c1", "user": "alice", "nodes": ["node-01", "node-02"],
       "start": "2026-11-20T10:00:00Z", "end": "2026-11-20T11:00:00Z", "state": "FAILED", "exit_code": "1:0",
       "gpus_per_node": 8}
# the watchdog at 10:40 timed out a collective stuck since 10:30, when the forged or real Xid line is stamped
APP = ("0: [rank0]:[E1120 10:40:00.000000 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective "
       "operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 600012 milliseconds before timing out.\n")


def _bundle(root: Path, syslog: dict[str, str], origins: Optional[dict[str, str]] = None,
            app: str = APP, job: Optional[dict[str, Any]] = None) -> Path:
    (root / "syslog").mkdir(parents=True)
    (root / "applog").mkdir()
    (root / "job.yaml").write_text(yaml.safe_dump(job or JOB))
    (root / "applog" / "job.out").write_text(app)
    for name, text in syslog.items():
        (root / "syslog" / name).write_text(text)
    for node, origin in (origins or {}).items():
        (root / "collection").mkdir(exist_ok=True)
        (root / "collection" / f"{node}.yaml").write_text(yaml.safe_dump(
            {"sources": [{"source": "kernel_log", "state": "ok", "origin": origin}]}))
    return root


def _diagnose(bundle: Path) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "slurm_attrib.cli", "diagnose", "--no-site-rules", "--format",
                           "json", "--bundle", str(bundle)], capture_output=True, text=True, check=True, timeout=120)
    return dict(json.loads(done.stdout))


def _notes(diag: dict[str, Any]) -> str:
    return "\n".join(n for c in diag["coverage"] for n in c["notes"])


def test_a_logger_line_in_a_syslog_file_is_not_kernel_evidence(tmp_path: Path) -> None:
    """`logger "NVRM: Xid ..."` from the job: rsyslog writes it under the user's tag; before, it made
    `attributed gpu_hardware node-01`."""
    forged = f"Nov 20 10:30:00 node-01 alice[4242]: {XID79}\nNov 20 10:30:01 node-01 alice: {XID79}\n"
    diag = _diagnose(_bundle(tmp_path, {"node-01.log": forged}))
    assert diag["status"] != "attributed" and diag["culprit_nodes"] == []
    assert not any(e["source"] == "kernel" for e in diag["evidence"])
    notes = _notes(diag)
    assert "syslog/node-01.log: 1 kernel-looking line(s) refused as evidence: written by a program (tag " \
           "'alice[4242]')" in notes and "(tag 'alice')" in notes


def test_a_kernel_tagged_line_from_a_mixed_file_explains_but_is_unverified(tmp_path: Path) -> None:
    """`logger -t kernel` into /var/log/messages reads exactly like the kernel: the collector recorded
    that the window came from a mixed file, so the line is marked unverified and, with nothing trusted behind
    it, makes an ambiguous verdict that names no node (and the remediation gate never drains on it:
    tests/finalizer)."""
    line = f"Nov 20 10:30:00 node-01 kernel: {XID79}\n"
    mixed = _diagnose(_bundle(tmp_path / "mixed", {"node-01.log": line}, {"node-01": "mixed-file"}))
    assert mixed["status"] == "ambiguous" and mixed["category"] == "gpu_hardware"
    assert mixed["candidates"][0]["evidence"][0]["trust"] == "unverified"
    assert mixed["culprit_nodes"] == [] and "any local program can write" in " ".join(mixed["annotations"])
    kernel = _diagnose(_bundle(tmp_path / "journald", {"node-01.log": line}, {"node-01": "journald"}))
    assert kernel["root_cause"]["evidence"][0]["trust"] == "kernel" and kernel["culprit_nodes"] == ["node-01"]
    legacy = _diagnose(_bundle(tmp_path / "legacy", {"node-01.log": line}, {"node-01": "something-else"}))
    assert legacy["candidates"][0]["evidence"][0]["trust"] == "unverified" and legacy["culprit_nodes"] == []


@pytest.mark.parametrize("origin", ["kern-file", "shipped"])
def test_kern_log_and_shipped_lines_are_unverified(tmp_path: Path, origin: str) -> None:
    """A raw write to /dev/log chooses its own facility ('<3>kernel: NVRM: Xid ...': rsyslog's imuxsock keeps it), so
    kern.log holds what a user sent as well as the kernel's lines; a shipper's record says nothing of its writer
    either. Before, a forged Xid in kern.log made `attributed gpu_hardware node-01`."""
    line = f"Nov 20 10:30:00 node-01 kernel: {XID79}\n"
    diag = _diagnose(_bundle(tmp_path, {"node-01.log": line}, {"node-01": origin}))
    assert diag["status"] == "ambiguous" and diag["culprit_nodes"] == []
    assert diag["candidates"][0]["evidence"][0]["trust"] == "unverified"


def test_a_fault_only_the_kernel_writes_outranks_a_forgeable_one(tmp_path: Path) -> None:
    """A forged Xid 79 in node-01's kern.log beside a real Xid 48 in node-02's journal: the journal's line, which only
    the kernel writes, decides; the stronger forgeable one neither wins nor makes the verdict ambiguous."""
    xid48 = "NVRM: Xid (PCI:0000:3b:00): 48, pid=1911, name=python, An uncorrectable double bit error (DBE) has been " \
            "detected on GPU in the framebuffer at partition 0, subpartition 0."
    diag = _diagnose(_bundle(tmp_path, {"node-01.log": f"Nov 20 10:30:00 node-01 kernel: {XID79}\n",
                                        "node-02.log": f"Nov 20 10:30:05 node-02 kernel: {xid48}\n"},
                             {"node-01": "kern-file", "node-02": "journald"}))
    assert diag["status"] == "attributed" and diag["culprit_nodes"] == ["node-02"]
    assert diag["root_cause"]["evidence"][0]["trust"] == "kernel"


@pytest.mark.parametrize("line", [f"Nov 20 10:30:00 node-02 kernel: {XID79}",
                                  f"node-02: [Fri Nov 20 10:30:00 2026] {XID79}"])  # pdsh's prefix
def test_a_line_naming_another_node_is_not_evidence_about_this_one(tmp_path: Path, line: str) -> None:
    """node-01's log carrying a line whose host is node-02: neither node is blamed on it."""
    diag = _diagnose(_bundle(tmp_path, {"node-01.log": line + "\n"}, {"node-01": "journald"}))
    assert diag["culprit_nodes"] == [] and not any(e["source"] == "kernel" for e in diag["evidence"])
    assert "host node-02 named inside node-01's log" in _notes(diag)


def test_a_central_syslog_file_gives_each_line_the_node_its_host_names(tmp_path: Path) -> None:
    """A hand-made bundle with the site's central syslog (or `pdsh -w node-[01-02] dmesg -T` output) in
    one file: a line is about the node its host names, not about the file."""
    central = (f"Nov 20 10:29:59 node-01 kernel: mlx5_core 0000:0c:00.0: Port module event: module 0, "
               f"Cable plugged\nNov 20 10:30:00 node-02 kernel: {XID79}\n")
    diag = _diagnose(_bundle(tmp_path / "central", {"central.log": central}))
    assert diag["status"] == "attributed" and diag["culprit_nodes"] == ["node-02"]
    pdsh = f"node-01: [Fri Nov 20 10:29:00 2026] nvidia-peermem: loaded\nnode-02: [Fri Nov 20 10:30:00 2026] {XID79}\n"
    diag = _diagnose(_bundle(tmp_path / "pdsh", {"pdsh.log": pdsh}))
    assert diag["status"] == "attributed" and diag["culprit_nodes"] == ["node-02"]
    assert diag["root_cause"]["time"] == "2026-11-20T10:30:00.000000Z"


def test_a_tagless_kernel_message_still_counts_but_unverified(tmp_path: Path) -> None:
    """A forwarder that drops the `kernel:` tag (`node-01 NVRM: Xid ...`): the text is the kernel's, but
    `logger -t NVRM` writes the same bytes, so it is unverified: it explains the failure, naming no node."""
    line = f"Nov 20 10:30:00 node-01 {XID79}\n"
    diag = _diagnose(_bundle(tmp_path / "shipped", {"node-01.log": line}, {"node-01": "shipped"}))
    assert diag["status"] == "ambiguous" and diag["category"] == "gpu_hardware" and diag["culprit_nodes"] == []
    assert diag["candidates"][0]["evidence"][0]["trust"] == "unverified"


def test_a_program_write_to_dev_kmsg_is_not_the_kernels(tmp_path: Path) -> None:
    """A fault injector (gpud's, ai-dynamo's) or a user with access writes 'NVRM: Xid ...' to /dev/kmsg: the
    journal keeps it on the kernel transport but with the program's identifier and facility, and dmesg -x shows
    its facility. The collector's `journalctl -k` line tagged NVRM, the journal record with facility 1 and
    `dmesg -x`'s 'syslog:err' line are refused; the kernel's own (kern, identifier kernel) stays."""
    journal = _diagnose(_bundle(tmp_path / "journal", {"node-01.log": f"Nov 20 10:30:00 node-01 {XID79}\n"},
                                {"node-01": "journald"}))
    record = json.dumps({"__REALTIME_TIMESTAMP": "1795170600000000", "_TRANSPORT": "kernel", "PRIORITY": "3",
                         "SYSLOG_FACILITY": "1", "SYSLOG_IDENTIFIER": "NVRM", "_HOSTNAME": "node-01",
                         "MESSAGE": XID79})
    exported = _diagnose(_bundle(tmp_path / "json", {"node-01.log": record + "\n"}, {"node-01": "journald"}))
    decoded = _diagnose(_bundle(tmp_path / "dmesg", {
        "node-01.log": f"syslog:err   : 2026-11-20T10:30:00,089671+00:00 {XID79}\n"}, {"node-01": "dmesg"}))
    for diag in (journal, exported, decoded):
        assert diag["culprit_nodes"] == [] and not any(e["source"] == "kernel" for e in diag["evidence"])
    kernel = _diagnose(_bundle(tmp_path / "kern", {
        "node-01.log": f"kern  :err   : 2026-11-20T10:30:00,089671+00:00 {XID79}\n"}, {"node-01": "dmesg"}))
    assert kernel["culprit_nodes"] == ["node-01"]


def test_ring_buffer_lines_are_the_kernels(tmp_path: Path) -> None:
    diag = _diagnose(_bundle(tmp_path, {"node-01.log": f"2026-11-20T10:30:00,000000+00:00 {XID79}\n"},
                             {"node-01": "dmesg"}))
    assert diag["culprit_nodes"] == ["node-01"] and diag["root_cause"]["evidence"][0]["trust"] == "kernel"


def test_an_adapter_failure_only_the_job_output_names_blames_no_node(tmp_path: Path) -> None:
    """A job that prints PSM's glued 'host.pid' prefix naming node-02 before its driver message: the job's output
    is the user's to write, and node-02's own kernel log, collected from its journal, shows no adapter fault,
    so node-02 is not named (with a trusted log that is silent). Without such a log it stays the application's
    report, never a drain."""
    app = "node-02.25191Driver initialization failure on /dev/ipath (err=23)\n"
    quiet = "Nov 20 10:29:00 node-02 kernel: nvidia-peermem: loaded\n"
    diag = _diagnose(_bundle(tmp_path / "trusted", {"node-02.log": quiet}, {"node-02": "journald"}, app=app))
    assert diag["category"] == "network" and diag["culprit_nodes"] == []
    assert any("network adapter failed" in a for a in diag["annotations"])
    untrusted = _diagnose(_bundle(tmp_path / "none", {}, app=app))
    assert untrusted["culprit_nodes"] == ["node-02"]
    assert any("reported by the application only" in a for a in untrusted["annotations"])


def _pretty(fields: dict[str, str]) -> str:
    """One record as `journalctl -o json-pretty` prints it: a field per line between braces."""
    body = ",\n".join(f'\t"{name}" : {json.dumps(value)}' for name, value in fields.items())
    return "{\n" + body + "\n}\n"


def test_json_pretty_records_are_read_whole(tmp_path: Path) -> None:
    """`journalctl -o json-pretty` writes each field on its own line. A container's stdout that imitates an Xid is
    the container's (its record's transport says so), and the kernel's own record is placed by its
    __REALTIME_TIMESTAMP, not left without a time (a week-old Xid then counted as in the job)."""
    base = {"__REALTIME_TIMESTAMP": "1795170600000000", "_HOSTNAME": "node-01"}
    container = _pretty({**base, "_TRANSPORT": "journal", "_COMM": "dockerd", "CONTAINER_NAME": "alice-train",
                         "MESSAGE": XID79})
    forged = _diagnose(_bundle(tmp_path / "container", {"node-01.log": container}))
    assert forged["culprit_nodes"] == [] and not any(e["source"] == "kernel" for e in forged["evidence"])
    kernel = _pretty({**base, "_TRANSPORT": "kernel", "SYSLOG_IDENTIFIER": "kernel", "MESSAGE": XID79})
    real = _diagnose(_bundle(tmp_path / "kernel", {"node-01.log": kernel}))
    assert real["culprit_nodes"] == ["node-01"] and real["root_cause"]["time"] == "2026-11-20T10:30:00.000000Z"
    old = _pretty({**base, "__REALTIME_TIMESTAMP": "1794565800000000", "_TRANSPORT": "kernel",
                   "SYSLOG_IDENTIFIER": "kernel", "MESSAGE": XID79})  # a week before the job
    assert _diagnose(_bundle(tmp_path / "old", {"node-01.log": old}))["culprit_nodes"] == []


def test_fluent_bit_kmsg_records_carry_their_time(tmp_path: Path) -> None:
    """Fluent Bit's stdout output of its kmsg input: the record's epoch places the line (an Xid three days before
    the job no longer counts in it), and nothing in the record says the kernel wrote it (unverified)."""
    def record(epoch: str) -> str:
        return f'[3] kmsg.0: [{epoch}, {{"priority"=>4, "sequence"=>1912, "sec"=>219, "usec"=>470994, ' \
               f'"msg"=>"{XID79}"}}]\n'
    inside = _diagnose(_bundle(tmp_path / "inside", {"node-01.log": record("1795170600")}))
    assert inside["root_cause"]["time"] == "2026-11-20T10:30:00.000000Z"
    assert inside["root_cause"]["evidence"][0]["trust"] == "unverified"
    v21 = _diagnose(_bundle(tmp_path / "v21", {"node-01.log": record("[1795170600.470994000, {}]")}))
    assert v21["root_cause"]["time"] == "2026-11-20T10:30:00.470994Z"
    old = _diagnose(_bundle(tmp_path / "old", {"node-01.log": record("1794911400")}))  # three days earlier
    assert old["culprit_nodes"] == [] and not any(e["source"] == "kernel" for e in old["evidence"])


def test_a_program_line_in_journalctl_short_monotonic_is_refused(tmp_path: Path) -> None:
    """`journalctl -o short-monotonic` of the whole journal puts the node's name and the writing program after
    the uptime: a program's 'NVRM: Xid' there is the program's; the kernel's own line stays evidence."""
    forged = f"[ 856341.770960] node-01 alice[4242]: {XID79}\n"
    diag = _diagnose(_bundle(tmp_path / "forged", {"node-01.log": forged}))
    assert diag["culprit_nodes"] == [] and not any(e["source"] == "kernel" for e in diag["evidence"])
    real = f"[ 856341.770960] node-01 kernel: {XID79}\n"
    facts_job = dict(JOB, nodes=["node-01"])
    kept = _diagnose(_bundle(tmp_path / "real", {"node-01.log": real}, job=facts_job))
    assert any(e["source"] == "kernel" for e in kept["evidence"])


def test_a_printed_fabric_memory_error_does_not_hide_a_peers_xid(tmp_path: Path) -> None:
    """A fabric-memory call refused across nodes reads as the NVLink domain's or the program's; a user can print it.
    Seconds before the GPU of the peer it maps fell off the bus (the journal's own line), it must not leave the Xid
    out of the verdict."""
    app = "2026-11-20T10:30:00 [rank3]: Failed: CUDA error in cuMemSetAccess: invalid argument\n"
    diag = _diagnose(_bundle(tmp_path, {"node-02.log": f"Nov 20 10:30:05 node-02 kernel: {XID79}\n"},
                             {"node-02": "journald"}, app=app))
    named = {(c["category"], c.get("node")) for c in diag["candidates"]} if diag["status"] == "ambiguous" else set()
    assert diag["culprit_nodes"] == ["node-02"] or ("gpu_hardware", "node-02") in named


def test_a_workload_event_the_kernel_logs_does_not_set_a_syslog_fault_aside(tmp_path: Path) -> None:
    """An OOM kill the job itself causes is a line only the kernel writes, but it confirms no infrastructure fault:
    an unverified Xid 20 s before it still competes (the verdict names neither node)."""
    oom = ("Nov 20 10:30:20 node-01 kernel: Out of memory: Killed process 4242 (python) total-vm:81234567kB, "
           "anon-rss:61234567kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:123456kB oom_score_adj:0")
    diag = _diagnose(_bundle(tmp_path, {"node-01.log": oom + "\n",
                                        "node-02.log": f"Nov 20 10:30:00 node-02 kernel: {XID79}\n"},
                             {"node-01": "journald", "node-02": "mixed-file"}))
    assert diag["culprit_nodes"] == []
    categories = {c["category"] for c in diag.get("candidates", [])} | {diag["category"]}
    assert "gpu_hardware" in categories


def test_a_node_local_kern_log_keeps_the_nodes_own_host_name(tmp_path: Path) -> None:
    """kern.log is the node's own file: a host name in it that is not the NodeName (a cloud VM's) is the node's name
    for itself, so its lines are kept, unverified, not refused as another machine's."""
    line = f"Nov 20 10:30:00 ip-10-0-1-17 kernel: {XID79}\n"
    diag = _diagnose(_bundle(tmp_path, {"node-01.log": line}, {"node-01": "kern-file"}))
    assert diag["status"] == "ambiguous" and diag["culprit_nodes"] == []
    assert diag["candidates"][0]["node"] == "node-01"
