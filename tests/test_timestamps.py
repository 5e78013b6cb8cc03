"""Tests for slurm_attrib.timestamps: every supported line format, year/zone/uptime resolution, abuse."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone, tzinfo
from pathlib import Path
from typing import Optional

import pytest

from slurm_attrib import timestamps
from slurm_attrib.timestamps import (
    PREFIX_LIMIT,
    ParsedStamp,
    TimeContext,
    format_utc,
    json_object,
    parse_iso,
    parse_line_time,
    zone_from_name,
)

UTC = timezone.utc


def _has_zone(name: str) -> bool:
    try:
        zone_from_name(name)
    except ValueError:
        return False
    return True


needs_tzdata = pytest.mark.skipif(not _has_zone("Europe/Berlin"), reason="IANA tz database not installed")


def _utc(text: str) -> datetime:
    """Aware UTC datetime from a 'YYYY-MM-DDTHH:MM:SS[.ffffff]' literal."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def _window(start: str, end: str | None = None, zone: tzinfo = UTC, zone_name: str = "UTC") -> TimeContext:
    return TimeContext(
        window_start=_utc(start), window_end=_utc(end) if end else None, zone=zone, zone_name=zone_name
    )


NO_CTX = TimeContext()
BOOT = _utc("2026-11-20T08:00:00")
ZONE_UTC = "zone UTC assumed"


# --- formats: real example lines (research file §A.5, §F.2) and the shapes named in the spec -----------

# (line, ctx, fmt, expected UTC time or None, message, host, uptime, assumptions)
FORMAT_CASES = [
    pytest.param(
        "[14328.198504] NVRM: Xid (PCI:0000:0a:00): 31, pid=1234, name=python3",
        TimeContext(boot_time=BOOT), "dmesg_uptime", "2026-11-20T11:58:48.198504",
        "NVRM: Xid (PCI:0000:0a:00): 31, pid=1234, name=python3", None, 14328.198504,
        ("uptime resolved with boot time 2026-11-20T08:00:00Z",), id="dmesg_uptime-boot",
    ),
    pytest.param(
        "[    5.123456] nvidia: module loaded", TimeContext(boot_time=BOOT), "dmesg_uptime",
        "2026-11-20T08:00:05.123456", "nvidia: module loaded", None, 5.123456,
        ("uptime resolved with boot time 2026-11-20T08:00:00Z",), id="dmesg_uptime-padded",
    ),
    pytest.param(
        "[73309.599396] nvidia-nvswitch0: SXid (PCI:0000:06:00.0): 20009, Non-fatal, Link 04 RX Short "
        "Error Rate",
        NO_CTX, "dmesg_uptime", None,
        "nvidia-nvswitch0: SXid (PCI:0000:06:00.0): 20009, Non-fatal, Link 04 RX Short Error Rate",
        None,
        73309.599396, ("uptime not resolved: boot time unknown",), id="dmesg_uptime-no-boot",
    ),
    pytest.param(
        "4,7781,14328198504,-;python invoked oom-killer: gfp_mask=0x14200ca(GFP_HIGHUSER_MOVABLE), order=0",
        TimeContext(boot_time=BOOT), "kmsg", "2026-11-20T11:58:48.198504",
        "python invoked oom-killer: gfp_mask=0x14200ca(GFP_HIGHUSER_MOVABLE), order=0", None, 14328.198504,
        ("uptime resolved with boot time 2026-11-20T08:00:00Z",), id="kmsg-boot",
    ),
    pytest.param(
        "6,1234,5678901234,-,caller=T123;mlx5_core 0000:3b:00.0: mlx5e_port_link_down", NO_CTX, "kmsg", None,
        "mlx5_core 0000:3b:00.0: mlx5e_port_link_down", None, 5678.901234,
        ("uptime not resolved: boot time unknown",), id="kmsg-caller-no-boot",
    ),
    pytest.param(
        "[Sun Feb 23 16:24:18 2025] NVRM: Xid (PCI:0000:9b:00): 119, pid=1582259, name=nvc:[driver]",
        NO_CTX, "dmesg_ctime", "2025-02-23T16:24:18",
        "NVRM: Xid (PCI:0000:9b:00): 119, pid=1582259, name=nvc:[driver]", None, None, (ZONE_UTC,),
        id="dmesg_ctime",
    ),
    pytest.param(
        "[Mon Feb  3 01:02:03 2025] msg", NO_CTX, "dmesg_ctime", "2025-02-03T01:02:03", "msg", None, None,
        (ZONE_UTC,), id="dmesg_ctime-padded-day",
    ),
    pytest.param(
        "2024-04-29T14:55:41,679700+02:00 Out of memory: Killed process 1440763 (perl) total-vm:1kB",
        NO_CTX, "dmesg_iso", "2024-04-29T12:55:41.679700",
        "Out of memory: Killed process 1440763 (perl) total-vm:1kB", None, None, (), id="dmesg_iso",
    ),
    pytest.param(
        "kern  :warn  : 2025-01-21T08:41:30,287197+00:00 oom_reaper: reaped process 345646 (vector), now",
        NO_CTX, "dmesg_iso", "2025-01-21T08:41:30.287197", "oom_reaper: reaped process 345646 (vector), now",
        None, None, (), id="dmesg_iso-decode",
    ),
    pytest.param(
        "Dec  2 11:38:47 worker4 kernel: [  219.470994] NVRM: Xid (PCI:0000:07:00): 48, pid='<unknown>'",
        _window("2025-12-02T10:00:00", "2025-12-02T12:00:00"), "rfc3164", "2025-12-02T11:38:47",
        "NVRM: Xid (PCI:0000:07:00): 48, pid='<unknown>'", "worker4", 219.470994,
        ("year 2025 taken from the job window", ZONE_UTC), id="rfc3164-uptime",
    ),
    pytest.param(
        "May 15 23:09:30 ubuntu-s-1vcpu-2gb-ams3-01 kernel: [  518.050606] Out of memory: "
        "Killed process 15784",
        _window("2021-05-15T20:00:00"), "rfc3164", "2021-05-15T23:09:30",
        "Out of memory: Killed process 15784", "ubuntu-s-1vcpu-2gb-ams3-01", 518.050606,
        ("year 2021 taken from the job window", ZONE_UTC), id="rfc3164-uptime-2",
    ),
    pytest.param(
        "Feb 14 05:03:41 000-000-00000-1-gpu-1 kernel: mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link ACTIVE",
        _window("2025-02-14T00:00:00", "2025-02-15T00:00:00"), "rfc3164", "2025-02-14T05:03:41",
        "mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link ACTIVE", "000-000-00000-1-gpu-1", None,
        ("year 2025 taken from the job window", ZONE_UTC), id="rfc3164-journal-short",
    ),
    pytest.param(
        "Feb 14 05:03:41 node7 python3[1234]: RuntimeError: CUDA error",
        _window("2025-02-14T00:00:00"), "rfc3164", "2025-02-14T05:03:41", "RuntimeError: CUDA error",
        "node7", None, ("year 2025 taken from the job window", ZONE_UTC), id="rfc3164-pid-tag",
    ),
    pytest.param(
        "Feb 14 05:03:41 node7 kernel: msg", NO_CTX, "rfc3164", None, "msg", "node7", None,
        ("year unknown",), id="rfc3164-no-window",
    ),
    pytest.param(
        "Feb 14 05:03:41.123456 node7 kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3",
        _window("2025-02-14T00:00:00", "2025-02-15T00:00:00"), "journal_short_precise",
        "2025-02-14T05:03:41.123456", "NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3", "node7",
        None, ("year 2025 taken from the job window", ZONE_UTC), id="journal_short_precise",
    ),
    pytest.param(
        "2026-11-20T10:30:21+0000 node7 kernel: msg", NO_CTX, "journal_short_iso", "2026-11-20T10:30:21",
        "msg", "node7", None, (), id="journal_short_iso",
    ),
    pytest.param(
        "2026-11-20T10:30:21.123456+0100 node7 kernel: msg", NO_CTX, "journal_short_iso",
        "2026-11-20T09:30:21.123456", "msg", "node7", None, (), id="journal_short_iso-precise-old",
    ),
    pytest.param(
        "2026-01-05T13:54:43.262668+01:00 node7 kernel: NVRM: Xid (PCI:0000:dc:00): 79, pid=1, name=x",
        NO_CTX, "rfc3339", "2026-01-05T12:54:43.262668", "NVRM: Xid (PCI:0000:dc:00): 79, pid=1, name=x",
        "node7", None, (), id="rfc3339",
    ),
    pytest.param(
        "2026-01-05T13:54:43.262668+01:00 node7 kernel: [  219.470994] msg", NO_CTX, "rfc3339",
        "2026-01-05T12:54:43.262668", "msg", "node7", 219.470994, (), id="rfc3339-uptime",
    ),
    pytest.param(
        "2026-11-20T10:30:21Z msg", NO_CTX, "iso8601", "2026-11-20T10:30:21", "msg", None, None, (),
        id="iso8601-z",
    ),
    pytest.param(
        "2026-11-20T10:30:21.123+00:00 msg", NO_CTX, "iso8601", "2026-11-20T10:30:21.123000", "msg", None,
        None, (), id="iso8601-offset",
    ),
    pytest.param(
        "2026-11-20 10:30:21 msg", NO_CTX, "iso8601", "2026-11-20T10:30:21", "msg", None, None, (ZONE_UTC,),
        id="iso8601-naive",
    ),
    pytest.param(
        "2026-11-20T10:30:21Z ERROR trainer: boom", NO_CTX, "iso8601", "2026-11-20T10:30:21",
        "ERROR trainer: boom", None, None, (), id="iso8601-level-not-host",
    ),
    pytest.param(
        "2026-11-20 10:30:21,112 INFO msg", NO_CTX, "python_logging", "2026-11-20T10:30:21.112000",
        "INFO msg", None, None, (ZONE_UTC,), id="python_logging",
    ),
    pytest.param(
        "2026-11-20 10:30:21,112 - name - ERROR - msg", NO_CTX, "python_logging",
        "2026-11-20T10:30:21.112000", "- name - ERROR - msg", None, None, (ZONE_UTC,),
        id="python_logging-dashes",
    ),
    pytest.param(
        "[E1120 10:30:55.201344 12345 ProcessGroupNCCL.cpp:1664] msg", _window("2026-11-20T00:00:00"),
        "glog", "2026-11-20T10:30:55.201344", "msg", None, None,
        ("year 2026 taken from the job window", ZONE_UTC), id="glog",
    ),
    pytest.param(
        "[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE)",
        _window("2025-03-20T00:00:00", "2025-03-22T00:00:00"),
        "glog", "2025-03-21T02:07:08.408271",
        "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE)",
        None, None, ("year 2025 taken from the job window", ZONE_UTC), id="glog-nanoseconds",
    ),
    pytest.param(
        "[rank0]:[E504 23:32:59.338859795 ProcessGroupNCCL.cpp:1896] [PG ID 0 PG GUID 0(default_pg) Rank 0] "
        "Process group watchdog thread terminated with exception", _window("2025-05-04T00:00:00"), "glog",
        "2025-05-04T23:32:59.338859",
        "[PG ID 0 PG GUID 0(default_pg) Rank 0] Process group watchdog thread terminated with exception",
        None, None, ("year 2025 taken from the job window", ZONE_UTC), id="glog-rank-prefix",
    ),
    pytest.param(
        "W0726 10:59:50.786825 140538811684672 torch/distributed/elastic/multiprocessing/api.py:858] "
        "Sending process 1234 closing signal SIGTERM", _window("2024-07-26T00:00:00"), "glog",
        "2024-07-26T10:59:50.786825", "Sending process 1234 closing signal SIGTERM", None, None,
        ("year 2024 taken from the job window", ZONE_UTC), id="glog-unbracketed",
    ),
    pytest.param(
        "[E ProcessGroupNCCL.cpp:455] Some NCCL operations have failed or timed out.", NO_CTX, "glog_notime",
        None, "Some NCCL operations have failed or timed out.", None, None, (), id="glog_notime",
    ),
    pytest.param(
        "192.168.11.119: kern: warning: [2026-04-22T21:27:51.291660856Z]: NVRM: "
        "kflcnCoreDumpNondestructive_IMPL: ...", NO_CTX, "talos", "2026-04-22T21:27:51.291660",
        "NVRM: kflcnCoreDumpNondestructive_IMPL: ...", "192.168.11.119", None, (), id="talos",
    ),
    pytest.param(
        "[2026-11-20 10:30:21,123] [INFO] [engine.py:123:__init__] DeepSpeed info", NO_CTX, "bracket_iso",
        "2026-11-20T10:30:21.123000", "[INFO] [engine.py:123:__init__] DeepSpeed info", None, None,
        (ZONE_UTC,), id="bracket_iso-deepspeed",
    ),
    pytest.param(
        "[2026-11-20T10:30:21Z] msg", NO_CTX, "bracket_iso", "2026-11-20T10:30:21", "msg", None, None, (),
        id="bracket_iso-z",
    ),
    pytest.param(
        "   [12.500000] leading spaces", TimeContext(boot_time=BOOT), "dmesg_uptime",
        "2026-11-20T08:00:12.500000", "leading spaces", None, 12.5,
        ("uptime resolved with boot time 2026-11-20T08:00:00Z",), id="leading-spaces",
    ),
]


