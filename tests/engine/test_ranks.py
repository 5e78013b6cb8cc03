"""Rank prefixes of application log lines (slurm_attrib.engine.ranks): srun ``--label``, PyTorch's
``[rankN]:`` and torchrun's ``[defaultN]:``, alone and stacked."""

from __future__ import annotations

import random
from typing import Optional

import pytest

from slurm_attrib.engine.ranks import (
    _COLOUR_ONLY,
    _RANK_PREFIX,
    Stream,
    after_log_prefix,
    global_rank,
    pg_rank,
    prefix_address,
    prefix_host,
    shipped_stamp,
    split_prefixes,
    split_rank,
    stream_key,
)
from slurm_attrib.model import JobFacts


@pytest.mark.parametrize(("line", "stream", "rest"), [
    ("[rank3]: RuntimeError: boom", (None, 3, None), "RuntimeError: boom"),
    ("[rank3]:RuntimeError: boom", (None, 3, None), "RuntimeError: boom"),
    ("[default3]: RuntimeError: boom", (None, None, 3), "RuntimeError: boom"),
    ("3: RuntimeError: boom", (3, None, None), "RuntimeError: boom"),
    ("  12: text", (12, None, None), "text"),
    ("3: [rank11]: text", (3, 11, None), "text"),
    ("3: [default1]: [rank11]: text", (3, 11, 1), "text"),
    # torchrun '--role rank --tee' writes its LOCAL rank as '[rankN]:' around PyTorch's own global one
    ("[rank1]: [rank2]: text", (None, 2, 1), "text"),
    ("[rank3]:[rank11]: torch.OutOfMemoryError: x", (None, 11, 3), "torch.OutOfMemoryError: x"),
    ("[default1]: [rank2]: [rank5]: text", (None, 2, 1), "text"),  # one local rank at most
    # torchrun --role NAME: its role instead of 'default' ('--role $(hostname -s):' gives '[node-3:1]:'); Open MPI's
    # '[host:pid]' names a process, not a rank
    ("[node-3:1]: RuntimeError: boom", (None, None, 1), "RuntimeError: boom"),
    ("[compute-st-p4d24xlarge-7:21766] Signal: Segmentation fault (11)", None,
     "[compute-st-p4d24xlarge-7:21766] Signal: Segmentation fault (11)"),
    ("2026-11-20T09:45:12.123456789Z [rank3]: RuntimeError: boom", (None, 3, None), "RuntimeError: boom"),
    ("2026-11-20T09:45:12+01:00 3: text", (3, None, None), "text"),  # a shipper's stamp, then the labels
    ("[1,15]<stderr>:[clx-orion-097:26451:0:26451] rc_verbs_iface.c:63   FATAL: x", (None, 15, None),
     "[clx-orion-097:26451:0:26451] rc_verbs_iface.c:63   FATAL: x"),  # Open MPI --tag-output: the MPI rank
    ("[0,3]<stdout>: step 10", (None, 3, None), "step 10"),
    # the SageMaker training toolkit's rewrite of Open MPI's tag: the rank, then the host
    ("[1,mpirank:5,algo-3]<stderr>:RuntimeError: x", (None, 5, None), "RuntimeError: x"),
    ("(WorkerDict pid=12345, ip=10.0.0.5) RuntimeError: boom", (None, None, None), "RuntimeError: boom"),
    ("\x1b[36m(RayTrainWorker pid=881, ip=10.1.2.3)\x1b[0m Traceback (most recent call last):", (None, None, None),
     "Traceback (most recent call last):"),
    ("(raylet) [2025-04-02 15:02:00,117 E 135782 135782] (raylet) node_manager.cc:3069: x", (None, None, None),
     "[2025-04-02 15:02:00,117 E 135782 135782] (raylet) node_manager.cc:3069: x"),
    ("(pid=77) KeyError: 'x'", (None, None, None), "KeyError: 'x'"),
    ("\x1b[31mRuntimeError: DDP expects same model\x1b[0m", None, "RuntimeError: DDP expects same model\x1b[0m"),
    ("3: \x1b[1;31m[rank3]: boom", (3, 3, None), "boom"),
    ("(VllmWorker rank=1 pid=788) ERROR 08-29 02:03:28 [core.py:700] boom", (None, 1, None),
     "ERROR 08-29 02:03:28 [core.py:700] boom"),
])
def test_split_rank_strips_every_prefix_form(line: str, stream: Stream, rest: str) -> None:
    assert split_rank(line) == (stream, rest)


