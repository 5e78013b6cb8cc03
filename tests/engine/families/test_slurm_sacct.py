"""scheduler.sacct_steps reads ``sacct/*.txt`` with the access layer's ``--parsable2`` parser and the
one state vocabulary: every failed step, in any form sacct prints its state, cites its own line."""

from __future__ import annotations

from pathlib import Path

from slurm_attrib.engine import Engine

SACCT = """$ sacct -j 7 --parsable2
JobID|State|ExitCode|NodeList
7|FAILED|1:0|node-[01-02]
7.batch|failed|1:0|node-01
# the cut line below lost its last columns
7.0|CANCELLED by 0|0:9|node-01
7.1|COMPLETED|0:0|node-02
7.2|DEADLINE
7.3|RUNNING|0:0|node-02
"""


def test_failed_steps_in_every_form_cite_their_line(engine: Engine, tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text("job_id: '7'\nstate: FAILED\nnodes: [node-01, node-02]\n")
    (tmp_path / "sacct").mkdir()
    (tmp_path / "sacct" / "steps.txt").write_text(SACCT)
    ctx = engine.run(tmp_path)
    steps = [(s.fields["step"], s.fields["state"], s.evidence[0].line) for s in ctx.symptoms if s.kind == "step_state"]
    assert sorted(steps) == [("7.0", "CANCELLED", 6), ("7.2", "DEADLINE", 8), ("7.batch", "FAILED", 4)]
