"""When an unstamped line happened (slurm_attrib.engine.timeinfer): the stamp of the nearest preceding
line of the same rank is its time, the next stamped line of that rank its upper bound."""

from __future__ import annotations

import random
from datetime import datetime, timezone
from typing import Optional

import pytest

from slurm_attrib.bundle import NodeFacts
from slurm_attrib.engine.ranks import split_rank, stream_key
from slurm_attrib.engine.timeinfer import LineStamps, infer_time, latest_time, next_time, time_context
from slurm_attrib.model import JobFacts
from slurm_attrib.scan import Line
from slurm_attrib.timestamps import TimeContext, parse_line_time

from .conftest import make_context, make_symptom


def at(second: int) -> datetime:
    return datetime(2026, 11, 20, 10, 30, second, tzinfo=timezone.utc)


def line_of(lines: list[str], index: int) -> Line:
    """Line ``index`` of a log, with its neighbours readable as the scanner gives them."""
    buf = "\n".join(lines).encode()
    start = sum(len(text.encode()) + 1 for text in lines[:index])
    return Line(text=lines[index], lineno=index + 1, offset=start, _buf=buf, _start=start,
                _end=start + len(lines[index].encode()))


CTX = TimeContext()
LOG = [
    "[rank0]: 2026-11-20T10:30:01Z step 10",
    "[rank1]: 2026-11-20T10:30:02Z step 10",
    "[rank0]: RuntimeError: CUDA error",  # index 2: unstamped, rank 0
    "[rank1]: 2026-11-20T10:30:04Z step 11",
    "[rank0]: 2026-11-20T10:30:05Z teardown",
    "RuntimeError without a rank",  # index 5
]


def _stream(index: int) -> Optional[tuple[Optional[int], Optional[int], Optional[int]]]:
    return split_rank(LOG[index])[0]


def test_an_unstamped_line_takes_the_stamp_of_its_ranks_preceding_line() -> None:
    found = infer_time(line_of(LOG, 2), _stream(2), TimeContext())
    assert found is not None and found.time == at(1)  # rank 0's line, not rank 1's later one


def test_without_a_line_of_its_rank_any_stamped_line_serves_unless_told_otherwise() -> None:
    found = infer_time(line_of(LOG, 5), _stream(5), TimeContext())
    assert found is not None and found.time == at(5)
    assert infer_time(line_of(LOG, 2), (None, 7, None), TimeContext(), want_any=False) is None
    nearest = infer_time(line_of(LOG, 2), _stream(2), TimeContext(), limit=1)  # sees rank 1's line only
    assert nearest is not None and nearest.time == at(2)
    assert infer_time(line_of(LOG, 2), _stream(2), TimeContext(), limit=1, want_any=False) is None


def test_the_next_stamped_line_of_the_rank_bounds_it() -> None:
    assert next_time(line_of(LOG, 2), _stream(2), TimeContext()) == at(5)
    assert next_time(line_of(LOG, 5), _stream(5), TimeContext()) is None


@pytest.mark.parametrize(("fields", "expected"), [
    ({}, at(0)),
    ({"time_inferred": "preceding line", "time_upper": "2026-11-20T10:30:09Z"}, at(9)),
    ({"time_inferred": "preceding line"}, None),
])
def test_latest_time(fields: dict[str, str], expected: Optional[datetime]) -> None:
    assert latest_time(make_symptom("x", time=at(0), **fields)) == expected


def test_time_context_takes_the_nodes_zone_else_the_jobs() -> None:
    job = JobFacts(job_id="1", nodes=("node-01", "node-02"), timezone="Europe/Paris", timezone_source="job.yaml")
    ctx = make_context(job)
    ctx.bundle.node_facts["node-01"] = NodeFacts(node="node-01", timezone="Asia/Tokyo")
    assert time_context(ctx, "node-01").zone_name == "Asia/Tokyo (from facts/node-01.yaml)"
    assert time_context(ctx, "node-02").zone_name == "Europe/Paris (from job.yaml)"
    ctx.bundle.node_facts["node-02"] = NodeFacts(node="node-02", timezone="Mars/Olympus")
    assert time_context(ctx, "node-02").zone_name == "UTC (no zone in the node facts or job)"
    assert "unknown time zone 'Mars/Olympus'; UTC assumed" in ctx.assumptions


def test_line_stamps_remembers_what_split_rank_and_parse_line_time_say() -> None:
    stamps = LineStamps(CTX)
    for text in [*LOG, *LOG]:
        stream, rest = split_rank(text)
        assert stamps.split(text) == (stream_key(stream), rest)
        assert stamps.stamp(rest) == parse_line_time(rest, CTX)