@pytest.mark.parametrize(
    ("line", "ctx", "fmt", "expected", "message", "host", "uptime", "assumptions"), FORMAT_CASES
)
def test_formats(
    line: str,
    ctx: TimeContext,
    fmt: str,
    expected: str | None,
    message: str,
    host: str | None,
    uptime: float | None,
    assumptions: tuple[str, ...],
) -> None:
    parsed = parse_line_time(line, ctx)
    assert parsed._replace(tag=None, facility=None) == ParsedStamp(
        time=_utc(expected) if expected else None,
        message=message,
        fmt=fmt,
        host=host,
        uptime=uptime,
        assumptions=assumptions,
    )
    if parsed.time is not None:
        assert parsed.time.tzinfo is UTC


@pytest.mark.parametrize(("line", "tag", "message"), [
    ("Nov 20 10:30:00 node-01 kernel: NVRM: Xid 79", "kernel", "NVRM: Xid 79"),
    ("Nov 20 10:30:00 node-01 alice[4242]: NVRM: Xid 79", "alice[4242]", "NVRM: Xid 79"),
    ("Nov 20 10:30:00 node-01 NVRM: Xid 79", "NVRM", "Xid 79"),  # no tag: the message's first word reads as one
    ("2026-11-20T10:30:00.000001+00:00 node-01 kernel: [ 12.5] NVRM: Xid 79", "kernel", "NVRM: Xid 79"),
    ("Nov 20 10:30:00 node-01 mlx5_core 0000:3b:00.0: fatal", None, "mlx5_core 0000:3b:00.0: fatal"),
    ("[  12.500000] NVRM: Xid 79", None, "NVRM: Xid 79"),
])
def test_syslog_tag_names_the_program_that_wrote_the_line(line: str, tag: str | None, message: str) -> None:
    """The engine refuses kernel text that follows another program's tag (`logger` output)."""
    parsed = parse_line_time(line, TimeContext(window_start=_utc("2026-11-20T10:00:00Z")))
    assert (parsed.tag, parsed.message) == (tag, message)


