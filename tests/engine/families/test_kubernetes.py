"""The kubelet's words about a pod's end (engine/families/kubernetes.py): whether a lost container is
evidence against its node, and what an eviction's resource says."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_attrib.engine import Engine

JOB = ('job_id: "ml/train-7"\ncluster: kubernetes\nnodes: [gpu-k01]\nstart: "2026-11-20T10:00:00Z"\n'
       'end: "2026-11-20T10:30:00Z"\nstate: FAILED\nexit_code: "137:0"\n')
POD = "2026-11-20T10:21:10Z kubernetes {what} pod=ml/train-7-worker-0 node=gpu-k01 "


def _symptoms(engine: Engine, tmp_path: Path, line: str) -> list[tuple[str, str, str]]:
    (tmp_path / "sacct").mkdir()
    (tmp_path / "job.yaml").write_text(JOB)
    (tmp_path / "sacct" / "kubernetes.txt").write_text(line + "\n")
    return [(s.kind, s.role, s.category) for s in engine.run(tmp_path).symptoms if s.kind != "job_state"]


@pytest.mark.parametrize(("message", "role"), [
    ("The container could not be located when the pod was terminated", "context"),
    ("The container could not be located when the pod was deleted.  The container used to be Running", "candidate"),
])
def test_a_container_that_never_ran_is_no_evidence_against_its_node(engine: Engine, tmp_path: Path, message: str,
                                                                    role: str) -> None:
    line = (POD.format(what="container") + "container=main state=current reason=ContainerStatusUnknown "
            f'exit_code=137 signal=0 restarts=0 message="{message}"')
    assert _symptoms(engine, tmp_path, line) == [("container_status_unknown", role, "node_failure")]


@pytest.mark.parametrize(("message", "role", "category"), [
    ("The node was low on resource: memory. Threshold quantity: 100Mi, available: 60Mi.", "candidate", "host_oom"),
    ("The node was low on resource: nodefs.", "candidate", "storage"),
    ("The node was low on resource: pids.", "candidate", "unknown"),
    ("The node had condition: [DiskPressure].", "context", "unknown"),
])
def test_an_eviction_is_read_for_its_resource(engine: Engine, tmp_path: Path, message: str, role: str,
                                             category: str) -> None:
    line = POD.format(what="pod") + f'phase=Failed reason=Evicted message="{message}"'
    assert _symptoms(engine, tmp_path, line) == [("pod_evicted", role, category)]
