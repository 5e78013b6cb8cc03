"""job.yaml states are read through the one Slurm state vocabulary, whatever form they were pasted in."""

from __future__ import annotations

import pytest

from slurm_attrib.bundle import job_from_mapping


@pytest.mark.parametrize("pasted, state", [("CANCELLED by 1234", "CANCELLED"), ("CANCELLED+", "CANCELLED"),
                                           ("timeout", "TIMEOUT"), (None, "")])
def test_job_and_step_states_are_normalised(pasted: object, state: str) -> None:
    problems: list[str] = []
    job = job_from_mapping({"job_id": 5, "state": pasted, "steps": [{"id": "0", "state": pasted}]}, problems)
    assert (job.state, job.steps[0].state, problems) == (state, state, [])