JOURNAL_CASES = [
    pytest.param("Sat 2024-11-16 19:24:11 UTC EVE kernel: NVRM: Xid 79", "journal_short_full",
                 "2024-11-16T19:24:11", "EVE", "kernel", "NVRM: Xid 79", id="short-full"),
    pytest.param("Sat 2024-11-16 19:24:11 +0100 EVE kernel: msg", "journal_short_full",
                 "2024-11-16T18:24:11", "EVE", "kernel", "msg", id="short-full-offset"),
    pytest.param("Sat 2024-11-16 19:24:11 UTC EVE alice[31337]: NVRM: Xid 79", "journal_short_full",
                 "2024-11-16T19:24:11", "EVE", "alice[31337]", "NVRM: Xid 79", id="short-full-user"),
    pytest.param("Sat 2025-05-24 02:00:22.760083 UTC [s=7a3e9c1d;i=8c21;b=b2f1;m=cad8;t=635d;x=7f3e1]",
                 "journal_verbose", "2025-05-24T02:00:22.760083", None, None, "", id="verbose-head"),
    pytest.param("1722253127.470994 worker4 kernel: NVRM: Xid 48", "journal_short_unix",
                 "2024-07-29T11:38:47.470994", "worker4", "kernel", "NVRM: Xid 48", id="short-unix"),
    pytest.param('<13>1 2024-11-23T00:50:02.123456+00:00 EVE alice - - [timeQuality tzKnown="1"] NVRM: Xid 79',
                 "rfc5424", "2024-11-23T00:50:02.123456", "EVE", "alice", "NVRM: Xid 79", id="rfc5424-user"),
    pytest.param("<3>1 2024-11-23T01:50:02+01:00 EVE kernel - - - NVRM: Xid 79", "rfc5424",
                 "2024-11-23T00:50:02", "EVE", "kernel", "NVRM: Xid 79", id="rfc5424-kernel"),
    pytest.param("<3>1 2024-11-23T00:50:02Z EVE - - - - NVRM: Xid 79", "rfc5424",
                 "2024-11-23T00:50:02", "EVE", "kernel", "NVRM: Xid 79", id="rfc5424-kern-facility"),
    pytest.param("<3>2024-11-23T00:50:02.000000+00:00 EVE kernel: NVRM: Xid 79", "rfc3339",
                 "2024-11-23T00:50:02", "EVE", "kernel", "NVRM: Xid 79", id="rsyslog-forward"),
    pytest.param("__REALTIME_TIMESTAMP=1714395341678628", "journal_export", "2024-04-29T12:55:41.678628", None,
                 None, "", id="export-realtime"),
    pytest.param("    MESSAGE=nfs: server 10.0.0.1 not responding", "journal_field", None, None, None,
                 "nfs: server 10.0.0.1 not responding", id="export-message"),
    pytest.param('{"__CURSOR":"s=5f;i=3c","__REALTIME_TIMESTAMP":"1732323002204117","_TRANSPORT":"kernel",'
                 '"_HOSTNAME":"EVE","MESSAGE":"NVRM: Xid 79"}', "journal_json", "2024-11-23T00:50:02.204117", "EVE",
                 "kernel", "NVRM: Xid 79", id="json-kernel"),
    pytest.param('{"__CURSOR":"s=5f;i=3c","__REALTIME_TIMESTAMP":"1732323002204117","_TRANSPORT":"journal",'
                 '"_COMM":"dockerd","SYSLOG_IDENTIFIER":"3f2a1b0c9d8e","MESSAGE":"NVRM: Xid 79"}', "journal_json",
                 "2024-11-23T00:50:02.204117", None, "3f2a1b0c9d8e(dockerd)", "NVRM: Xid 79", id="json-container"),
    pytest.param('{"__CURSOR":"s=5f","__REALTIME_TIMESTAMP":"1732323002204117","_TRANSPORT":"syslog",'
                 '"SYSLOG_IDENTIFIER":"kernel","MESSAGE":[78,86,82,77]}', "journal_json",
                 "2024-11-23T00:50:02.204117", None, "kernel(syslog)", "NVRM", id="json-logger-as-kernel"),
]


TWELVE_HOUR_CASES = [
    pytest.param("Nov 20 02:15:01 PM node-02 kernel: NVRM: Xid 79", "rfc3164", "2026-11-20T14:15:01", "node-02",
                 id="rfc3164-pm"),
    pytest.param("Nov 20 12:15:01 AM node-02 kernel: x", "rfc3164", "2026-11-20T00:15:01", "node-02", id="midnight"),
    pytest.param("Nov 20 12:15:01 PM node-02 kernel: x", "rfc3164", "2026-11-20T12:15:01", "node-02", id="noon"),
    pytest.param("2026-11-20 02:15:01 PM x", "iso8601", "2026-11-20T14:15:01", None, id="iso-pm"),
    pytest.param("Fri Nov 20 02:15:01 PM UTC 2026 x", "ctime", "2026-11-20T14:15:01", None, id="date-en_US"),
    pytest.param("Nov 20 13:15:01 PM node-02 kernel: x", "", None, None, id="13-pm-is-no-stamp"),
    pytest.param("Nov 20 02:15:01 pmx kernel: x", "rfc3164", "2026-11-20T02:15:01", "pmx", id="host-not-pm"),
]


@pytest.mark.parametrize(("line", "fmt", "expected", "host"), TWELVE_HOUR_CASES)
def test_twelve_hour_clocks(line: str, fmt: str, expected: str | None, host: str | None) -> None:
    """'PM' after the clock is the afternoon, not the host: read as the host, an Xid at 14:15 sat at 02:15."""
    parsed = parse_line_time(line, TimeContext(window_start=_utc("2026-11-20T00:00:00Z")))
    assert (parsed.fmt, parsed.time, parsed.host) == (fmt, _utc(expected) if expected else None, host)


@pytest.mark.parametrize(("line", "fmt", "expected", "host", "tag", "message"), JOURNAL_CASES)
def test_journal_and_syslog_protocol_formats(line: str, fmt: str, expected: str | None, host: str | None,
                                             tag: str | None, message: str) -> None:
    """journalctl's short-full, short-unix, verbose, export and json outputs, RFC 5424 and rsyslog's forward
    format: the time, the host and the program that wrote the line (only the kernel's transport is `kernel`)."""
    parsed = parse_line_time(line, TimeContext())
    assert (parsed.fmt, parsed.time, parsed.host, parsed.tag, parsed.message) == (
        fmt, _utc(expected) if expected else None, host, tag, message)


# --- lines that carry no (supported) stamp -------------------------------------------------------------

NO_STAMP_LINES = [
    pytest.param("NVRM: Xid (PCI:0000:01:00): 13, Graphics Exception: ESR 0x404000=0x80000002", id="plain"),
    pytest.param("[123] nvidia-nvswitch3: SXid (PCI:0000:c1:00.0): 28006, Non-fatal", id="no-fraction"),
    pytest.param("", id="empty"),
    pytest.param("   ", id="blank"),
    pytest.param("\x00\x00\x00[12.5\x00] x", id="nul"),
    pytest.param("[" * 10_000, id="brackets"),
    pytest.param("2026-11-20T10:30:21Zmsg", id="iso-glued-to-text"),
    pytest.param("Foo 14 05:03:41 host kernel: msg", id="bad-month-name"),
]


@pytest.mark.parametrize("line", NO_STAMP_LINES)
def test_no_stamp(line: str) -> None:
    ctx = TimeContext(window_start=_utc("2026-01-01T00:00:00"), boot_time=BOOT)
    assert parse_line_time(line, ctx) == ParsedStamp(None, line, "", None, None, ())


