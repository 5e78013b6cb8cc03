"""One WARNING per outage, probes at growing intervals, one INFO when it ends."""

from __future__ import annotations

import logging

import pytest

from slurm_attrib.outage import Outage


def test_one_warning_per_outage(caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    outage = Outage("store", logging.getLogger("test.outage"), first_pause_s=5, max_pause_s=20,
                    clock=lambda: now[0])
    caplog.set_level(logging.DEBUG, "test.outage")
    assert outage.should_try() and not outage.down
    for _ in range(800):
        outage.failed("locked", "verdicts spooled")
    assert [r.levelname for r in caplog.records].count("WARNING") == 1
    assert outage.down and not outage.should_try() and outage.next_probe == 120.0  # capped pause
    now[0] = 121.0
    assert outage.should_try()
    outage.recovered()
    assert not outage.down and [r.levelname for r in caplog.records][-1] == "INFO"
    outage.failed("locked again")
    assert [r.levelname for r in caplog.records].count("WARNING") == 2
