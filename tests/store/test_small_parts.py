"""Hostlists, time specs, tables, the progress bar."""

from __future__ import annotations

import io
from datetime import datetime, timedelta, timezone

import pytest

from slurm_attrib.errors import ConfigError
from slurm_attrib.store.progress import ProgressBar
from slurm_attrib.store.tables import format_rows
from slurm_attrib.store.timespec import parse_when

NOW = datetime(2026, 12, 1, 12, tzinfo=timezone.utc)


@pytest.mark.parametrize(("text", "expected"), [
    ("7d", NOW - timedelta(days=7)), ("12h", NOW - timedelta(hours=12)), ("30m", NOW - timedelta(minutes=30)),
    ("2w", NOW - timedelta(weeks=2)), ("2026-11-20", datetime(2026, 11, 20, tzinfo=timezone.utc)),
    ("2026-11-20T10:00:00Z", datetime(2026, 11, 20, 10, tzinfo=timezone.utc)),
    ("2026-11-20T12:00:00+02:00", datetime(2026, 11, 20, 10, tzinfo=timezone.utc)),
])
def test_parse_when(text: str, expected: datetime) -> None:
    assert parse_when(text, NOW) == expected


def test_parse_when_rejects_garbage() -> None:
    with pytest.raises(ConfigError, match="not a time"):
        parse_when("yesterday", NOW)


def test_tables() -> None:
    rows = [{"a": 1, "b": None, "c": 0.5}, {"a": 22, "b": "x,y", "c": None}]
    assert format_rows(rows, ("a", "b", "c"), "table") == "a   b    c\n1        0.50\n22  x,y\n"
    assert format_rows(rows, ("a", "b"), "csv") == 'a,b\n1,\n22,"x,y"\n'
    assert format_rows([], ("a",), "table") == "(no rows)\n"


def test_progress_bar_only_on_a_tty() -> None:
    quiet = io.StringIO()
    ProgressBar("x", quiet)(1, 2)
    assert quiet.getvalue() == ""
    loud = io.StringIO()
    bar = ProgressBar("replay", loud, enabled=True)
    bar(1, 2)
    bar.finish()
    assert loud.getvalue().startswith("\rreplay [###") and loud.getvalue().endswith("1/2\n")