@pytest.mark.parametrize("line", [
    "RuntimeError: boom",
    "node-01:1234:1234 [0] NCCL INFO comm 0x1 rank 3",  # host:pid:tid, not a label
    "10.0.0.3:29500: connection refused",  # an address with a port is no srun label
    "3:no space after the colon",
    "[rank]: no number",
    "[1,15] no stream tag",
    "(base) user@host:~$ python train.py",  # a shell prompt, no Ray prefix
    "(some text) pid=3",
    "",
])
def test_split_rank_leaves_lines_without_a_prefix_alone(line: str) -> None:
    assert split_rank(line) == (None, line)


@pytest.mark.parametrize("line", [
    "3536: node-443:40000:41000 [0] NCCL INFO Channel 15/32 : 3536[0] -> 478[6] [send] via NET/IB/0/GDRDMA",
    "3: ", "3: x", "12345: text", "2024: the year", "2024-01-02T03:04:05Z 3: text", "3:  two blanks",
    "3: \ttab", "3: [rank3]: boom", "3: [default1]: boom", "3: (pid=7) boom", "3: \x1b[31mred", "3: 4: nested",
    "3: P1 4: het", "3: Python", "3: P", "3: \u00a0no-break", "0003: zeros", "\u0663: an Arabic-Indic digit",
    "3:\tno blank", "3 : spaced", "P1 3: het", " 3: indented",
    "3536: [rank3536]:[E1120 14:00:30.000000 ProcessGroupNCCL.cpp:632] [Rank 3536] Watchdog caught",
    "3: [rank3]: Traceback (most recent call last):", "3: [rank3]:  two blanks", "3: [rank3]:", "3: [rank3]: ",
    "3: [rank3]:[rank11]: a tee prefix around PyTorch's", "3: [rank3]: [default1]: x", "3: [rank3]: 4: x",
    "3: [rank3]: \x1b[31mred", "3: [rank3]: (pid=7) x", "3: [rank]: no number", "3: [rank3] no colon",
    "3: [rank3]: P2 5: x", "3: [rank3]: [1,2]<stderr>: x",
])
def test_split_rank_shortcut_reads_a_bare_label_as_the_loop_does(line: str) -> None:
    assert split_rank(line) == split_prefixes(line)


@pytest.mark.parametrize(("line", "rest"), [
    ("2026-11-20T09:45:12.123456789Z RuntimeError: boom", "RuntimeError: boom"),
    ("2026-11-20T09:45:12Z ", ""),
])
def test_a_shippers_stamp_is_stripped_without_making_a_stream(line: str, rest: str) -> None:
    assert split_rank(line) == (None, rest)


@pytest.mark.parametrize(("line", "stream", "rest"), [
    # the program's own stamp after a label is part of the program's line
    ("3: 2026-11-20T09:45:12Z text", (3, None, None), "2026-11-20T09:45:12Z text"),
    ("2026-11-20 09:45:12,123 ERROR text", None, "2026-11-20 09:45:12,123 ERROR text"),  # Python logging
    ("2026-11-20T09:45:12.1234567890Z text", None, "2026-11-20T09:45:12.1234567890Z text"),  # beyond ns
])
def test_only_a_leading_rfc3339_stamp_is_a_shippers(line: str, stream: Optional[Stream], rest: str) -> None:
    assert split_rank(line) == (stream, rest)


@pytest.mark.parametrize(("line", "stream", "rest", "shipped"), [
    ("Mon Aug 26 18:41:15 2019[1]<stderr>:2019-08-26 18:41:15.943905: E tensorflow/x", (None, 1, None),
     "2019-08-26 18:41:15.943905: E tensorflow/x", "Mon Aug 26 18:41:15 2019"),
    ("[3]<stdout>:epoch 1", (None, 3, None), "epoch 1", ""),  # horovodrun without its stamps
    ("Mon Aug 26 18:41:15 2019 job started", None, "Mon Aug 26 18:41:15 2019 job started", ""),  # date(1)'s
])
def test_horovodruns_stamp_and_rank_prefix(line: str, stream: Optional[Stream], rest: str, shipped: str) -> None:
    """horovodrun puts the time it read a rank's line, then ``[rank]<stream>:``, before the line: the time is
    a shipper's (the line's own stamp, when it has one, comes first), the index the rank."""
    assert split_rank(line) == (stream, rest)
    assert shipped_stamp(line) == shipped


