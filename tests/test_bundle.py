"""job.yaml states are read through the one Slurm state vocabulary, whatever form they were pasted in."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_attrib import bundle as bundle_module
from slurm_attrib.bundle import job_from_mapping, load_bundle


@pytest.mark.parametrize("pasted, state", [("CANCELLED by 1234", "CANCELLED"), ("CANCELLED+", "CANCELLED"),
                                           ("timeout", "TIMEOUT"), (None, "")])
def test_job_and_step_states_are_normalised(pasted: object, state: str) -> None:
    problems: list[str] = []
    job = job_from_mapping({"job_id": 5, "state": pasted, "steps": [{"id": "0", "state": pasted}]}, problems)
    assert (job.state, job.steps[0].state, problems) == (state, state, [])


def test_an_unquoted_array_job_id_stays_that_job(tmp_path: Path) -> None:
    """YAML 1.1 would read `job_id: 1234_5` as the integer 12345: another job."""
    (tmp_path / "job.yaml").write_text("job_id: 1234_5\narray_task_id: 5\nrestart_count: 2\nranks: {0: node-01}\n")
    job = load_bundle(tmp_path).job
    assert (job.job_id, job.array_task_id, job.restart_count, job.ranks) == ("1234_5", "5", 2, ((0, "node-01"),))


def test_an_unquoted_exit_code_stays_the_exit_code(tmp_path: Path) -> None:
    """YAML 1.1 would read `exit_code: 1:0` as the base-60 number 60 (a hand-written job.yaml)."""
    (tmp_path / "job.yaml").write_text("job_id: 7\nstate: FAILED\nexit_code: 1:0\nderived_exit_code: 0:9\n")
    job = load_bundle(tmp_path).job
    assert (job.exit_code, job.derived_exit_code) == ("1:0", "0:9")


def test_a_rotated_kernel_log_is_its_nodes(tmp_path: Path) -> None:
    """logrotate's older files (numbered, compressed, dated) belong to the node the name starts with."""
    (tmp_path / "job.yaml").write_text("job_id: 7\nnodes: [worker4, 10.0.0.5]\n")
    (tmp_path / "syslog").mkdir()
    for name in ("worker4.log", "worker4.log.1", "worker4.log.2.gz", "worker4.log-20261120", "10.0.0.5.log.1"):
        (tmp_path / "syslog" / name).write_bytes(b"")
    assert sorted({f.node for f in load_bundle(tmp_path).files if f.node}) == ["10.0.0.5", "worker4"]


def test_an_application_log_in_a_folder_named_for_a_node_is_that_nodes(tmp_path: Path) -> None:
    """torchrun --log-dir and Open MPI --output-filename write one file per rank under a folder: a folder that names
    a job node places the file there; one that names no job node leaves the file name to decide."""
    (tmp_path / "job.yaml").write_text("job_id: 7\nnodes: [gpu-k01, gpu-k02]\n")
    for rel in ("applog/gpu-k02/none_k2j8q1x0/attempt_0/1/stderr.log", "applog/gpu-k01/1/rank.5/stderr",
                "applog/other/gpu-k01.log", "applog/stderr.log"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"")
    assert {f.rel: f.node for f in load_bundle(tmp_path).files} == {
        "applog/gpu-k02/none_k2j8q1x0/attempt_0/1/stderr.log": "gpu-k02", "applog/gpu-k01/1/rank.5/stderr": "gpu-k01",
        "applog/other/gpu-k01.log": "gpu-k01", "applog/stderr.log": None}


@pytest.mark.parametrize("nodes, expected", [
    ("worker[3-4,6]", ["worker3", "worker4", "worker6"]),
    ("gpu-a,gpu-b", ["gpu-a", "gpu-b"]),
    (["node-[01-02]", "login1"], ["node-01", "node-02", "login1"]),
])
def test_a_slurm_hostlist_names_every_node(nodes: object, expected: list[str]) -> None:
    """sacct's NodeList (``worker[3-4,6]``) pasted as the node list is expanded, not split on its commas (which
    left 'worker[3-4' and '6]', and every kernel line of the job's nodes read as another node's)."""
    problems: list[str] = []
    job = job_from_mapping({"job_id": 5, "nodes": nodes, "steps": [{"id": "0", "nodes": nodes}]}, problems)
    assert (list(job.nodes), list(job.steps[0].nodes), problems) == (expected, expected, [])