@pytest.mark.parametrize(
    "line",
    [
        pytest.param("2026-13-01T00:00:00Z msg", id="month-13"),
        pytest.param("2026-02-30T00:00:00Z msg", id="feb-30"),
        pytest.param("2026-11-20T25:00:00Z msg", id="hour-25"),
        pytest.param("2026-11-20T10:61:00Z msg", id="minute-61"),
        pytest.param("2026-11-20T10:30:21+25:00 msg", id="offset-25h"),
        pytest.param("2026-11-20 10:30:21,112 INFO 2026-99-99", id="ok-then-garbage-is-fine"),
        pytest.param("2024-04-29T14:55:41,679700+02:99 msg", id="dmesg-iso-bad-offset"),
        pytest.param("[Sun Feb 30 16:24:18 2025] msg", id="ctime-feb-30"),
        pytest.param("[Sun Xyz 23 16:24:18 2025] msg", id="ctime-bad-month"),
        pytest.param("Feb 30 10:00:00 host kernel: x", id="rfc3164-feb-30"),
        pytest.param("Dec  2 24:38:47 worker4 kernel: x", id="rfc3164-hour-24"),
        pytest.param("[E1320 10:30:55.201344 12345 ProcessGroupNCCL.cpp:1664] msg", id="glog-month-13"),
        pytest.param("[E0231 10:30:55.201344 12345 ProcessGroupNCCL.cpp:1664] msg", id="glog-feb-31"),
        pytest.param("[2026-11-31 10:30:21,123] msg", id="bracket-nov-31"),
        pytest.param("192.168.1.1: kern: warning: [2026-04-31T21:27:51.29Z]: msg", id="talos-apr-31"),
    ],
)
def test_out_of_range_is_no_stamp(line: str) -> None:
    parsed = parse_line_time(line, _window("2026-06-01T00:00:00"))
    if parsed.fmt == "python_logging":  # the valid leading stamp wins; the rest is message
        assert parsed.message == "INFO 2026-99-99"
        return
    assert parsed == ParsedStamp(None, line, "", None, None, ())


# --- year resolution -----------------------------------------------------------------------------------

YEAR_CASES = [
    pytest.param(
        "Dec 31 23:59:50 h kernel: x", _window("2026-01-01T00:00:05", "2026-01-01T02:00:00"),
        "2025-12-31T23:59:50", 2025, id="new-year-previous",
    ),
    pytest.param(
        "Jan  1 00:00:10 h kernel: x", _window("2025-12-31T23:00:00", "2026-01-01T01:00:00"),
        "2026-01-01T00:00:10", 2026, id="new-year-next",
    ),
    pytest.param(
        "[E1231 23:59:59.999999 7 a.cpp:1] x", _window("2026-01-01T00:10:00"),
        "2025-12-31T23:59:59.999999", 2025, id="glog-new-year",
    ),
    pytest.param(
        "Jun 10 12:00:00 h kernel: x", TimeContext(window_end=_utc("2026-06-11T00:00:00")),
        "2026-06-10T12:00:00", 2026, id="end-only",
    ),
    # Window point exactly midway between Jan 1 2026 and Jan 1 2027: tie -> the earlier year.
    pytest.param(
        "Jan  1 00:00:00 h kernel: x", _window("2026-07-02T12:00:00", "2026-07-02T12:00:00"),
        "2026-01-01T00:00:00", 2026, id="tie-earlier-year",
    ),
    pytest.param(
        "Feb 29 12:00:00 h kernel: x", _window("2028-03-01T00:00:00"), "2028-02-29T12:00:00", 2028,
        id="leap-day",
    ),
    pytest.param(
        "Mar 10 12:00:00 h kernel: x", _window("2026-03-01T00:00:00", "2026-03-31T00:00:00"),
        "2026-03-10T12:00:00", 2026, id="inside-window",
    ),
]


@pytest.mark.parametrize(("line", "ctx", "expected", "year"), YEAR_CASES)
def test_year_choice(line: str, ctx: TimeContext, expected: str, year: int) -> None:
    parsed = parse_line_time(line, ctx)
    assert parsed.time == _utc(expected)
    assert parsed.assumptions == (f"year {year} taken from the job window", ZONE_UTC)


def test_leap_day_in_no_leap_window_is_no_stamp() -> None:
    line = "Feb 29 12:00:00 h kernel: x"
    assert parse_line_time(line, _window("2026-03-01T00:00:00")).fmt == ""
    assert parse_line_time(line, NO_CTX).assumptions == ("year unknown",)


# --- zones ---------------------------------------------------------------------------------------------


@needs_tzdata
@pytest.mark.parametrize(
    ("line", "expected"),
    [
        pytest.param("[Sun Feb 23 16:24:18 2025] msg", "2025-02-23T15:24:18", id="ctime-winter"),
        pytest.param("2026-07-01 12:00:00 msg", "2026-07-01T10:00:00", id="iso-summer"),
        pytest.param("2026-07-01 12:00:00,250 INFO msg", "2026-07-01T10:00:00.250000", id="python-summer"),
        pytest.param("2026-07-01T12:00:00+00:00 msg", "2026-07-01T12:00:00", id="explicit-offset-wins"),
    ],
)
def test_context_zone(line: str, expected: str) -> None:
    ctx = TimeContext(zone=zone_from_name("Europe/Berlin"), zone_name="Europe/Berlin")
    parsed = parse_line_time(line, ctx)
    assert parsed.time == _utc(expected)
    explicit = "+00:00" in line
    assert parsed.assumptions == (() if explicit else ("zone Europe/Berlin assumed",))


@needs_tzdata
def test_yearless_in_zone() -> None:
    berlin = zone_from_name("Europe/Berlin")
    ctx = _window("2026-01-01T00:00:00", "2026-01-01T03:00:00", zone=berlin, zone_name="Europe/Berlin")
    parsed = parse_line_time("Jan  1 00:30:00 h kernel: x", ctx)
    assert parsed.time == _utc("2025-12-31T23:30:00")  # Jan 1 00:30 CET is still Dec 31 in UTC
    assert parsed.assumptions == ("year 2026 taken from the job window", "zone Europe/Berlin assumed")


@pytest.mark.parametrize(
    ("name", "offset"),
    [
        ("UTC", timedelta(0)),
        ("utc", timedelta(0)),
        ("Z", timedelta(0)),
        ("+02:00", timedelta(hours=2)),
        ("-0530", timedelta(hours=-5, minutes=-30)),
        ("+02", timedelta(hours=2)),
        (" +00:00 ", timedelta(0)),
    ],
)
def test_zone_from_name_fixed(name: str, offset: timedelta) -> None:
    assert zone_from_name(name).utcoffset(None) == offset


@needs_tzdata
def test_zone_from_name_iana() -> None:
    zone = zone_from_name("Europe/Berlin")
    assert datetime(2026, 7, 1, tzinfo=zone).utcoffset() == timedelta(hours=2)
    assert datetime(2026, 1, 1, tzinfo=zone).utcoffset() == timedelta(hours=1)


@pytest.mark.parametrize(
    "name", ["", "Mars/Olympus", "Europe", "+25:00", "+02:61", "../etc/passwd", "/etc/passwd", "+x"]
)
def test_zone_from_name_unknown(name: str) -> None:
    with pytest.raises(ValueError):
        zone_from_name(name)


# --- uptime --------------------------------------------------------------------------------------------


def test_uptime_with_naive_boot_time_taken_as_utc() -> None:
    ctx = TimeContext(boot_time=datetime(2026, 11, 20, 8, 0, 0))
    assert parse_line_time("[1.000001] x", ctx).time == _utc("2026-11-20T08:00:01.000001")


def test_uptime_exact_microseconds() -> None:
    ctx = TimeContext(boot_time=BOOT)
    parsed = parse_line_time("[9999999.999999] x", ctx)
    assert parsed.time == BOOT + timedelta(seconds=9_999_999, microseconds=999_999)


# --- parse_iso -----------------------------------------------------------------------------------------

