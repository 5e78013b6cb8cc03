"""GPU family rules (slurm_attrib.engine.families.gpu) that read their policy from params."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_attrib.engine import Engine
from slurm_attrib.engine.families.gpu import indeterminate_cuda_error
from slurm_attrib.model import JobFacts
from slurm_attrib.ruleset import load_ruleset

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


@pytest.mark.parametrize(("lines", "first_words"), [
    (["amdgpu 0000:03:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:40 vmid:8 pasid:32779, for process python "
      "pid 4242 thread python pid 4242)"], "debug the program's GPU memory accesses"),
    (["amdgpu 0000:03:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 pasid:32779, for process python "
      "pid 4242 thread python pid 4242)", "amdgpu 0000:03:00.0: amdgpu: \t Faulty UTCL2 client ID: SDMA0 (0xd)"],
     "run the job again on another node"),
    (["[drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring gfx_0.0.0 timeout, signaled seq=20268, emitted seq=20269"],
     "see whether the ring timeout follows this GPU"),
])
def test_an_amdgpu_fault_the_code_may_have_made_does_not_say_drain_the_node(
        tmp_path: Path, lines: list[str], first_words: str) -> None:
    """The rule's action (drain the node) is for the readings that blame the GPU: a page fault read as the program's
    access, an engine's fault or a ring timeout (both readings) says what tells them apart instead, in the verdict
    where it leads and in the candidates of an ambiguous one."""
    (tmp_path / "job.yaml").write_text('job_id: "77"\ncluster: demo\nuser: ana\npartition: gpu\nnodes: [hawk]\n'
                                       'state: FAILED\nexit_code: "1:0"\n')
    (tmp_path / "syslog").mkdir()
    (tmp_path / "syslog" / "hawk.log").write_text(
        "".join(f"Dec 15 17:47:{10 + i:02d} hawk kernel: {text}\n" for i, text in enumerate(lines)))
    ctx = Engine(load_ruleset(include_site=False)).run(tmp_path)
    fault = next(sym for sym in ctx.symptoms if sym.kind == "amdgpu_fault")
    assert fault.actions[0].startswith(first_words)
    assert not any("drain the node" in action for action in [*fault.actions, *ctx.outcome.actions])