def test_a_hostlist_that_is_not_one_is_a_problem_not_a_crash() -> None:
    problems: list[str] = []
    job = job_from_mapping({"job_id": 5, "nodes": "n[1-999999999]"}, problems)
    assert problems and "nodes" in problems[0] and list(job.nodes) == ["n[1-999999999]"]


@pytest.mark.parametrize(("value", "names"), [
    ("0,1", ("0", "1")),
    ("0-3", ("0", "1", "2", "3")),
    ("2,4-5", ("2", "4", "5")),
    (3, ("3",)),
    ("GPU-0a410000-0000-4000-8000-000000000000", ("GPU-0a410000-0000-4000-8000-000000000000",)),
    (["0", "1"], ("0", "1")),
    ("", ()),
    ("0,all", ()),  # a value the engine cannot read restricts nothing
    (None, ()),
])
def test_the_jobs_gpus_from_the_collection_record(value: object, names: tuple[str, ...]) -> None:
    assert bundle_module._gpu_list(value) == names


def test_allocated_gpus_are_the_facts_pci_addresses(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text("job_id: '1'\nnodes: [n1]\n")
    (tmp_path / "facts").mkdir()
    (tmp_path / "facts" / "n1.yaml").write_text(
        "gpus:\n- {index: 0, pci: '0000:41:00', uuid: GPU-a}\n- {index: 1, pci: '0000:61:00', uuid: GPU-b}\n")
    (tmp_path / "collection").mkdir()
    (tmp_path / "collection" / "n1.yaml").write_text("gpus: GPU-b\n")
    bundle = load_bundle(tmp_path)
    assert bundle.allocated_gpus("n1") == frozenset({"0000:61:00"})
    (tmp_path / "collection" / "n1.yaml").write_text("gpus: '1'\n")  # an index: Slurm's order may not be the facts'
    assert load_bundle(tmp_path).allocated_gpus("n1") is None
    (tmp_path / "collection" / "n1.yaml").write_text("gpus: GPU-b,GPU-z\n")  # GPU-z is not in the facts
    assert load_bundle(tmp_path).allocated_gpus("n1") is None


@pytest.mark.parametrize(("record", "complete", "uncut"), [
    ("{source: kernel_log, state: ok, reason: journalctl, origin: journald}", True, True),
    # the collector's word on the sources it tried first cuts nothing: the file was read to the window's end
    ("{source: kernel_log, state: ok, reason: 'journalctl: no kernel lines in the window; dmesg: no kernel lines in "
     "the window; read /var/log/messages', origin: mixed-file}", True, True),
    ("{source: kernel_log, state: empty, reason: 'journalctl: no kernel lines in the window; read /var/log/kern.log',"
     " origin: kern-file}", False, True),
    ("{source: kernel_log, state: ok, reason: 'read /var/log/messages; " + bundle_module.KERNEL_LOG_CUT + "', "
     "origin: mixed-file}", True, False),
    ("{source: kernel_log, state: timeout, reason: 'journalctl: timed out'}", False, False),
])
def test_a_kernel_log_is_uncut_unless_its_record_says_the_window_was_cut(tmp_path: Path, record: str,
                                                                         complete: bool, uncut: bool) -> None:
    (tmp_path / "job.yaml").write_text("job_id: '1'\nnodes: [n1]\n")
    (tmp_path / "collection").mkdir()
    (tmp_path / "collection" / "n1.yaml").write_text(f"sources: [{record}]\n")
    bundle = load_bundle(tmp_path)
    assert ("n1" in bundle.kernel_complete, "n1" in bundle.kernel_uncut) == (complete, uncut)


def test_the_engine_reads_the_collectors_words_for_a_cut_window() -> None:
    from slurm_attrib.connectors import kernel_log
    assert bundle_module.KERNEL_LOG_CUT == kernel_log.KERNEL_LOG_CUT