def test_stream_key_joins_the_label_and_the_rank_of_one_stream() -> None:
    assert stream_key(split_rank("9: [rank9]: x")[0]) == stream_key(split_rank("9: x")[0]) == (9, None)
    assert stream_key(split_rank("[default2]: x")[0]) == (None, 2)
    assert stream_key(None) is None


JOB = JobFacts(job_id="1", nodes=("node-01", "node-02"),
               ranks=((0, "node-01"), (1, "node-01"), (2, "node-02"), (3, "node-02")))


@pytest.mark.parametrize(("line", "node", "expected"), [
    ("[rank3]: x", "node-01", (3, None)),  # [rankN] is global wherever the file came from
    ("[default1]: x", "node-02", (3, 1)),  # local rank 1 of node-02 is its second rank
    ("[default5]: x", "node-02", (None, 5)),  # beyond the node's ranks: unknown global rank
    ("[default0]: x", None, (None, 0)),  # no node: no way to map a local rank
    ("2: x", "node-02", (2, None)),  # a bare srun label is the task, which is the rank
    ("x", "node-01", (None, None)),
])
def test_global_rank(line: str, node: Optional[str], expected: tuple[Optional[int], Optional[int]]) -> None:
    assert global_rank(split_rank(line)[0], node, JOB) == expected


def _split_by_regex_alone(text: str) -> tuple[Optional[Stream], str]:
    """split_rank as it was before it looked at the first character: the regex asked every time."""
    label = rank = local = None
    found = pytorch = False
    while True:
        match = _RANK_PREFIX.match(text)
        if not match:
            return ((label, rank, local) if found else None), text
        found = found or not _COLOUR_ONLY.fullmatch(match.group(0))
        named = next((g for g in (match.group(1), match.group(4), match.group(5)) if g is not None), None)
        if named is not None and rank is None:
            rank = int(named)
        elif match.group(1) is not None and local is None and pytorch:
            local, rank = rank, int(match.group(1))
        elif match.group(2) is not None and local is None:
            local = int(match.group(2))
        elif match.group(3) is not None and label is None and not match.group(0).lstrip().startswith("P"):
            label = int(match.group(3))
        pytorch = pytorch or match.group(1) is not None
        text = text[match.end():]


@pytest.mark.parametrize(("line", "stream", "rest", "shipped"), [
    # containerd / CRI-O: the stream and the full/partial tag between the kubelet's stamp and the line
    ("2021-08-12T14:03:41.000633417Z stderr F [1,5]<stderr>:RuntimeError: cudaErrorECCUncorrectable", (None, 5, None),
     "RuntimeError: cudaErrorECCUncorrectable", "2021-08-12T14:03:41.000633417Z"),
    ("2021-08-12T14:03:41Z stdout P partial line", None, "partial line", "2021-08-12T14:03:41Z"),
    # Docker's json-file driver: the line in "log", its newline dropped; the daemon's time is the shipper's
    ('{"log":"[1,5]<stderr>:RuntimeError: CUDA error: uncorrectable ECC error encountered\\n","stream":"stderr",'
     '"time":"2024-07-10T11:52:03.000074123Z"}', (None, 5, None),
     "RuntimeError: CUDA error: uncorrectable ECC error encountered", "2024-07-10T11:52:03.000074123Z"),
    ('{"log":"say \\"hi\\"\\n","stream":"stdout"}', None, 'say "hi"', ""),
    # the same object re-serialised with blanks after its colons (Python's json.dumps, some shippers)
    ('{"log": "[rank2]: KeyError: 3\\n", "stream": "stderr", "time": "2024-07-10T11:52:03Z"}', (None, 2, None),
     "KeyError: 3", "2024-07-10T11:52:03Z"),
    ('{"log": broken', None, '{"log": broken', ""),  # not JSON: the line as it is
    # the CloudWatch Logs console's table copied as text: the stamp's column between bars
    ("  | 2024-08-23T22:22:51.873Z | [rank3]:[E ProcessGroupNCCL.cpp:577] [Rank 3] Some NCCL operations have "
     "failed", (None, 3, None), "[E ProcessGroupNCCL.cpp:577] [Rank 3] Some NCCL operations have failed",
     "2024-08-23T22:22:51.873Z"),
    ("| not a stamp | x", None, "| not a stamp | x", ""),
])
def test_container_runtime_wrappers(line: str, stream: Optional[Stream], rest: str, shipped: str) -> None:
    """The kubelet's CRI files and Docker's json-file logs wrap each line the program wrote: unwrapped, the
    rank prefix and the message are read as if the program's output had been kept as it was."""
    assert split_rank(line) == (stream, rest)
    assert shipped_stamp(line) == shipped


