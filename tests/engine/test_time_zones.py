"""Stamps without a zone take the node's zone, else the offset of the job's own start/end, else UTC, and
the diagnosis says which; what the job-window filter drops is reported, never silent."""

from __future__ import annotations

from pathlib import Path

from slurm_attrib.engine import Engine
from slurm_attrib.ruleset import load_ruleset

XID79 = "[Fri Nov 20 10:30:05 2026] NVRM: Xid (PCI:0000:3b:00): 79, pid=4411, name=python3, GPU has fallen off the bus."


def bundle(tmp_path: Path, start: str, end: str, facts: str = "") -> Path:
    (tmp_path / "syslog").mkdir()
    (tmp_path / "job.yaml").write_text(f"job_id: '77'\nnodes: [gpu-07]\nstart: '{start}'\nend: '{end}'\n"
                                       "state: FAILED\nexit_code: '1:0'\n")
    (tmp_path / "syslog" / "gpu-07.log").write_text(XID79 + "\n")
    if facts:
        (tmp_path / "facts").mkdir()
        (tmp_path / "facts" / "gpu-07.yaml").write_text(facts)
    return tmp_path


def engine() -> Engine:
    return Engine(load_ruleset(include_site=False))


def test_dmesg_ctime_on_a_node_outside_utc_takes_the_jobs_offset(tmp_path: Path) -> None:
    diag = engine().diagnose(bundle(tmp_path, "2026-11-20T10:00:00+02:00", "2026-11-20T10:31:00+02:00"))
    assert (diag.status, diag.category, diag.culprit_nodes) == ("attributed", "gpu_hardware", ["gpu-07"])
    assert any("+02:00 (from the offset of the job's start time)" in a for a in diag.time_assumptions)


def test_node_facts_zone_wins(tmp_path: Path) -> None:
    diag = engine().diagnose(bundle(tmp_path, "2026-11-20T09:00:00Z", "2026-11-20T09:31:00Z",
                                    facts="timezone: Europe/Berlin\n"))
    assert diag.status == "attributed"
    assert any("Europe/Berlin (from facts/gpu-07.yaml)" in a for a in diag.time_assumptions)


def test_a_fault_just_outside_the_window_is_ambiguous_and_reported(tmp_path: Path) -> None:
    # Read as UTC (no zone anywhere) the Xid lies 5 minutes after the job's end: not silently dropped
    diag = engine().diagnose(bundle(tmp_path, "2026-11-20T10:00:00Z", "2026-11-20T10:23:00Z"))
    assert diag.status == "ambiguous" and diag.culprit_nodes == []
    assert any("fell outside the job window" in a and "UTC" in a for a in diag.annotations)


def test_a_fault_hours_away_is_dropped_with_a_note(tmp_path: Path) -> None:
    diag = engine().diagnose(bundle(tmp_path, "2026-11-20T14:00:00Z", "2026-11-20T14:31:00Z"))
    assert diag.status == "unattributed"
    assert any("1 kernel symptom(s) fell outside the job window" in a for a in diag.annotations)


def test_a_log_shippers_stamp_times_lines_that_have_none(tmp_path: Path) -> None:
    """Loki exports and `kubectl logs --timestamps` put an RFC 3339 stamp before the program's line: the
    rules see the line as the program wrote it (a `^`-anchored traceback rule still matches) and the
    shipper's stamp says when, to the nanosecond as far as Python keeps it."""
    (tmp_path / "applog").mkdir()
    (tmp_path / "job.yaml").write_text("job_id: '78'\nnodes: [gpu-07]\nstart: '2026-11-20T09:00:00Z'\n"
                                       "end: '2026-11-20T09:31:00Z'\nstate: FAILED\nexit_code: '1:0'\n")
    (tmp_path / "applog" / "gpu-07.log").write_text(
        "2026-11-20T09:29:58.000000001Z [rank0]: Traceback (most recent call last):\n"
        "2026-11-20T09:29:58.000000002Z [rank0]:   File \"train.py\", line 3, in <module>\n"
        "2026-11-20T09:29:58.123456789Z [rank0]: ValueError: bad shape\n")
    diag = engine().diagnose(tmp_path)
    assert diag.root_cause is not None and diag.root_cause.kind == "python_exception"
    assert diag.root_cause.time is not None and diag.root_cause.time.isoformat() == "2026-11-20T09:29:58.123456+00:00"
    assert diag.root_cause.rank == 0
