"""Logging prefixes the rules read past (engine/ranks.py after_log_prefix): a program's line after its logger's
time and level is read as the program wrote it."""

from __future__ import annotations

import pytest

from slurm_attrib.engine.ranks import after_log_prefix


@pytest.mark.parametrize(("line", "rest"), [
    ("2023-10-12 17:31:02,118 - STDERR - ERROR - TypeError: bad", "TypeError: bad"),
    # vLLM's logger: '%(levelname)s %(asctime)s [%(filename)s:%(lineno)d] ' with '%m-%d %H:%M:%S'
    ("ERROR 06-27 17:14:23 [multiproc_executor.py:522] RuntimeError: x", "RuntimeError: x"),
    # SGLang's: '[%(asctime)s TP5] ' with the parallel ranks it runs as
    ("[2025-01-29 08:52:43 TP5] Scheduler hit an exception: x", "Scheduler hit an exception: x"),
    ("[2025-01-29 08:52:43 DP1 TP3] Scheduler hit an exception: x", "Scheduler hit an exception: x"),
])
def test_a_loggers_prefix_is_read_past(line: str, rest: str) -> None:
    assert after_log_prefix(line) == rest


def test_a_line_without_a_prefix_is_left_alone() -> None:
    assert after_log_prefix("RuntimeError: x") is None
