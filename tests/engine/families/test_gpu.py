"""GPU family rules (slurm_attrib.engine.families.gpu) that read their policy from params."""

from __future__ import annotations

from slurm_attrib.engine.families.gpu import indeterminate_cuda_error
from slurm_attrib.model import JobFacts

from ..conftest import make_context, make_symptom, shipped


def test_an_indeterminate_cuda_error_carries_the_readings_of_params() -> None:
    job = JobFacts(job_id="7", nodes=("node-01",))
    cuda = make_symptom("cuda_error", role="candidate", indeterminate=True)
    plain = make_symptom("cuda_error", role="candidate")
    ctx = make_context(job, cuda, plain)
    assert indeterminate_cuda_error(ctx, shipped("refine.gpu_indeterminate_cuda_error")) == 1
    assert cuda.fields["readings"] == ["gpu_hardware", "application"]
    assert "readings" not in plain.fields
    cuda.fields.pop("readings")
    indeterminate_cuda_error(ctx, shipped("refine.gpu_indeterminate_cuda_error", readings=["nvlink", "application"]))
    assert cuda.fields["readings"] == ["nvlink", "application"]
