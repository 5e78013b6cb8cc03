"""Times given on the command line: ISO dates and times, or durations such as ``7d`` back from *now*.

The library never reads the clock: *now* is always passed in.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Optional

from ..errors import ConfigError
from ..timestamps import parse_iso

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DATE = re.compile(r"^\s*(\d{4})-(\d{2})-(\d{2})\s*$")


def parse_duration(text: str) -> Optional[timedelta]:
    """``30m``, ``12h``, ``7d``, ``2w`` (also ``90s``) → timedelta; None if ``text`` is not a duration."""
    m = _DURATION.match(text)
    if m is None:
        return None
    return timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2)])


def parse_when(text: str, now: datetime) -> datetime:
    """A point in time (UTC): a duration before ``now``, an ISO date (midnight UTC) or an ISO date-time.

    Raises ConfigError (exit 2) for anything else."""
    delta = parse_duration(text)
    if delta is not None:
        return now - delta
    m = _DATE.match(text)
    if m is not None:
        try:
            return datetime(int(m.group(1)), int(m.group(2)), int(m.group(3)), tzinfo=timezone.utc)
        except ValueError as exc:
            raise ConfigError(f"not a date: {text!r} ({exc})") from None
    parsed = parse_iso(text.strip())
    if parsed is None:
        raise ConfigError(f"not a time: {text!r} (use an ISO date or time, or a duration such as 7d, 12h, 30m)")
    return parsed


def iso_utc(when: datetime) -> str:
    """The store's time string: UTC, microseconds, 'Z' — the same as the Diagnosis JSON, so strings sort."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