ISO_CASES = [
    ("2026-11-20T10:30:21Z", None, "2026-11-20T10:30:21"),
    ("2026-11-20t10:30:21z", None, "2026-11-20T10:30:21"),
    ("2026-11-20T10:30:21,5Z", None, "2026-11-20T10:30:21.500000"),
    ("2026-11-20T10:30:21.123456789+0000", None, "2026-11-20T10:30:21.123456"),
    ("2026-11-20T10:30:21.123456789+00:00", None, "2026-11-20T10:30:21.123456"),
    ("2026-11-20T12:30:21+02:00", None, "2026-11-20T10:30:21"),
    ("2026-11-20T05:00:00-0530", None, "2026-11-20T10:30:00"),
    ("2026-11-20 10:30:21", None, "2026-11-20T10:30:21"),
    ("2026-11-20T10:30", None, "2026-11-20T10:30:00"),
    ("  2026-11-20T10:30:21Z  ", None, "2026-11-20T10:30:21"),
    ("2026-11-20T12:30:21", TimeContext(zone=timezone(timedelta(hours=2))), "2026-11-20T10:30:21"),
]


@pytest.mark.parametrize(("text", "ctx", "expected"), ISO_CASES)
def test_parse_iso(text: str, ctx: TimeContext | None, expected: str) -> None:
    result = parse_iso(text, ctx)
    assert result == _utc(expected)
    assert result is not None and result.tzinfo is UTC


@pytest.mark.parametrize(
    "text",
    ["", "garbage", "2026-11-20", "2026-13-20T10:30:21Z", "2026-02-30T10:30:21Z", "2026-11-20T24:00:00Z",
     "2026-11-20T10:30:21+24:00", "2026-11-20T10:30:21Z trailing", "2026-11-20T10:30:21" + " " * 10_000],
)
def test_parse_iso_rejects(text: str) -> None:
    assert parse_iso(text) is None


# --- format_utc ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dt", "expected"),
    [
        (datetime(2026, 11, 20, 10, 30, 21, tzinfo=UTC), "2026-11-20T10:30:21.000000Z"),
        (
            datetime(2026, 11, 20, 12, 30, 21, 5, tzinfo=timezone(timedelta(hours=2))),
            "2026-11-20T10:30:21.000005Z",
        ),
        (datetime(2026, 11, 20, 10, 30, 21, 123456), "2026-11-20T10:30:21.123456Z"),
        (datetime(5, 1, 2, 3, 4, 5, tzinfo=UTC), "0005-01-02T03:04:05.000000Z"),
    ],
)
def test_format_utc(dt: datetime, expected: str) -> None:
    assert format_utc(dt) == expected


# --- robustness ----------------------------------------------------------------------------------------


def test_huge_line_returns() -> None:
    body = "x" * 50_000_000
    assert parse_line_time(body, NO_CTX).fmt == ""
    parsed = parse_line_time("2026-11-20T10:30:21Z " + body, NO_CTX)
    assert parsed.fmt == "iso8601"
    assert len(parsed.message) == len(body)


def test_prefix_cut_is_not_trusted() -> None:
    host = "h" * (PREFIX_LIMIT - len("2026-11-20T10:30:21Z ") - len(" kernel:"))
    line = f"2026-11-20T10:30:21Z {host} kernel:tail-beyond-the-cut"
    assert len(f"2026-11-20T10:30:21Z {host} kernel:") == PREFIX_LIMIT
    parsed = parse_line_time(line, NO_CTX)
    assert parsed.fmt == "iso8601"  # not rfc3339: the tag's ':' was not followed by a space


def test_deterministic_and_pure() -> None:
    line = "Dec 31 23:59:50 h kernel: x"
    ctx = _window("2026-01-01T00:00:05")
    assert parse_line_time(line, ctx) == parse_line_time(line, ctx)


_FRAGMENTS = [
    "[", "]", " ", "  ", ":", ",", ".", "-", "+", "Z", "T", "\x00", "\t", "\n", "kernel:", "host",
    "2026", "-11-20", "T10:30:21", "12", "99", "Feb", "Dec", " 29", "Sun ", "E1120", "E321", "W0726",
    "10:30:55.201344", "+02:00", "+0000", "+99:99", "[12345.678901]", "[rank0]:", "kern  :warn  : ",
    "192.168.0.1: kern: warning: ", "ProcessGroupNCCL.cpp:1664]", "\udcff", "é", "0" * 30,
]


def test_fuzz_never_raises() -> None:
    rng = random.Random(20261120)
    contexts = [
        NO_CTX,
        TimeContext(boot_time=datetime(9999, 12, 31, 23, 59, tzinfo=UTC)),
        TimeContext(
            window_start=datetime(1, 1, 1, tzinfo=UTC), window_end=datetime(9999, 12, 31, tzinfo=UTC)
        ),
        TimeContext(window_start=datetime(9999, 12, 31, tzinfo=UTC), zone=timezone(timedelta(hours=-23))),
        _window("2026-01-01T00:00:00"),
    ]
    for _ in range(20_000):
        line = "".join(rng.choice(_FRAGMENTS) for _ in range(rng.randint(0, 12)))
        for ctx in contexts:
            parsed = parse_line_time(line, ctx)
            assert parsed.time is None or parsed.time.tzinfo is UTC
            assert parsed.fmt or parsed.message == line


_GATE_FRAGMENTS = [*_FRAGMENTS, "<6>", "<", "Nov 20 ", "Nov20 10:30", "[Mon Nov 20 10:30:05 2023]", "I", "F1120",
                   "[E ", "[  +0.000316]", "kern", "node-1", ": [", "2026-11-20T10:30:21", "\x0b", "\u3000", "\u0663",
                   "\uff11", "[default3]:", "3: ", " - train - INFO - ", ",123", "T", "Aug  3 10:30:21 ", "Apr",
                   " host kernel: ", "@", "a"]


def _every_format(line: str, ctx: TimeContext) -> ParsedStamp:
    """parse_line_time as it was before the gates: every format tried in order."""
    head = line[:PREFIX_LIMIT]
    for pattern, _gate, _needs, handler in timestamps._FORMATS:
        m = pattern.match(head)
        if m is None or (m.end() == len(head) < len(line)):
            continue
        try:
            parsed = handler(m, line, ctx)
        except (ValueError, OverflowError):
            parsed = None
        if parsed is not None:
            return parsed
    return ParsedStamp(None, line, "", None, None, ())


def _gate_lines() -> list[str]:
    rng = random.Random(20261203)
    lines = [str(case.values[0]) for case in [*FORMAT_CASES, *NO_STAMP_LINES]]
    for log in sorted(Path(__file__).parent.glob("golden/*/bundle/**/*.log")):
        lines += log.read_text(encoding="utf-8", errors="surrogateescape").splitlines()
    lines += ["".join(rng.choice(_GATE_FRAGMENTS) for _ in range(rng.randint(0, 10))) for _ in range(20_000)]
    return lines


def test_format_gates_only_skip_patterns_that_cannot_match() -> None:
    """A gate is a necessary condition of its pattern, so the gated search finds the same stamp."""
    ctx = _window("2026-11-20T08:00:00", "2026-11-20T20:00:00")
    for line in _gate_lines():
        head = line[:PREFIX_LIMIT]
        for pattern, gate, needs, _handler in timestamps._FORMATS:
            if pattern.match(head):
                assert gate.match(head.lstrip(" \t")[:1]) and needs in head, (pattern.pattern, line)
        assert timestamps._parse_own(line, ctx) == _every_format(line, ctx), line


@pytest.mark.parametrize(
    ("line", "ctx"),
    [
        ("[99999999.999999] x", TimeContext(boot_time=datetime(9999, 12, 31, tzinfo=UTC))),
        ("0001-01-01T00:00:00+01:00 x", NO_CTX),
        ("9999-12-31T23:59:59-01:00 x", NO_CTX),
        ("9999-12-31 23:59:59 x", TimeContext(zone=timezone(timedelta(hours=-5)))),
        ("Dec 31 23:59:59 h k: x", TimeContext(window_start=datetime(9999, 12, 31, tzinfo=UTC))),
        ("Jan  1 00:00:00 h k: x", TimeContext(window_start=datetime(1, 1, 1, tzinfo=UTC))),
    ],
)
def test_extreme_dates_do_not_raise(line: str, ctx: TimeContext) -> None:
    parsed = parse_line_time(line, ctx)
    assert parsed.time is None or parsed.time.tzinfo is UTC