@pytest.mark.parametrize(("line", "address"), [
    ("(RayTrainWorker pid=43515, ip=10.141.2.13) [rank5]: RuntimeError: CUDA error", "10.141.2.13"),
    ("2024-05-01T10:00:00Z (pid=7, ip=10.0.0.2) x", "10.0.0.2"),
    ("(raylet) node_manager.cc:3012: 1 Workers killed", None),
    ("error at ip=10.0.0.9", None),  # only a worker prefix at the start names the line's node
])
def test_a_ray_worker_prefix_names_its_nodes_address(line: str, address: Optional[str]) -> None:
    assert prefix_address(line) == address


@pytest.mark.parametrize(("line", "host"), [
    ("[1,mpirank:5,algo-3]<stderr>:RuntimeError: x", "algo-3"),
    ("2024-05-01T10:00:00Z [1,mpirank:0,algo-1]<stdout>: step 1", "algo-1"),
    ("[1,5]<stderr>: x", None),
])
def test_the_sagemaker_rank_prefix_names_its_host(line: str, host: Optional[str]) -> None:
    assert prefix_host(line) == host


def test_the_first_character_shortcut_changes_nothing() -> None:
    rng = random.Random(7)
    pieces = ["3: ", "[rank1]: ", "[rank2]:", "[default0]: ", " ", "\t", "\u3000", "\u0663: ", "x", "[", "]",
              ":", "node-1:", "12", "", "\n", "[E1120 10:30:55.1 a.cpp:1] ", "P1 ", "P", "P12  "]
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 6)))
        assert split_rank(text) == _split_by_regex_alone(text), text


@pytest.mark.parametrize(("text", "rank"), [
    ("[PG ID 0 PG GUID 0(default_pg) Rank 3] Process group watchdog thread terminated with exception", 3),
    ("[PG 0 Rank 12] Timeout at NCCL work: 88, last enqueued NCCL work: 88", 12),
    ("[PG ID 0 PG GUID 0 Rank 7] Watchdog caught collective operation timeout", 7),
    ("[PG ID 2 PG GUID 5(tp_group) Rank 1] Watchdog caught collective operation timeout", None),  # a sub-group's
    ("[PG 1 Rank 1] Timeout at NCCL work", None),
    ("Rank 3 has no prefix here", None),
])
def test_the_default_process_groups_rank_is_the_global_rank(text: str, rank: Optional[int]) -> None:
    assert pg_rank(text) == rank


@pytest.mark.parametrize(("line", "stream", "rest"), [
    ("P1 3: run_train.py: error: unrecognized arguments", (None, None, None),  # a component's task, no rank
     "run_train.py: error: unrecognized arguments"),
    ("\ufeffException: expected value at line 1 column 1", None, "Exception: expected value at line 1 column 1"),
    ("Sat Feb 22 14:31:07 2025[1,26]<stderr>:free(): corrupted unsorted chunks", (None, 26, None),
     "free(): corrupted unsorted chunks"),  # Open MPI's --timestamp-output with --tag-output
    ("PyTorch: 2.1", None, "PyTorch: 2.1"),
])
def test_het_job_labels_byte_order_marks_and_open_mpi_timestamps(line: str, stream: Optional[Stream],
                                                                   rest: str) -> None:
    """srun labels a heterogeneous job's lines 'P<component> <task>: '; a file's byte-order mark is no text of
    the program's; Open MPI's --timestamp-output puts ctime before its [job,rank] tag."""
    assert split_rank(line) == (stream, rest)


@pytest.mark.parametrize(("line", "rest"), [
    ("2023-10-12 17:31:02,118 - STDERR - ERROR - TypeError: bad", "TypeError: bad"),
    ("Apr 04 10:12:33 KeyError: 'attention_mask'", "KeyError: 'attention_mask'"),
    ("[2024-01-01 10:00:00,123] ERROR: KeyError: x", "KeyError: x"),
    ("2024-01-01T10:00:00.123+02:00 [ERROR] ValueError: x", "ValueError: x"),
    ("ERROR:root:KeyError: x", "KeyError: x"),
    ("Traceback (most recent call last):", None),
    ("12: RuntimeError: x", None),
    ("2024-01-01 10:00:00", None),  # nothing after the prefix
])
def test_a_logging_prefix_is_read_past(line: str, rest: Optional[str]) -> None:
    assert after_log_prefix(line) == rest
