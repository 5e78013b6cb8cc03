"""The scheduler rules (slurm_attrib.engine.families.slurm): the job's state as a symptom with its
job.yaml line, and the failed steps of sacct output with their file and line."""

from __future__ import annotations

from pathlib import Path

from slurm_attrib.bundle import BundleFile
from slurm_attrib.engine.families.slurm import job_state, sacct_steps
from slurm_attrib.model import JobFacts

from ..conftest import make_context, shipped

SACCT = """\
# sacct --parsable2 -j 42
JobID|JobName|State|ExitCode|NodeList
42|train|FAILED|1:0|node-[01-02]
42.batch|batch|FAILED|1:0|node-01
42.extern|extern|COMPLETED|0:0|node-[01-02]
42.0|python|CANCELLED by 1000|0:15|node-[01-02]
42.1|python|NODE_FAIL|0:0|node-02
"""


def test_sacct_steps_keeps_failed_steps_with_their_line(tmp_path: Path) -> None:
    (tmp_path / "sacct").mkdir()
    path = tmp_path / "sacct" / "42.txt"
    path.write_text(SACCT)
    ctx = make_context(JobFacts(job_id="42", nodes=("node-01", "node-02")))
    ctx.bundle.files.append(BundleFile(rel="sacct/42.txt", path=path, source="scheduler", node=None,
                                       size=len(SACCT)))
    assert sacct_steps(ctx, shipped("scheduler.sacct_steps")) == 3
    steps = [(s.fields["step"], s.fields["state"], s.evidence[0].line) for s in ctx.symptoms]
    assert steps == [("42.batch", "FAILED", 4), ("42.0", "CANCELLED", 6), ("42.1", "NODE_FAIL", 7)]
    assert ctx.symptoms[1].summary == "step 42.0 cancelled exit 0:15"
    cov = ctx.coverage_for("sacct")
    assert (cov.files, cov.lines, cov.symptoms) == (1, 7, 3)


def test_sacct_steps_notes_an_unreadable_file(tmp_path: Path) -> None:
    ctx = make_context(JobFacts(job_id="42"))
    ctx.bundle.files.append(BundleFile(rel="sacct/gone.txt", path=tmp_path / "gone.txt", source="scheduler",
                                       node=None, size=0))
    assert sacct_steps(ctx, shipped("scheduler.sacct_steps")) == 0
    assert ctx.coverage_for("sacct").notes[0].startswith("sacct/gone.txt: cannot read")


def test_job_state_points_at_its_job_yaml_line(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text("job_id: 42\nnodes: [node-01]\nstate: TIMEOUT\n")
    ctx = make_context(JobFacts(job_id="42", state="TIMEOUT", exit_code="0:0"))
    ctx.bundle.root = tmp_path
    assert job_state(ctx, shipped("scheduler.job_state")) == 1
    (sym,) = ctx.symptoms
    assert (sym.kind, sym.fields["state"], sym.evidence[0].file, sym.evidence[0].line) == (
        "job_state", "TIMEOUT", "job.yaml", 3)
    assert job_state(make_context(JobFacts(job_id="unknown")), shipped("scheduler.job_state")) == 0
