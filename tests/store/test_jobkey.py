"""One JobKey, read alike from a diagnosis, a loaded job.yaml, the finalizer's JobInfo and a stored row."""

from __future__ import annotations

from pathlib import Path

from slurm_attrib.bundle import load_bundle
from slurm_attrib.engine import Engine
from slurm_attrib.finalizer.jobinfo import JobInfo
from slurm_attrib.store import Store
from slurm_attrib.store.rows import JobKey

from .conftest import VERDICT_TIME


def _array_bundle(tmp_path: Path) -> Path:
    tmp_path.mkdir()
    (tmp_path / "job.yaml").write_text("job_id: '9_2'\ncluster: c1\narray_job_id: '9'\narray_task_id: '2'\n"
                                       "restart_count: 3\nstate: FAILED\nnodes: [node-01]\n")
    return tmp_path


def test_every_source_gives_the_same_key(tmp_path: Path, engine: Engine) -> None:
    bundle = _array_bundle(tmp_path / "bundle")
    diag = engine.diagnose(bundle).to_dict()
    expected = JobKey(cluster="c1", job_id="9_2", array_task_id="2", restart_count=3)
    info = JobInfo(job_id="9_2", cluster="c1", restart_count=3, array_job_id="9", array_task_id="2")
    assert JobKey.of(diag) == JobKey.of_job(load_bundle(bundle).job) == JobKey.of_job(info) == expected
    with Store.open(tmp_path / "store.sqlite") as store:
        store.record(diag, VERDICT_TIME)
        assert [JobKey.of_row(row) for row in store.find("9_2")] == [expected]

