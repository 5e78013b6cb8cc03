"""The one Slurm job state vocabulary: its names, the sets built from them, the forms it reads, and
that every state table of the package speaks it."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

import slurm_attrib.slurm as slurm_package
from slurm_attrib.finalizer import jobinfo
from slurm_attrib.ruleset import load_ruleset
from slurm_attrib.slurm import base, cli_backend, states


def test_names_are_unique_and_base_and_flag_names_do_not_overlap() -> None:
    assert len(set(states.JOB_STATES)) == len(states.JOB_STATES)
    assert not set(states.BASE_STATES) & set(states.FLAG_STATES)


def test_terminal_failed_and_history_sets_nest() -> None:
    assert set(states.TERMINAL_STATES) <= set(states.BASE_STATES)
    assert set(states.FAILED_STATES) == set(states.TERMINAL_STATES) - {"COMPLETED"}
    assert set(states.HISTORY_STATES) < set(states.FAILED_STATES)
    assert set(states.REQUEUED_STATES) <= set(states.JOB_STATES)
    assert not set(states.REQUEUED_STATES) & set(states.TERMINAL_STATES)


def test_every_way_a_job_can_end_badly_is_a_failure() -> None:
    # the tables once disagreed: the backfill's list lacked BOOT_FAIL and DEADLINE
    assert {"BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED"} <= set(states.FAILED_STATES)
    assert "BOOT_FAIL" in states.HISTORY_STATES and "CANCELLED" not in states.HISTORY_STATES


@pytest.mark.parametrize("text, name", [
    ("CANCELLED by 1234", "CANCELLED"),  # sacct names who cancelled
    ("CANCELLED+", "CANCELLED"),  # sacct's fixed-width column cut the value
    ("FAILED,LAUNCH_FAILED", "FAILED"),  # job_state_string_complete
    ("  out_of_memory ", "OUT_OF_MEMORY"),  # typed by hand
    ("NODE_FAIL", "NODE_FAIL"),
    ("", ""),
    ("   ", ""),
])
def test_normalise_reads_every_form(text: str, name: str) -> None:
    assert states.normalise(text) == name


def test_every_name_normalises_to_itself() -> None:
    assert [states.normalise(s) for s in states.JOB_STATES] == list(states.JOB_STATES)


def _params(rule_id: str) -> dict[str, Any]:
    rule = load_ruleset(include_site=False).get(rule_id)
    assert rule is not None
    return rule.params


@pytest.mark.parametrize("table, names", [
    ("final.scheduler_state params.state_outcomes", list(_params("final.scheduler_state")["state_outcomes"])),
    ("final.scheduler_state params.memory_kill_states", _params("final.scheduler_state")["memory_kill_states"]),
    ("final.root_cause params.success_states", _params("final.root_cause")["success_states"]),
    ("slurm.base.SlurmAccess.node_history default", list(base.HISTORY_STATES)),
    ("slurm.cli_backend.FAILED_STATES", list(cli_backend.FAILED_STATES)),
    ("finalizer.jobinfo.REQUEUED_STATES", list(jobinfo.REQUEUED_STATES)),
])
def test_every_state_table_uses_known_names(table: str, names: list[str]) -> None:
    assert set(names) <= set(states.JOB_STATES), f"{table}: {sorted(set(names) - set(states.JOB_STATES))}"


def test_every_terminal_state_settles_a_job_and_no_running_one_does() -> None:
    assert all(jobinfo.settled(s) for s in states.TERMINAL_STATES + states.REQUEUED_STATES)
    assert not any(jobinfo.settled(s) for s in ("RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "STAGE_OUT"))


def _modules_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    return set(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                              text=True).stdout.split())


def test_the_vocabulary_and_the_parser_import_no_backend() -> None:
    """The engine and the node collector import them: no subprocess, no backend, no logging set-up."""
    loaded = _modules_after("import slurm_attrib.slurm.states, slurm_attrib.slurm.parse")
    assert not {"subprocess", "slurm_attrib.slurm.cli_backend", "slurm_attrib.slurm.pyslurm_backend",
                "slurm_attrib.slurm.runner"} & loaded
    assert "slurm_attrib.slurm.cli_backend" in _modules_after("from slurm_attrib.slurm import CliSlurm")


def test_the_package_still_offers_every_name_it_lists() -> None:
    assert all(getattr(slurm_package, name) is not None for name in slurm_package.__all__)
    with pytest.raises(AttributeError):
        _ = slurm_package.NoSuchName  # type: ignore[attr-defined]
