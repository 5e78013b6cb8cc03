"""The filter phase (engine/filters.py) says what it set aside where a person reads the verdict."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from slurm_attrib.engine import Engine, filters
from slurm_attrib.engine.timeinfer import own_time
from slurm_attrib.model import JobFacts, Symptom
from slurm_attrib.ruleset import load_ruleset

from .conftest import T0, make_context, make_symptom, shipped

_XID48 = ("Nov 20 10:20:44 {node} kernel: [ 8811.004512] NVRM: Xid (PCI:0000:9b:00): 48, pid=66120, name=python3, "
          "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at physAddr "
          "0x1e3fa2000 partition 3, subpartition 0.\n")


def test_symptoms_of_a_node_outside_the_job_are_set_aside_with_a_coverage_note(tmp_path: Path) -> None:
    """A node list that does not name the node whose kernel log is there (a wrong or mangled list, another
    job's node) drops its symptoms, and the kernel log's coverage says so instead of staying silent."""
    (tmp_path / "job.yaml").write_text('job_id: "9111"\nnodes: [node-01, node-02]\nstate: FAILED\nexit_code: "1:0"\n'
                                       'start: "2026-11-20T10:00:00Z"\nend: "2026-11-20T10:40:00Z"\n')
    (tmp_path / "syslog").mkdir()
    (tmp_path / "syslog" / "node-07.log").write_text(_XID48.format(node="node-07"))
    diagnosis = Engine(load_ruleset(include_site=False)).diagnose(tmp_path).to_dict()
    kernel = next(c for c in diagnosis["coverage"] if c["connector"] == "kernel_log")
    assert diagnosis["status"] == "unattributed"
    assert any("node node-07 set aside: it is not one of the job's nodes (2 listed)" in n for n in kernel["notes"])


def test_a_task_label_hidden_by_progress_bar_redraws_still_marks_srun_words_as_the_tasks(tmp_path: Path) -> None:
    """A line longer than the scan keeps is read from its last carriage return (a progress bar's redraws), so the
    '0: ' srun --label put at its start is not in the text read: the file's own first bytes of the line still
    show it, and srun's words after the redraws stay the task's. Otherwise a task could strip its own label this
    way and have a live node (its bundle arrived) named beside the one Slurm lost."""
    (tmp_path / "job.yaml").write_text('job_id: "9112"\nnodes: [node-01, node-02]\nstate: NODE_FAIL\nexit_code: "0:0"\n'
                                       "collection:\n  node_bundles:\n    node-01: missing\n    node-02: ok\n")
    (tmp_path / "applog").mkdir()
    frames = "".join(f"\rEpoch 1:  {n % 100:>3}%|#####     | {n}/80000 [00:{n % 60:02d}<01:00, 9.9it/s]"
                     for n in range(1500))  # ~90 k characters of tqdm redraws, no newline
    (tmp_path / "applog" / "job.log").write_text(f"0: {frames}\rsrun: error: Node failure on node-02\n")
    diagnosis = Engine(load_ruleset(include_site=False)).diagnose(tmp_path).to_dict()
    assert diagnosis["category"] == "node_failure"
    assert diagnosis["culprit_nodes"] == ["node-01"]



def _stall_as_read_one_by_one(watchdogs: list[Symptom], margin: timedelta) -> datetime:
    """filter.outlived_fault's start of the last stall from every watchdog line, duplicates and all (as it was
    computed before each reading was counted once)."""
    starts = [(when - timedelta(milliseconds=int(str(sym.fields["ran_ms"]))),
               int(str(sym.fields["seq"])) if str(sym.fields.get("seq", "")).isdecimal() else None)
              for sym in watchdogs if (when := own_time(sym)) and str(sym.fields.get("ran_ms", "")).isdecimal()]
    return filters._last_stall(sorted(starts, key=lambda pair: (pair[0], pair[1] or 0)), margin, [])


def _readings(seed: int) -> list[tuple[int, str, str]]:
    """(seconds after T0, 'ran for' ms, sequence number) of a few kinds of watchdog line, repeated."""
    rng = random.Random(seed)
    kinds = [(rng.choice((0, 30, 61, 62, 125)), rng.choice(("600000", "540000", "x")), rng.choice(("", "0", "1", "7")))
             for _ in range(rng.randint(1, 4))]
    return [rng.choice(kinds) for _ in range(rng.randint(1, 8))]


# sequence number 0 and none sort alike: the stall's walk back meets the last of the two first, and the one it meets
# decides whether the earlier start is the same hang (62 s apart, the margin 60)
_TIED = [(0, "600000", ""), (0, "600000", "0"), (62, "600000", "0"), (0, "600000", "")]


@pytest.mark.parametrize("readings", [_TIED, _TIED[1:], [*_TIED[:3], _TIED[1]], *map(_readings, range(300))])
def test_each_watchdog_reading_counted_once_finds_the_stall_every_line_finds(readings: list[tuple[int, str, str]]
                                                                           ) -> None:
    """Thousands of ranks print one hang's stamp, 'ran for' and sequence number alike: read once each, in any
    mix of repeats, sequence numbers 0 and none and starts about the margin apart, the stall is the same."""
    rule = shipped("filter.outlived_fault")
    margin = timedelta(seconds=float(rule.params.get("margin_s", 60)))
    watchdogs = [make_symptom("watchdog_timeout", time=T0 + timedelta(seconds=at), ran_ms=ran,
                              **({"seq": seq} if seq else {}), **({"time_inferred": "preceding line"} if i % 5 == 4
                                                                   else {}))  # an unstamped line's is no reading
                 for i, (at, ran, seq) in enumerate(readings)]
    ctx = make_context(JobFacts(job_id="1", nodes=("node-02",)), *watchdogs)
    filters.outlived_fault(ctx, rule)
    counted = any(ran.isdecimal() for i, (_, ran, _) in enumerate(readings) if i % 5 != 4)
    assert (ctx.hang[0] if ctx.hang else None) == (_stall_as_read_one_by_one(watchdogs, margin) if counted else None)


@pytest.mark.parametrize(("step_job", "foreign"), [
    ("17", "17"),  # older than the array 4107: another job's step
    ("4112", None),  # the array's own or later: may be this task's own id
    ("²³", None),  # digits str.isdigit accepts and int refuses: never an older job, never a crash
    ("1" * 5000, None),  # more digits than int reads
])
def test_a_step_beside_an_array_task_named_only_by_the_array(step_job: str, foreign: str | None) -> None:
    """A job named only '4107_3' does not carry its own id: a step of a job older than the array is another job's,
    any other may be its own; whatever the line's 'digits', the diagnosis goes on."""
    ctx = make_context(JobFacts(job_id="4107_3", nodes=("ubuntu4",)))
    sym = make_symptom("task_launch_failed", step=f"{step_job}.0")
    assert filters._foreign_step(ctx, sym) == foreign
    # an array id that is no number (a bundle made by hand) makes no step older than it
    assert filters._foreign_step(make_context(JobFacts(job_id="train_3", nodes=("ubuntu4",))), sym) is None