def test_dmesg_human_minute_header_and_deltas() -> None:
    """dmesg -H / --reltime: '[Nov20 10:30]' opens a minute (year from the window), '[  +0.000316]' is a
    delta that carries no absolute time (the engine takes it from the line before)."""
    ctx = TimeContext(window_start=_utc("2026-11-20T09:00:00"), window_end=_utc("2026-11-20T11:00:00"))
    head = parse_line_time("[Nov20 10:30] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.", ctx)
    assert head.time == _utc("2026-11-20T10:30:00") and head.fmt == "dmesg_reltime"
    assert head.message.startswith("NVRM: Xid") and "dmesg -H stamp: minute precision" in head.assumptions
    delta = parse_line_time("[  +0.000844] nvidia 0000:03:00.0: AER: can't recover", ctx)
    assert (delta.time, delta.fmt, delta.message) == (None, "dmesg_delta", "nvidia 0000:03:00.0: AER: can't recover")


def test_dmesg_raw_priority_show_delta_and_ctime_zone() -> None:
    ctx = TimeContext(window_start=_utc("2026-11-20T09:00:00"), boot_time=BOOT)
    raw = parse_line_time("<4>[ 3610.101022] NVRM: Xid (PCI:0000:07:00): 48", ctx)
    assert raw.fmt == "dmesg_uptime" and raw.message == "NVRM: Xid (PCI:0000:07:00): 48"
    shown = parse_line_time("[ 3610.101022 <    0.000316>] mlx5_core 0000:c1:00.0: port down", ctx)
    assert shown.uptime == 3610.101022 and shown.message.startswith("mlx5_core")
    utc = parse_line_time("[Fri Nov 20 10:30:05 UTC 2026] NVRM: Xid", ctx)
    assert utc.time == _utc("2026-11-20T10:30:05") and utc.assumptions == ()
    cet = parse_line_time("[Fri Nov 20 10:30:05 CET 2026] NVRM: Xid", ctx)
    assert "zone abbreviation CET not used" in cet.assumptions


def test_util_linux_padding_of_the_day_and_the_delta() -> None:
    """util-linux pads: --reltime's minute header with strftime's '%b%e' ('[Aug 5 03:54]' on days 1-9), -T -d's
    delta after the ctime stamp, and journalctl -o short-delta's '<    0.000052 >' (its first record padded with
    blanks instead of a delta)."""
    ctx = TimeContext(window_start=_utc("2024-08-01T00:00:00"), window_end=_utc("2024-08-10T00:00:00"),
                      boot_time=BOOT)
    head = parse_line_time("[Aug 5 03:54] NVRM: GPU at PCI:0000:00:07: GPU-26fba6b2", ctx)
    assert head.time == _utc("2024-08-05T03:54:00") and head.message.startswith("NVRM:")
    delta = parse_line_time("[Mon Apr 29 14:55:41 2024 <    0.000015>] Out of memory: Killed process 1 (perl)", ctx)
    assert delta.time == _utc("2024-04-29T14:55:41") and delta.message.startswith("Out of memory")
    first = parse_line_time("[856341.770960                ] node-01 kernel: Out of memory", ctx)
    later = parse_line_time("[856341.771012 <    0.000052 >] node-01 kernel: Out of memory", ctx)
    assert (first.uptime, later.uptime) == (856341.770960, 856341.771012)
    assert first.message == later.message == "node-01 kernel: Out of memory"


def _every_year(month: int, day: int, clock: tuple[int, int, int, int], ctx: TimeContext) -> object:
    """_yearless as it was before its shortcut: all three candidate years weighed."""
    window = timestamps._window(ctx)
    assert window is not None
    lo, hi = window
    best: tuple[timedelta, int, datetime] | None = None
    for year in (lo.year - 1, lo.year, lo.year + 1):
        time = timestamps._in_zone(timestamps._wall(year, month, day, clock), ctx.zone)
        if time is not None and (best is None or timestamps._distance(time, lo, hi) < best[0]):
            best = (timestamps._distance(time, lo, hi), year, time)
    if best is None:
        return None
    return best[2], (f"year {best[1]} taken from the job window", timestamps._zone_note(ctx))