def test_line_stamps_starts_afresh_when_full(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(LineStamps, "BUDGET_CHARS", 80)
    stamps = LineStamps(CTX)
    for text in LOG:
        stamps.split(text)
        stamps.stamp(text)
        held = sum(map(len, stamps._split)) + sum(map(len, stamps._stamps))
        assert held <= 80 + len(text)
    assert stamps.stamp(LOG[0]) == parse_line_time(LOG[0], CTX)


def test_a_shared_line_stamps_gives_the_same_times() -> None:
    stamps = LineStamps(CTX)
    for index in range(len(LOG)):
        line = line_of(LOG, index)
        stream = split_rank(LOG[index])[0]
        assert infer_time(line, stream, CTX, stamps=stamps) == infer_time(line, stream, CTX)
        assert next_time(line, stream, CTX, stamps) == next_time(line, stream, CTX)


def _burst(seed: int) -> list[str]:
    """A log whose stamped lines lie far apart among runs of unstamped ones of several ranks."""
    pick = random.Random(seed)
    lines = []
    for index in range(400):
        rank = pick.randrange(4)
        if pick.random() < 0.02:
            lines.append(f"[rank{rank}]: 2026-11-20T10:{index // 60 % 60:02d}:{index % 60:02d}Z step {index}")
        else:
            lines.append(f"[rank{rank}]: NCCL WARN NET/IB : Got completion from peer with status=12 ({index})")
    return lines


def _lines_of(lines: list[str]) -> list[Line]:
    """Each of ``lines`` as the scan hands a hit over: its text, number and place in the one buffer of them all."""
    buf = "\n".join(lines).encode()
    starts = [0]
    for text in lines:
        starts.append(starts[-1] + len(text.encode()) + 1)
    return [Line(text=text, lineno=index + 1, offset=starts[index], _buf=buf, _start=starts[index],
                 _end=starts[index] + len(text.encode())) for index, text in enumerate(lines)]


@pytest.mark.parametrize("seed", [1, 2])
def test_the_unstamped_runs_it_remembers_change_no_answer(seed: int) -> None:
    """The runs of unstamped lines one hit's walk read let the next hit's walk step over them: every answer is
    the one a walk without that memory gives, whatever order the hits come in and whatever the limits."""
    lines = _burst(seed)
    every = _lines_of(lines)
    order = list(range(len(lines)))
    random.Random(seed).shuffle(order)
    for indexes in (range(len(lines)), order):
        shared = LineStamps(CTX)
        for index in indexes:
            line, stream = every[index], split_rank(lines[index])[0]
            for limit, want_any in ((200, True), (200, False), (7, True), (60, False)):
                assert infer_time(line, stream, CTX, limit, want_any, shared) == \
                    infer_time(line, stream, CTX, limit, want_any)
            assert next_time(line, stream, CTX, shared) == next_time(line, stream, CTX)
            assert shared.next_time(line, stream_key(stream), limit=9, after_any=3) == \
                LineStamps(CTX).next_time(line, stream_key(stream), limit=9, after_any=3)


def _walked(lines: list[str], index: int, wanted: object, limit: int, after_any: int) -> Optional[datetime]:
    """next_time as its docstring says, one line after another: among the next ``limit`` lines, the stamp of the
    first stamped line of stream ``wanted``, else of the first stamped line, looking no further than ``after_any``
    lines (counted from the hit) once that is found."""
    fallback = None
    for count, text in enumerate(lines[index + 1:index + 1 + limit]):
        if fallback is not None and count > after_any:
            break
        stream, rest = split_rank(text)
        time = parse_line_time(rest, CTX).time
        if time is not None and stream_key(stream) == wanted:
            return time
        fallback = fallback or time
    return fallback


def _mixed(seed: int) -> list[str]:
    """Ranks' lines, some stamped, some not, a few without a prefix, and runs of one rank."""
    pick = random.Random(seed)
    lines = []
    for index in range(300):
        rank = pick.choice([0, 1, 2, 3, None]) if pick.random() < 0.7 else 1
        head = "" if rank is None else f"{rank}: "
        if pick.random() < 0.15:
            lines.append(f"{head}2026-11-20T10:{index // 60 % 60:02d}:{index % 60:02d}Z step {index}")
        else:
            lines.append(f"{head}NCCL WARN NET/IB : Got completion from peer with status=12 ({index})")
    return lines


@pytest.mark.parametrize("log", [_mixed(3), _mixed(4), _burst(5)])
def test_the_look_ahead_gives_what_a_line_by_line_walk_gives(log: list[str]) -> None:
    """The look-ahead walks with LineStamps' memos (split lines, runs known unstamped) and its own loop: every
    answer, in file order or shuffled, with a shared memo or a fresh one, is the plain line-by-line walk's."""
    lines = log
    every = _lines_of(lines)
    order = list(range(len(lines)))
    random.Random(len(lines)).shuffle(order)
    answered = 0
    for indexes in (range(len(lines)), order):
        shared = LineStamps(CTX)
        for index in indexes:
            key = stream_key(split_rank(lines[index])[0])
            for limit, after_any in ((100, 20), (9, 3), (5, 10), (1, 0)):
                expected = _walked(lines, index, key, limit, after_any)
                assert shared.next_time(every[index], key, limit, after_any) == expected
                assert LineStamps(CTX).next_time(every[index], key, limit, after_any) == expected
                answered += expected is not None
    assert answered > len(lines)  # the walks found stamps, of the wanted stream and of others


def test_a_combined_log_takes_the_zone_every_job_node_names() -> None:
    """A combined job log (no node of its own) is written in its nodes' local time: the zone all their facts
    name wins over the offset the controller printed the job's start with, not over a zone job.yaml names."""
    job = JobFacts(job_id="1", nodes=("node-01", "node-02"), timezone="UTC",
                   timezone_source="the offset of the job's start time")
    ctx = make_context(job)
    for node in job.nodes:
        ctx.bundle.node_facts[node] = NodeFacts(node=node, timezone="Asia/Shanghai")
    assert time_context(ctx, None).zone_name == "Asia/Shanghai (from the facts of the job's nodes)"
    ctx = make_context(job)  # the bundle works its nodes' zone out once
    ctx.bundle.node_facts["node-01"] = NodeFacts(node="node-01", timezone="Asia/Shanghai")
    ctx.bundle.node_facts["node-02"] = NodeFacts(node="node-02", timezone="Europe/Berlin")
    assert time_context(ctx, None).zone_name == "UTC (from the offset of the job's start time)"