def test_yearless_shortcut_picks_the_year_weighing_all_three_picks() -> None:
    rng = random.Random(3)
    zones = [UTC, timezone(timedelta(hours=14)), timezone(timedelta(hours=-12))]
    if _has_zone("Europe/Berlin"):
        zones.append(zone_from_name("Europe/Berlin"))
    for _ in range(5_000):
        start = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(minutes=rng.randint(0, 2 * 525_600))
        end = start + timedelta(minutes=rng.choice([0, 5, 600, 60 * 24 * 40, 60 * 24 * 299, 60 * 24 * 400]))
        ctx = TimeContext(window_start=start, window_end=end, zone=rng.choice(zones))
        near = start + timedelta(minutes=rng.randint(-3000, (end - start) // timedelta(minutes=1) + 3000))
        month, day = (near.month, near.day) if rng.random() < 0.9 else (2, 29)
        clock = (rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59), rng.randint(0, 999_999))
        assert timestamps._yearless(month, day, clock, ctx) == _every_year(month, day, clock, ctx)


@pytest.mark.parametrize(("line", "host", "tag", "message"), [
    ("Mar 21 21:42:01 kernel: NVRM: GPU0 GSP RM heartbeat timed out", None, "kernel",
     "NVRM: GPU0 GSP RM heartbeat timed out"),
    ("Mar 21 21:42:01 kernel: [   12.345678] NVRM: Xid", None, "kernel", "NVRM: Xid"),
    ("Feb 23 03:28:16  kernel: mce: [Hardware Error]: x", None, "kernel", "mce: [Hardware Error]: x"),
    ("Mar 21 21:42:01 node-01 kernel: NVRM: Xid", "node-01", "kernel", "NVRM: Xid"),
    ("Mar 21 21:42:01 node-01 alice[4242]: NVRM: Xid", "node-01", "alice[4242]", "NVRM: Xid"),
])
def test_a_syslog_line_without_its_host_reads_the_tag_as_the_tag(line: str, host: Optional[str], tag: str,
                                                                 message: str) -> None:
    """`journalctl --no-hostname` leaves the host out; a stamp may be followed by two blanks."""
    window = TimeContext(window_start=datetime(2024, 2, 1, tzinfo=timezone.utc),
                         window_end=datetime(2024, 3, 30, tzinfo=timezone.utc))
    stamp = parse_line_time(line, window)
    assert stamp.time is not None
    assert (stamp.host, stamp.tag, stamp.message) == (host, tag, message)


@pytest.mark.parametrize("line", ["aug 16 23:01:35 kernel: NVRM: Xid", "AUG 16 23:01:35 node-01 kernel: NVRM: Xid",
                                  "[sun aug 16 23:01:35 2026] NVRM: Xid", "[aug16 23:01:35] NVRM: Xid"])
def test_a_month_in_any_case_is_a_month(line: str) -> None:
    """Journals and dmesg under other locales' settings write "aug"; the stamp is the same."""
    window = TimeContext(window_start=datetime(2026, 8, 1, tzinfo=timezone.utc),
                         window_end=datetime(2026, 8, 30, tzinfo=timezone.utc))
    stamp = parse_line_time(line, window)
    assert stamp.time == datetime(2026, 8, 16, 23, 1, 35, tzinfo=timezone.utc) and stamp.message == "NVRM: Xid"


@pytest.mark.parametrize(("line", "host", "tag", "fmt"), [
    ("node-01: [1084456.074562] NVRM: Xid (PCI:0000:09:00): 79", "node-01", None, "dmesg_uptime"),  # pdsh dmesg
    ("gpu17.cluster: [Tue Mar  3 10:00:01 2026] NVRM: Xid 79", "gpu17.cluster", None, "dmesg_ctime"),  # dmesg -T
    ("node-01: Mar  3 10:00:01 node-01 kernel: NVRM: Xid", "node-01", "kernel", "rfc3164"),
    ("/var/log/messages:Mar  3 10:00:01 node-02 kernel: NVRM: Xid", "node-02", "kernel", "rfc3164"),  # grep
    ("messages-20260303:12:Mar  3 10:00:01 node-02 kernel: NVRM: Xid", "node-02", "kernel", "rfc3164"),  # grep -n
    ("kern.log.1:Mar  3 10:00:01 node-02 kernel: NVRM: Xid", "node-02", "kernel", "rfc3164"),
    ("kernel: [ 1084456.074562] NVRM: Xid", None, "kernel", "dmesg_uptime"),  # a forwarder's bare tag
])
def test_a_collection_tools_prefix_is_read_past(line: str, host: Optional[str], tag: Optional[str],
                                                fmt: str) -> None:
    """pdsh, clush and grep put the host or file before each line; the stamp after it is the line's."""
    window = TimeContext(window_start=datetime(2026, 3, 1, tzinfo=timezone.utc),
                         window_end=datetime(2026, 3, 30, tzinfo=timezone.utc))
    stamp = parse_line_time(line, window)
    assert (stamp.host, stamp.tag, stamp.fmt, stamp.message) == (host, tag, fmt, line[line.index("NVRM"):])


@pytest.mark.parametrize("line", ["RuntimeError: [3] is setting up NCCL communicator",
                                  "NVRM: Xid (PCI:0000:09:00): 79", "node-01: NVRM: Xid 79",
                                  "Error: 2026-03-03T10:00:01Z-suffixed name"])
def test_a_message_is_not_read_as_a_collection_prefix(line: str) -> None:
    """Only a stamp after the prefix makes it one: a message with a colon keeps its words."""
    assert parse_line_time(line, TimeContext()) == ParsedStamp(None, line, "", None, None, ())


@pytest.mark.parametrize(("line", "message"), [
    ("ERROR 08-29 02:03:28 [core.py:700] EngineCore failed to start.", "EngineCore failed to start."),
    ("ERROR 04-15 00:31:11 worker_base.py:574] RuntimeError: Triton Error [CUDA]: x",
     "RuntimeError: Triton Error [CUDA]: x"),
    ("INFO 08-29 02:03:28.512 [gpu_model_runner.py:1329] Model loading took 14.3 GiB", "Model loading took 14.3 GiB"),
])
def test_vllms_logger_stamp(line: str, message: str) -> None:
    """vLLM: level, MM-DD HH:MM:SS, [file:line]; the year from the job window."""
    window = TimeContext(window_start=datetime(2025, 8, 1, tzinfo=timezone.utc),
                         window_end=datetime(2025, 8, 30, tzinfo=timezone.utc))
    stamp = parse_line_time(line, window)
    assert stamp.fmt == "vllm" and stamp.time is not None and stamp.time.month in (4, 8)
    assert stamp.message == message


@pytest.mark.parametrize(("line", "fmt", "note"), [
    ("  3 [1084456.074562] NVRM: Xid (PCI:0000:09:00): 79", "dmesg_uptime", "line prefixed by a line number"),
    ("     3\t[1084456.074562] NVRM: Xid (PCI:0000:09:00): 79", "dmesg_uptime", "line prefixed by a line number"),
    ("kern  :err   : [1084456.074562] NVRM: Xid (PCI:0000:09:00): 79", "dmesg_uptime", None),  # dmesg -x
    ("kern  :warn  : [Fri Nov 22 19:29:59 2024] NVRM: Xid (PCI:0000:09:00): 79", "dmesg_ctime", None),
])
def test_a_numbered_or_decoded_dmesg_line_keeps_its_stamp(line: str, fmt: str, note: Optional[str]) -> None:
    """A dmesg excerpt pasted with its line numbers (cat -n, nl, an editor) or printed with dmesg -x's
    facility and level: the stamp behind them is the line's, so an old Xid stays old."""
    window = TimeContext(window_start=datetime(2024, 11, 22, tzinfo=UTC), window_end=datetime(2024, 11, 23, tzinfo=UTC),
                         boot_time=datetime(2024, 11, 10, 6, 15, 43, tzinfo=UTC))
    stamp = parse_line_time(line, window)
    assert (stamp.fmt, stamp.time) == (fmt, datetime(2024, 11, 22, 19, 29, 59, 74562 if "." in line[:30] else 0,
                                                      tzinfo=UTC))
    assert stamp.message.startswith("NVRM: Xid")
    assert note is None or note in stamp.assumptions


@pytest.mark.parametrize(("line", "fmt", "when", "message"), [
    ("Mon Aug 26 18:41:15 2019 job started", "ctime", datetime(2019, 8, 26, 18, 41, 15, tzinfo=UTC), "job started"),
    ("Mon Aug 26 18:41:15 UTC 2019", "ctime", datetime(2019, 8, 26, 18, 41, 15, tzinfo=UTC), ""),  # date(1)
    ("2019-08-26 18:41:15.943905: E tensorflow/stream_executor/cuda/cuda_driver.cc:828] failed to allocate",
     "iso8601", datetime(2019, 8, 26, 18, 41, 15, 943905, tzinfo=UTC),
     "E tensorflow/stream_executor/cuda/cuda_driver.cc:828] failed to allocate"),
])
def test_ctime_and_tensorflows_stamp(line: str, fmt: str, when: datetime, message: str) -> None:
    window = TimeContext(window_start=datetime(2019, 8, 26, tzinfo=UTC), window_end=datetime(2019, 8, 27, tzinfo=UTC))
    stamp = parse_line_time(line, window)
    assert (stamp.fmt, stamp.time, stamp.message) == (fmt, when, message)


@pytest.mark.parametrize("line", ["Monday was a holiday", "Mon Aug 26 done", "  3 apples: [12] NVRM"])
def test_words_like_a_ctime_or_a_number_column_are_no_stamp(line: str) -> None:
    assert parse_line_time(line, TimeContext()).fmt == ""


@pytest.mark.parametrize(("line", "month"), [
    ("lis 16 19:24:11 EVE kernel: NVRM: Xid", 11),  # pl
    ("11月 16 19:24:11 EVE kernel: NVRM: Xid", 11),  # zh, ja
    ("Dez 16 19:24:11 EVE kernel: x", 12),  # de
    ("févr. 16 19:24:11 EVE kernel: x", 2),  # fr
    ("ноя 16 19:24:11 EVE kernel: x", 11),  # ru
    ("\ufeffNov 16 19:24:11 EVE kernel: x", 11),  # a byte-order mark before the first line
    ("[二 11月 16 19:24:11 2024] NVRM: Xid", 11),  # dmesg -T, zh weekday
    ("april 16 19:24:11 robin-linux-x3d kernel: NVRM: Xid", 4),  # nb (glibc's CLDR abbreviations)
    ("juni 16 19:24:11 EVE kernel: x", 6),  # sv
    ("maalis 16 19:24:11 EVE kernel: x", 3),  # fi
    ("bře 16 19:24:11 EVE kernel: x", 3),  # cs
    ("szept. 16 19:24:11 EVE kernel: x", 9),  # hu
    ("лис 16 19:24:11 EVE kernel: x", 11),  # uk
])
def test_a_month_in_the_nodes_locale_is_a_month(line: str, month: int) -> None:
    """journald, rsyslog and dmesg -T write %b in the node's locale: an old Xid stays old in Polish too."""
    window = TimeContext(window_start=datetime(2024, 11, 1, tzinfo=UTC), window_end=datetime(2024, 12, 31, tzinfo=UTC))
    stamp = parse_line_time(line, window)
    assert stamp.time is not None and (stamp.time.month, stamp.time.day) == (month, 16)


def test_the_repeated_hour_of_a_dst_change_takes_the_reading_inside_the_job() -> None:
    """New York's 01:20 on the night summer time ends happens twice (05:20Z and 06:20Z): the job window
    picks the reading it holds, the second for a job that ended at 06:20, the first for one at 05:00-05:30."""
    zone = zone_from_name("America/New_York")
    inside = TimeContext(window_start=datetime(2019, 11, 3, 5, 45, tzinfo=UTC),
                         window_end=datetime(2019, 11, 3, 6, 20, 16, tzinfo=UTC), zone=zone, zone_name="New York")
    line = "Nov  3 01:20:15 node-01 kernel: Out of memory: Killed process 15784 (python3)"
    assert parse_line_time(line, inside).time == datetime(2019, 11, 3, 6, 20, 15, tzinfo=UTC)
    before = TimeContext(window_start=datetime(2019, 11, 3, 5, 0, tzinfo=UTC),
                         window_end=datetime(2019, 11, 3, 5, 30, tzinfo=UTC), zone=zone, zone_name="New York")
    assert parse_line_time(line, before).time == datetime(2019, 11, 3, 5, 20, 15, tzinfo=UTC)


@pytest.mark.parametrize(("line", "facility"), [
    ("kern  :warn  : 2025-01-21T08:41:30,287197+00:00 oom_reaper: reaped process 345646 (vector), now", 0),
    ("syslog:err   : 2025-05-27T04:18:56,089671+00:00 NVRM: Xid (PCI:0000:04:00): 79, GPU has fallen off", 5),
    ("user  :err   : [ 1084456.074562] NVRM: Xid (PCI:0000:09:00): 79, pid=0, GPU has fallen off the bus.", 1),
    ("kern  :err   : [Mon Nov 20 10:30:00 2026] NVRM: Xid (PCI:0000:09:00): 79", 0),
    ("2025-01-21T08:41:30,287197+00:00 oom_reaper: reaped process 345646 (vector), now", None),
])
def test_dmesg_decode_names_the_facility(line: str, facility: int | None) -> None:
    """dmesg -x / --decode: the facility before the stamp, in every stamp style; a program's write to /dev/kmsg
    never has the kernel's (0), so the engine can tell it apart."""
    assert parse_line_time(line, TimeContext()).facility == facility


@pytest.mark.parametrize(("line", "facility", "tag", "uptime", "message"), [
    ("Tue Apr  8 16:01:10 2025 kern.err kernel: NVRM: Xid (PCI:0000:1a:00): 79", 0, "kernel", None,
     "NVRM: Xid (PCI:0000:1a:00): 79"),
    ("Tue Apr  8 16:01:10 2025 user.err kernel: NVRM: Xid (PCI:0000:1a:00): 79", 1, "kernel", None,
     "NVRM: Xid (PCI:0000:1a:00): 79"),
    ("Tue Apr  8 16:01:10 2025 [1744128070.123] kern.warn kernel: [   12.345678] mlx5_core: link down", 0, "kernel",
     12.345678, "mlx5_core: link down"),
    ("Tue Apr  8 16:01:10 2025 daemon.err slurmd[123]: error: Prolog failed", 3, "slurmd[123]", None,
     "error: Prolog failed"),
])
def test_logread_names_the_facility_and_the_program(line: str, facility: int, tag: str, uptime: float | None,
                                                    message: str) -> None:
    """OpenWrt's logread: the facility and level after the ctime stamp, then 'kernel:' for the kernel log's
    records (a program's write to /dev/kmsg among them, as user.*) or the program's own tag."""
    parsed = parse_line_time(line, TimeContext())
    assert (parsed.fmt, parsed.time, parsed.facility, parsed.tag, parsed.uptime, parsed.message) == (
        "logread", datetime(2025, 4, 8, 16, 1, 10, tzinfo=UTC), facility, tag, uptime, message)


@pytest.mark.parametrize(("line", "facility"), [
    ("4,7781,594675027262,-;python invoked oom-killer: gfp_mask=0x14200ca", 0),
    # a program's write to /dev/kmsg: LOG_USER unless it names another (kernel/printk/printk.c devkmsg_write)
    ("12,900,5000000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.", 1),
])
def test_kmsg_record_carries_its_facility(line: str, facility: int) -> None:
    assert parse_line_time(line, TimeContext(boot_time=BOOT)).facility == facility


def test_kmsg_continuation_line_is_no_record() -> None:
    assert parse_line_time(" SUBSYSTEM=pci", TimeContext(boot_time=BOOT)).fmt == ""


def test_a_deeply_nested_json_line_is_no_object() -> None:
    """A line of 20,000 nested brackets (a job may print one) is not an object, and raises nothing."""
    assert json_object('{"log": "x", "x": ' + "[" * 20000 + "]" * 20000 + "}") is None


GPFS_CASES = [
    # mmfs.log before Storage Scale 4.2: ctime, milliseconds, a colon; the node's local time
    pytest.param("Thu Jul 10 10:14:31.871 2014: [N] Connecting to 10.0.0.1", "ctime", "2014-07-10T10:14:31.871",
                 "[N] Connecting to 10.0.0.1", id="mmfs-ctime-ms"),
    pytest.param("Mon Jun 25 16:11:21 2018: Lost membership in cluster remote.cluster. Unmounting file systems.",
                 "ctime", "2018-06-25T16:11:21", "Lost membership in cluster remote.cluster. Unmounting file systems.",
                 id="mmfs-ctime"),
    # since 4.2: an ISO date and clock joined by '_', the offset, a colon
    pytest.param("2016-05-27_10:08:42.123+0800: [E] Lost membership in cluster x. Unmounting file systems.",
                 "iso8601", "2016-05-27T02:08:42.123", "[E] Lost membership in cluster x. Unmounting file systems.",
                 id="mmfs-iso-underscore"),
    # a word after the year is no colon's: still no stamp of this form
    pytest.param("Thu Jul 10 10:14:31 2014x: msg", "", None, "Thu Jul 10 10:14:31 2014x: msg", id="year-runs-on"),
]


@pytest.mark.parametrize(("line", "fmt", "expected", "message"), GPFS_CASES)
def test_storage_scale_mmfs_log(line: str, fmt: str, expected: str | None, message: str) -> None:
    """IBM Storage Scale writes its own log (mmfs.log) with a stamp of its own: read, so that its lines are
    placed in the job window like the kernel's."""
    parsed = parse_line_time(line, TimeContext())
    assert (parsed.fmt, parsed.time, parsed.message) == (fmt, _utc(expected) if expected else None, message)


UCX_CASES = [
    pytest.param("[1737425283.943620] [node13:18468:a]       ib_device.c:479  UCX  WARN  IB Async event on "
                 "mlx5_bond_0: GID table change on port 1", "2025-01-21T02:08:03.943620", "node13", id="ucx"),
    pytest.param("[1635835013.823013] [node181:6471 :async]       ib_device.c:475  UCX  WARN  IB Async event on "
                 "mlx5_0: GID table change on port 1", "2021-11-02T06:36:53.823013", "node181", id="ucx-padded-pid"),
]


@pytest.mark.parametrize(("line", "expected", "host"), UCX_CASES)
def test_ucx_log_stamp(line: str, expected: str, host: str) -> None:
    """UCX's '[<epoch>] [host:pid:thread]' is the wall clock in seconds since the epoch, not dmesg's uptime that
    shares its brackets; the message starts at UCX's file and line."""
    parsed = parse_line_time(line, TimeContext())
    assert (parsed.fmt, parsed.time, parsed.host) == ("ucx", _utc(expected), host)
    assert parsed.message.startswith("ib_device.c:47")


def test_uptime_in_brackets_is_still_dmesg() -> None:
    """A bracketed number without UCX's '[host:pid:thread]' after it stays dmesg's uptime."""
    assert parse_line_time("[1737425283.947186] x", TimeContext()).fmt == "dmesg_uptime"
    assert parse_line_time("[ 1234.567890] NVRM: Xid", TimeContext()).fmt == "dmesg_uptime"
