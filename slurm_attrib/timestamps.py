"""Deterministic timestamp parsing for kernel and application log lines.

Every stamp is resolved to an aware UTC datetime without consulting the clock, the machine's local
zone or the locale; whatever had to be assumed to get there (year, zone, boot time) is recorded as a
sorted tuple of plain strings so that results are reproducible and explainable.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone, tzinfo
from functools import lru_cache
from typing import Any, NamedTuple, Optional
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = [
    "JOURNAL_RECORD_FORMATS",
    "PREFIX_LIMIT",
    "SYSLOG_FORMATS",
    "ParsedStamp",
    "TimeContext",
    "format_utc",
    "iso_offset",
    "parse_iso",
    "parse_line_time",
    "zone_from_name",
]

SYSLOG_FORMATS = ("rfc3164", "journal_short_precise", "journal_short_iso", "rfc3339", "journal_short_full",
                  "journal_short_unix", "rfc5424", "logread")
"""The formats whose lines read ``time host tag: message`` (:attr:`ParsedStamp.tag` is the program)."""

JOURNAL_RECORD_FORMATS = ("journal_json", "journal_field")
"""Lines that are one field of a journal record (``journalctl -o json``'s object, ``-o export`` / ``-o verbose``'s
``MESSAGE=`` line): the record's own fields name the program (``_TRANSPORT``, ``SYSLOG_IDENTIFIER``), and
:attr:`ParsedStamp.tag` is ``kernel`` only when the journal took the message from the kernel."""

PREFIX_LIMIT = 256
"""Only this many leading characters of a line are examined, so cost does not grow with line length."""

_UTC = timezone.utc
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
# Abbreviated month names as strftime's %b writes them (glibc's abmon) in the locales cluster nodes run:
# journald, rsyslog and dmesg -T print the node's locale. Keys are lower case without a trailing dot;
# Chinese, Japanese and Korean write the number and 月 / 월.
_MONTH_NAMES = (
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"),  # en, sv, nl, pt
    ("jan", "feb", "mär", "apr", "mai", "jun", "jul", "aug", "sep", "okt", "nov", "dez"),  # de
    ("janv", "févr", "mars", "avr", "mai", "juin", "juil", "août", "sept", "oct", "nov", "déc"),  # fr
    ("ene", "feb", "mar", "abr", "may", "jun", "jul", "ago", "sept", "oct", "nov", "dic"),  # es
    ("gen", "feb", "mar", "apr", "mag", "giu", "lug", "ago", "set", "ott", "nov", "dic"),  # it
    ("sty", "lut", "mar", "kwi", "maj", "cze", "lip", "sie", "wrz", "paź", "lis", "gru"),  # pl
    ("янв", "фев", "мар", "апр", "мая", "июн", "июл", "авг", "сен", "окт", "ноя", "дек"),  # ru
    ("jan", "fev", "mar", "abr", "mai", "jun", "jul", "ago", "set", "out", "nov", "dez"),  # pt
    ("jan", "feb", "mrt", "apr", "mei", "jun", "jul", "aug", "sep", "okt", "nov", "dec"),  # nl
    ("oca", "şub", "mar", "nis", "may", "haz", "tem", "ağu", "eyl", "eki", "kas", "ara"),  # tr
    # glibc's newer (CLDR) abbreviations keep short months whole: sv "mars", "juni", "juli", nb "april", "des"
    ("jan", "feb", "mars", "apr", "maj", "juni", "juli", "aug", "sep", "okt", "nov", "dec"),  # sv, da
    ("jan", "feb", "mars", "april", "mai", "juni", "juli", "aug", "sep", "okt", "nov", "des"),  # nb, nn
    ("led", "úno", "bře", "dub", "kvě", "čvn", "čvc", "srp", "zář", "říj", "lis", "pro"),  # cs
    ("jan", "febr", "márc", "ápr", "máj", "jún", "júl", "aug", "szept", "okt", "nov", "dec"),  # hu
    ("tammi", "helmi", "maalis", "huhti", "touko", "kesä", "heinä", "elo", "syys", "loka", "marras", "joulu"),  # fi
    ("ian", "feb", "mar", "apr", "mai", "iun", "iul", "aug", "sep", "oct", "nov", "dec"),  # ro
    ("січ", "лют", "бер", "кві", "тра", "чер", "лип", "сер", "вер", "жов", "лис", "гру"),  # uk  # noqa: RUF001
)
_MONTHS = {name: number for names in _MONTH_NAMES for number, name in enumerate(names, start=1)} | {
    "avril": 4, "май": 5, "sep": 9, "march": 3, "april": 4, "june": 6, "july": 7, "august": 8}
_CJK_MONTH = re.compile(r"(\d{1,2})[月월]")


def _month(name: str) -> int | None:
    """The month number of an abbreviated month name in any of :data:`_MONTH_NAMES`' locales, or None."""
    cjk = _CJK_MONTH.fullmatch(name) if name[-1:] in ("月", "월") else None
    if cjk:
        number = int(cjk.group(1))
        return number if 1 <= number <= 12 else None
    return _MONTHS.get(name.lower().rstrip("."))
_UTC_NAMES = frozenset({"UTC", "Z", "GMT"})


@dataclass(frozen=True)
class TimeContext:
    """What is needed to resolve stamps that lack a year, a zone, or are uptimes."""

    window_start: datetime | None = None
    window_end: datetime | None = None
    zone: tzinfo = _UTC
    zone_name: str = "UTC"
    boot_time: datetime | None = None


class ParsedStamp(NamedTuple):
    """The time found at the start of one log line, the rest of the line, and how it was resolved. A named
    tuple, not a frozen dataclass: one is made for every line whose time is read, and a frozen dataclass's
    ``__init__`` (a guarded ``object.__setattr__`` per field) costs three times as much."""

    time: datetime | None
    message: str
    fmt: str
    host: str | None
    uptime: float | None
    assumptions: tuple[str, ...]
    tag: str | None = None  # the syslog program tag (``kernel``, ``alice[4242]``) where the format has one
    facility: int | None = None  # the syslog facility where the format carries one (0: kern; a user can't set it)


# --- regular expressions (compiled once) -------------------------------------------------------------

_LEAD = r"^[ \t]*"
_END = r"(?=[ \t]|\Z)[ \t]*"
_DATE = r"(?P<Y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})"
_CLOCK = r"(?P<H>\d{2}):(?P<Mi>\d{2}):(?P<S>\d{2})"
_DOT_FRAC = r"(?:\.(?P<f>\d+))?"
_ANY_FRAC = r"(?:[.,](?P<f>\d+))?"
_OFFSET = r"(?P<off>[Zz]|[+-]\d{2}(?::?\d{2})?)"
# a month name in any case and script ("aug", "Mär", "févr.", "апр"), or a number and 月 / 월 ("11月")
_MONTH_DAY = r"(?P<mon>[^\W\d_]{3,6}\.?|\d{1,2}[月월]) +(?P<d>\d{1,2})"
_TAG = r"[^\s:\[\]]+(?:\[\d+\])?"
_UPTIME = r"\[[ \t]*(?P<up>\d{1,10}\.\d{1,9})\][ \t]*"
# the host is left out by `journalctl --no-hostname` and some forwarders ("Mar 21 21:42:01 kernel: ..."):
# a first word that ends with a colon is the tag, never a host
# BusyBox syslogd writes the facility and level between the host and the tag ("host kern.err kernel: ...")
_FACILITY_LEVEL = (r"(?P<fac>kern|user|mail|daemon|auth|syslog|lpr|news|uucp|cron|authpriv|ftp|local[0-7])"
                   r"\.(?:emerg|alert|crit|err|error|warn|warning|notice|info|debug) ")
_FACILITY = rf"(?:{_FACILITY_LEVEL})?"
_FACILITY_NUMBERS = {name: number for number, name in enumerate(
    ("kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron", "authpriv", "ftp"))} | {
    f"local{n}": 16 + n for n in range(8)}
_HOST_TAG = rf"(?:(?P<host>\S*[^\s:]) )?{_FACILITY}(?P<tag>{_TAG}):(?=[ \t]|\Z)[ \t]*(?:{_UPTIME})?"
_RANK = r"(?:\[[A-Za-z]*\d+\]:){0,2}"
_LEVEL_WORD = r"(?:INFO|WARN|WARNING|ERROR|DEBUG|CRITICAL|FATAL|TRACE|NOTICE)[ \t]"

_PRIORITY = r"(?:<(?P<kpri>\d{1,3})>)?"  # dmesg -r / --raw, rsyslog's forward formats: the priority first
# dmesg -x / --decode: facility and level before the stamp, each padded ("kern  :err   : [ 12.5] ...")
_DECODED = (r"(?:(?P<dfac>kern|user|mail|daemon|auth|syslog|lpr|news|uucp|cron|authpriv|ftp|local[0-7]) *:"
            r" *(?:emerg|alert|crit|err|warn|notice|info|debug) *: +)?")
_RE_DMESG_UPTIME = re.compile(
    _LEAD + _PRIORITY + _DECODED
    # dmesg -d's '<    0.000052>' and journalctl -o short-delta's '<    0.000052 >' after the uptime, or the
    # blanks short-delta pads its first record with
    + r"\[[ \t]*(?P<up>\d{1,10}\.\d{1,9})(?:[ \t]*<[ \t]*\d+\.\d+[ \t]*>|[ \t]+)?\][ \t]*"
)
# a 12-hour clock's half of the day (date(1) in en_US, exports of log tools): "02:15:01 PM" is 14:15:01
_AMPM = r"(?: (?P<ampm>[AaPp][Mm])(?![\w:]))?"
_CTIME = _MONTH_DAY + " " + _CLOCK + _AMPM + r" (?:(?P<zn>[A-Z]{2,5}) )?(?P<Y>\d{4})"  # after the weekday
# dmesg -T -d ('[Mon Apr 29 14:55:41 2024 <    0.000015>] ...'): the delta to the previous line after the stamp
_RE_DMESG_CTIME = re.compile(_LEAD + _PRIORITY + _DECODED + r"\[[^\W\d_]{1,4}\.? " + _CTIME
                             + r"(?:[ \t]*<[ \t]*\d+\.\d+[ \t]*>)?\][ \t]*")
# C's ctime()/asctime() and date(1): "Mon Aug 26 18:41:15 2019" (date adds a zone: "... UTC 2019"); the
# stamp horovodrun puts before each rank's line ("Mon Aug 26 18:41:15 2019[1]<stderr>:", see .engine.ranks); IBM
# Storage Scale's (GPFS) mmfs.log before 4.2, milliseconds and a colon ("Thu Jul 10 10:14:31.871 2014: [N] ...")
_RE_CTIME = re.compile(_LEAD + r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) " + _MONTH_DAY + " " + _CLOCK + _DOT_FRAC + _AMPM
                       + r" (?:(?P<zn>[A-Z]{2,5}) )?(?P<Y>\d{4}):?" + _END)
# OpenWrt's logread (ubox log/logread.c, log_notify): ctime, '[sec.ms] ' with -t, the facility and level, then
# ' kernel:' for a record of the kernel's log, where a program's write to /dev/kmsg shows as 'user.*', or the
# program's own 'tag[pid]:' ("Tue Apr  8 16:01:10 2025 kern.err kernel: NVRM: Xid ...")
_RE_LOGREAD = re.compile(_LEAD + r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) " + _CTIME + r" (?:\[\d{1,10}\.\d{1,3}\] )?"
                         + _FACILITY_LEVEL + rf"(?P<tag>{_TAG}):(?=[ \t]|\Z)[ \t]*(?:{_UPTIME})?")
# dmesg -H / --reltime: '[Nov20 10:30]' opens each minute; '[  +0.000316]' is the delta to the previous line.
_RE_DMESG_RELTIME = re.compile(
    _LEAD + r"\[(?P<mon>[A-Za-z]{3}) ?(?P<d>\d{1,2}) (?P<H>\d{2}):(?P<Mi>\d{2})(?::(?P<S>\d{2}))?\][ \t]*"
)
_RE_DMESG_DELTA = re.compile(_LEAD + r"\[[ \t]*\+[ \t]*\d+\.\d{1,9}\][ \t]*")
_RE_BRACKET_ISO = re.compile(_LEAD + r"\[" + _DATE + r"[Tt ]" + _CLOCK + _ANY_FRAC + _OFFSET + r"?\][ \t]*")
_RE_GLOG = re.compile(
    _LEAD
    + _RANK
    + r"\[?(?P<sev>[IWEF])(?P<mo>\d{1,2})(?P<d>\d{2}) +"
    + _CLOCK
    + r"\.(?P<f>\d+)(?: +\d+)? +[^\s\]]+:\d+\][ \t]*"
)
_RE_GLOG_NOTIME = re.compile(_LEAD + _RANK + r"\[[IWEF] [^\s\]]+:\d+\][ \t]*")
_RE_TALOS = re.compile(
    _LEAD + r"(?P<host>\S+): [a-z]+: +[a-z]+: \[" + _DATE + "[Tt]" + _CLOCK + _DOT_FRAC + _OFFSET
    + r"\]:[ \t]*"
)
# a record as /dev/kmsg hands it out ('cat /dev/kmsg', a collector reading the device): 'PRI,SEQ,USEC,FLAGS;message'
# (Documentation/ABI/testing/dev-kmsg), the time in microseconds since boot, further fields before the ';' in newer
# kernels (the caller's id); the priority carries the facility, the kernel's own 0, a program's write LOG_USER
_RE_KMSG = re.compile(_LEAD + r"(?P<kpri>\d{1,4}),\d{1,20},(?P<usec>\d{1,20}),[-+cx]{1,4}(?:,[^;\n]{0,200})?;")
_RE_DMESG_ISO = re.compile(
    _LEAD + r"(?:(?P<dfac>[a-z]+[0-7]?) *: *[a-z]+ *: +)?" + _DATE + "T" + _CLOCK + r",(?P<f>\d+)" + _OFFSET + _END
)
_RE_ISO_HOST = re.compile(  # rsyslog's RSYSLOG_ForwardFormat puts the priority first ("<3>2024-11-23T00:50:02...")
    _LEAD + _PRIORITY + _DATE + "[Tt]" + _CLOCK + _DOT_FRAC + _OFFSET + " (?!" + _LEVEL_WORD + ")" + _HOST_TAG
)
# vLLM's logger: "%(levelname)s %(asctime)s %(filename)s:%(lineno)d] %(message)s" with datefmt "%m-%d %H:%M:%S"
# (newer releases "[file:line] "): no year, local time
_RE_VLLM = re.compile(
    _LEAD + r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<mo>\d{2})-(?P<d>\d{2}) " + _CLOCK + _DOT_FRAC
    + r" \[?[\w./-]+:\d+\][ \t]*"
)
_RE_PYTHON_LOGGING = re.compile(_LEAD + _DATE + " " + _CLOCK + r",(?P<f>\d{3})" + _END)
# the colon: TensorFlow's and absl's C++ logging, "2019-08-26 18:41:15.943905: E tensorflow/...:828] msg"; the
# underscore: mmfs.log of IBM Storage Scale (GPFS) since 4.2, "2016-05-27_10:08:42.123+0800: [E] msg"
_RE_ISO8601 = re.compile(_LEAD + _DATE + r"[Tt _]" + _CLOCK + _ANY_FRAC + _AMPM + _OFFSET + "?:?" + _END)
_RE_RFC3164 = re.compile(
    _LEAD + _PRIORITY + _MONTH_DAY + " " + _CLOCK + _DOT_FRAC + _AMPM + r" +(?:" + _HOST_TAG + r"|(?P<bare>\S+)[ \t]*)"
)
# journalctl -o short-full / with-unit ("Sat 2024-11-16 19:24:11 UTC EVE kernel: msg": weekday, date, clock
# and the zone's abbreviation) and the head line of an -o verbose record, which names the entry's cursor
# instead of a host ("Sat 2025-05-24 02:00:22.760083 UTC [s=7a3e...;i=8c21;b=...;m=...;t=...;x=...]")
_RE_JOURNAL_FULL = re.compile(
    _LEAD + r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) " + _DATE + " " + _CLOCK + _DOT_FRAC
    + r"(?: (?P<zn>[A-Za-z]{1,6}|[+-]\d{2}(?::?\d{2})?))? +"
    + r"(?:(?P<cursor>\[s=[0-9a-f]{1,64};i=[0-9a-f]{1,16};)[^\]\s]{0,200}\]?[ \t]*|" + _HOST_TAG + ")"
)
# journalctl -o short-unix: seconds since the epoch, then host and tag ("1722253127.470994 worker4 kernel: ")
_RE_EPOCH_HOST = re.compile(_LEAD + r"(?P<epoch>\d{10})\.(?P<f>\d{1,9}) " + _HOST_TAG)
# UCX's own log lines (ucs/debug/log.c): seconds since the epoch in brackets, then '[host:pid:thread]', then the
# file and line ('[1737425283.943620] [node13:18468:a]       ib_device.c:479  UCX  WARN  ...', the pid padded
# in older releases: '[node181:6471 :async]'); read before dmesg's uptime, whose brackets they share
_RE_UCX = re.compile(_LEAD + r"\[(?P<epoch>\d{10})\.(?P<f>\d{1,9})\] "
                     r"\[(?P<host>[^\s:\[\]]{1,255}):[ \d]{1,12}:\w{1,16}\][ \t]*")
# RFC 5424 (rsyslog's RSYSLOG_SyslogProtocol23Format, syslog-ng, `logger --rfc5424`): "<PRI>1 TIMESTAMP HOST
# APP-NAME PROCID MSGID STRUCTURED-DATA MSG"; "-" stands for a field left out. APP-NAME is the program.
_RE_RFC5424 = re.compile(
    _LEAD + r"(?:<(?P<pri>\d{1,3})>)?1 " + _DATE + "[Tt]" + _CLOCK + _DOT_FRAC + _OFFSET
    + r" (?P<host>\S{1,255}) (?P<tag>\S{1,48}) \S{1,128} \S{1,32} (?:-|(?:\[(?:[^\]\\]|\\.){0,512}\])+)(?: |\Z)"
)
# -o export and -o verbose: one field per line, a blank line (export) or the head line (verbose) between
# records; the record's time is its __REALTIME_TIMESTAMP (microseconds since the epoch) or its head line
_RE_JOURNAL_FIELD = re.compile(_LEAD + r"(?:__REALTIME_TIMESTAMP=(?P<realtime>\d{1,20})[ \t]*\Z|MESSAGE=)")
# -o json-pretty: one field per line ('\t"MESSAGE" : "NVRM: Xid ...",' between '{' and '}'); as a MESSAGE= line,
# its record's other lines say when and who
_RE_JOURNAL_PRETTY = re.compile(_LEAD + r'"MESSAGE" : "')
# -o json: one object per line
_RE_JOURNAL_JSON = re.compile(r'[ \t]*\{[ \t]*"')
JOURNAL_JSON_MAX = 1 << 16  # a longer line is not read as a journal object

# What a collection tool writes before each line it hands on: pdsh, clush or ``ssh node dmesg | sed`` the
# host ("node-03: [ 12.5] NVRM: ..."), grep over several files the file's name and, with -n, the line number
# ("/var/log/messages:Jan  3 ...", "kern.log.1:88:..."). Only read when the line has no stamp of its own
# and a stamp follows the prefix, so a message such as "RuntimeError: [3] is setting up" is left alone.
COLLECTED_HOST = r"[A-Za-z0-9][\w.-]{0,62}"  # a host as pdsh and clush print it (also before application lines)
QUOTE_MARKER = r"(?:>[ \t]?){1,8}"  # a mail or Markdown quote marker before a pasted line (also application lines)
_RE_COLLECTED = re.compile(
    r"[ \t]*(?:(?:(?P<path>/[^\s:]{1,255}|[\w.-]{0,64}(?:messages|syslog|kern\.log|dmesg|journal)[\w.-]{0,32})"
    r"(?::\d{1,12})?|(?P<host>" + COLLECTED_HOST + r")):[ \t]?"
    r"|(?P<lineno>\d{1,12})(?:\t| +)"  # a line-number column: cat -n and nl (tab), less -N and editors (blanks)
    r"|(?P<quote>" + QUOTE_MARKER + r"))"
)

_RE_ISO_FULL = re.compile(
    r"[ \t]*" + _DATE + r"[Tt ](?P<H>\d{2}):(?P<Mi>\d{2})(?::(?P<S>\d{2})(?:[.,](?P<f>\d+))?)?"
    + _OFFSET + r"?[ \t]*\Z"
)
_RE_OFFSET = re.compile(r"(?P<sign>[+-])(?P<hh>\d{2})(?::?(?P<mm>\d{2}))?\Z")


# --- small helpers ------------------------------------------------------------------------------------


def format_utc(dt: datetime) -> str:
    """Render ``dt`` as the project's canonical ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (naive means UTC)."""
    u = _as_utc(dt)
    return (
        f"{u.year:04d}-{u.month:02d}-{u.day:02d}T{u.hour:02d}:{u.minute:02d}:{u.second:02d}"
        f".{u.microsecond:06d}Z"
    )


def _iso_z(dt: datetime) -> str:
    """Short ISO form with 'Z' for assumption notes: fraction only when non-zero."""
    text = format_utc(dt)
    return text[:19] + "Z" if text.endswith(".000000Z") else text


def _as_utc(dt: datetime) -> datetime:
    """Convert an aware datetime to UTC; a naive one is taken to be UTC already (never local time)."""
    if dt.tzinfo is None or dt.utcoffset() is None:
        return dt.replace(tzinfo=_UTC)
    return dt.astimezone(_UTC)


def _micros(fraction: str | None) -> int:
    """Decimal fraction digits to microseconds, truncating anything finer (nanoseconds)."""
    return int((fraction or "").ljust(6, "0")[:6])


def _offset_zone(text: str) -> tzinfo | None:
    """A fixed zone for 'Z', '+HH', '+HHMM' or '+HH:MM'; None when out of range."""
    if text in ("Z", "z"):
        return _UTC
    m = _RE_OFFSET.match(text)
    if m is None:
        return None
    hours, minutes = int(m["hh"]), int(m["mm"] or 0)
    if hours > 23 or minutes > 59:
        return None
    delta = timedelta(hours=hours, minutes=minutes)
    if not delta:
        return _UTC
    return timezone(-delta if m["sign"] == "-" else delta)


def _wall(year: int, month: int, day: int, clock: tuple[int, int, int, int]) -> datetime | None:
    """A naive wall-clock datetime, or None when any field is out of range."""
    try:
        return datetime(year, month, day, *clock)
    except ValueError:
        return None


def _in_zone(wall: datetime | None, zone: tzinfo, ctx: TimeContext | None = None) -> datetime | None:
    """Attach ``zone`` to a wall-clock time and convert to UTC; None if impossible. A wall time that the zone
    shows twice (the hour repeated when daylight saving time ends) has two readings: with a job window in
    ``ctx``, the one inside it when only one is, else the first."""
    if wall is None:
        return None
    try:
        first = wall.replace(tzinfo=zone).astimezone(_UTC)
        if ctx is None or isinstance(zone, timezone):  # a fixed offset repeats no hour
            return first
        second = wall.replace(tzinfo=zone, fold=1).astimezone(_UTC)
    except (OverflowError, ValueError):
        return None
    window = _window(ctx) if second != first else None
    if window is not None and not window[0] <= first <= window[1] and window[0] <= second <= window[1]:
        return second
    return first


def _opt(m: re.Match[str], name: str) -> str | None:
    """A named group's text, or None when it did not take part or the pattern lacks it."""
    return m[name] if name in m.re.groupindex else None


def _clock(m: re.Match[str]) -> tuple[int, int, int, int]:
    """Hour, minute, second, microsecond from the named groups of a match; a 12-hour clock's AM/PM read (an
    hour it cannot have, 13 PM or 0 AM, is out of range: no stamp)."""
    hour = int(m["H"])
    half = _opt(m, "ampm")
    if half is not None:
        hour = (hour % 12 + (12 if half in ("PM", "pm", "Pm", "pM") else 0)) if 1 <= hour <= 12 else 99
    return hour, int(m["Mi"]), int(_opt(m, "S") or 0), _micros(_opt(m, "f"))


def _zone_note(ctx: TimeContext) -> str:
    """The note recorded whenever the context zone stands in for a missing offset."""
    return f"zone {ctx.zone_name} assumed"


def _absolute(m: re.Match[str], ctx: TimeContext) -> tuple[datetime, tuple[str, ...]] | None:
    """Resolve a match with year, month ``mo`` or name ``mon``, day, clock and optional offset."""
    name = _opt(m, "mon")
    month = (_month(name) or 0) if name is not None else int(m["mo"])
    offset = _opt(m, "off")
    zone = ctx.zone if offset is None else _offset_zone(offset)
    if zone is None:
        return None
    notes = (_zone_note(ctx),) if offset is None else ()
    if isinstance(zone, timezone):
        # a fixed offset (UTC, '+02:00') repeats no hour: the time is made aware at once, what _in_zone would make
        # of the wall time in two more steps (a stamp per line: each replace() costs as much as the datetime)
        try:
            aware = datetime(int(m["Y"]), month, int(m["d"]), *_clock(m), tzinfo=zone)
            return (aware if zone is _UTC else aware.astimezone(_UTC)), notes
        except (OverflowError, ValueError):
            return None
    time = _in_zone(_wall(int(m["Y"]), month, int(m["d"]), _clock(m)), zone, ctx)
    return None if time is None else (time, notes)


def _window(ctx: TimeContext) -> tuple[datetime, datetime] | None:
    """The job window as UTC bounds; a single known end stands for both."""
    start = ctx.window_start if ctx.window_start is not None else ctx.window_end
    end = ctx.window_end if ctx.window_end is not None else ctx.window_start
    if start is None or end is None:
        return None
    return _as_utc(start), _as_utc(end)


def _distance(t: datetime, lo: datetime, hi: datetime) -> timedelta:
    """How far ``t`` lies outside [lo, hi]; zero inside."""
    if t < lo:
        return lo - t
    if t > hi:
        return t - hi
    return timedelta(0)


_SHORT_WINDOW = timedelta(days=300)


@lru_cache(maxsize=4096)
def _yearless(
    month: int, day: int, clock: tuple[int, int, int, int], ctx: TimeContext
) -> tuple[datetime | None, tuple[str, ...]] | None:
    """Pick the year that puts a month/day stamp closest to the job window (ties: earlier year).

    Returns None when the date is invalid in every candidate year (treated as no stamp). Memoised: a log
    repeats its stamps (every kernel line of one second, every rank's line of one glog stamp), and the
    zone's conversion, twice where daylight saving repeats an hour, costs more than the parse; the
    result depends on nothing but the arguments (the context is frozen).
    """
    window = _window(ctx)
    if window is None:
        return None if _wall(2000, month, day, clock) is None else (None, ("year unknown",))
    lo, hi = window
    inside = _in_zone(_wall(lo.year, month, day, clock), ctx.zone, ctx) if hi - lo < _SHORT_WINDOW else None
    if inside is not None and lo <= inside <= hi:
        # the usual case, decided without the other years: in a window shorter than a year the year
        # before lies outside it (a tie at distance zero would go to the earlier year) and the year
        # after cannot be nearer than zero
        return inside, (f"year {lo.year} taken from the job window", _zone_note(ctx))
    best: tuple[timedelta, int, datetime] | None = None
    for year in (lo.year - 1, lo.year, lo.year + 1):
        time = _in_zone(_wall(year, month, day, clock), ctx.zone, ctx)
        if time is not None and (best is None or _distance(time, lo, hi) < best[0]):
            best = (_distance(time, lo, hi), year, time)
    if best is None:
        return None
    return best[2], (f"year {best[1]} taken from the job window", _zone_note(ctx))


def _stamp(
    fmt: str,
    m: re.Match[str],
    line: str,
    time: datetime | None,
    notes: tuple[str, ...] = (),
    host: str | None = None,
    uptime: float | None = None,
    tag: str | None = None,
) -> ParsedStamp:
    """Build the result: the message is whatever follows the matched prefix in the full line."""
    return ParsedStamp(time, line[m.end() :], fmt, host, uptime, notes if len(notes) < 2 else tuple(sorted(set(notes))),
                       tag, _facility(m))


_FACILITY_GROUPS = frozenset(("kpri", "pri", "fac", "dfac"))  # the groups _facility reads: most formats have none


def _facility(m: re.Match[str]) -> int | None:
    """The syslog facility the line's priority (``<PRI>``) or BusyBox's ``facility.level`` names, else None."""
    if _FACILITY_GROUPS.isdisjoint(m.re.groupindex):  # a stamp per line: one look instead of four
        return None
    pri = _opt(m, "kpri") or _opt(m, "pri")
    if pri is not None:
        return int(pri) >> 3
    name = _opt(m, "fac") or _opt(m, "dfac")  # BusyBox's 'kern.err', or dmesg -x's 'kern  :err   :'
    return _FACILITY_NUMBERS.get(name) if name is not None else None


def _uptime_of(m: re.Match[str]) -> float | None:
    """The ``[uptime]`` seconds carried by the line, if any."""
    up = _opt(m, "up")
    return None if up is None else float(up)


# --- one handler per format ---------------------------------------------------------------------------


def since_boot(ctx: TimeContext, micros: int) -> tuple[datetime | None, str]:
    """The time ``micros`` microseconds after the node's boot (None when the boot time is unknown), and the note
    that says how the line was placed: dmesg's '[uptime]', /dev/kmsg's and ``dmesg --json``'s seconds since boot."""
    if ctx.boot_time is None:
        return None, "uptime not resolved: boot time unknown"
    boot = _as_utc(ctx.boot_time)
    return boot + timedelta(microseconds=micros), f"uptime resolved with boot time {_iso_z(boot)}"


def _h_dmesg_uptime(m: re.Match[str], line: str, ctx: TimeContext) -> ParsedStamp | None:
    """``[12345.678901] msg``: seconds since boot, absolute only when the boot time is known."""
    seconds, fraction = m["up"].split(".")
    time, note = since_boot(ctx, int(seconds) * 1_000_000 + _micros(fraction))
    return _stamp("dmesg_uptime", m, line, time, (note,), uptime=_uptime_of(m))


def _h_kmsg(m: re.Match[str], line: str, ctx: TimeContext) -> ParsedStamp | None:
    """A /dev/kmsg record: microseconds since boot, absolute only when the boot time is known."""
    micros = int(m["usec"])
    time, note = since_boot(ctx, micros)
    return _stamp("kmsg", m, line, time, (note,), uptime=micros / 1e6)


def _ctime_handler(fmt: str) -> Callable[[re.Match[str], str, TimeContext], Optional[ParsedStamp]]:
    """``dmesg -T`` / ``--ctime`` ``[Mon Nov 20 10:30:05 2023]`` and bare ctime ``Mon Nov 20 10:30:05 2023``:
    local time of the node; ``date`` and some dmesg builds print a zone abbreviation before the year, used
    only when it is UTC/GMT (abbreviations are ambiguous)."""

    def handle(m: re.Match[str], line: str, ctx: TimeContext) -> ParsedStamp | None:
        name, tag = _opt(m, "zn"), _opt(m, "tag")
        if name is not None and name in _UTC_NAMES:
            time = _in_zone(_wall(int(m["Y"]), _month(m["mon"]) or 0, int(m["d"]), _clock(m)), _UTC)
            return None if time is None else _stamp(fmt, m, line, time, tag=tag, uptime=_uptime_of(m))
        resolved = _absolute(m, ctx)
        if resolved is None:
            return None
        notes = resolved[1] + ((f"zone abbreviation {name} not used",) if name else ())
        return _stamp(fmt, m, line, resolved[0], notes, tag=tag, uptime=_uptime_of(m))

    return handle


def _h_dmesg_reltime(m: re.Match[str], line: str, ctx: TimeContext) -> ParsedStamp | None:
    """``dmesg -H``/``--reltime`` minute header ``[Nov20 10:30]``: no year, minute precision."""
    month = _month(m["mon"])
    resolved = None if month is None else _yearless(month, int(m["d"]), _clock(m), ctx)
    if resolved is None:
        return None
    notes = resolved[1] + (() if _opt(m, "S") else ("dmesg -H stamp: minute precision",))
    return _stamp("dmesg_reltime", m, line, resolved[0], notes)


def _h_dmesg_delta(m: re.Match[str], line: str, ctx: TimeContext) -> ParsedStamp | None:
    """``[  +0.000316]``: seconds since the previous line; the time comes from the line before."""
    return _stamp("dmesg_delta", m, line, None)


def _absolute_handler(fmt: str) -> Callable[[re.Match[str], str, TimeContext], Optional[ParsedStamp]]:
    """Handler for formats that carry a full date and no host (zone from offset or context)."""

    def handle(m: re.Match[str], line: str, ctx: TimeContext) -> ParsedStamp | None:
        resolved = _absolute(m, ctx)
        return None if resolved is None else _stamp(fmt, m, line, resolved[0], resolved[1])

    return handle


def _h_talos(m: re.Match[str], line: str, ctx: TimeContext) -> ParsedStamp | None:
    """``<ip>: kern: warning: [<RFC 3339>]: msg`` as streamed by talosctl; host is the node address."""
    resolved = _absolute(m, ctx)
    return None if resolved is None else _stamp("talos", m, line, resolved[0], resolved[1], host=m["host"])


def _h_iso_host(m: re.Match[str], line: str, ctx: TimeContext) -> ParsedStamp | None:
    """ISO stamp + ``host tag:``; a fraction with a colon (or Z) offset is rsyslog's RFC 3339 format."""
    resolved = _absolute(m, ctx)
    if resolved is None:
        return None
    precise_rfc3339 = m["f"] is not None and (":" in m["off"] or m["off"] in ("Z", "z"))
    fmt = "rfc3339" if precise_rfc3339 else "journal_short_iso"
    return _stamp(fmt, m, line, resolved[0], resolved[1], host=m["host"], uptime=_uptime_of(m), tag=m["tag"])


def _h_rfc3164(m: re.Match[str], line: str, ctx: TimeContext) -> ParsedStamp | None:
    """``Mmm dd HH:MM:SS[.ffffff] host tag: [uptime] msg``: the year comes from the job window."""
    month = _month(m["mon"])
    resolved = None if month is None else _yearless(month, int(m["d"]), _clock(m), ctx)
    if resolved is None:
        return None
    fmt = "rfc3164" if m["f"] is None else "journal_short_precise"
    host = m["host"] if m["host"] is not None else m["bare"]
    return _stamp(fmt, m, line, resolved[0], resolved[1], host=host, uptime=_uptime_of(m), tag=m["tag"])


def _h_journal_full(m: re.Match[str], line: str, ctx: TimeContext) -> ParsedStamp | None:
    """``journalctl -o short-full`` / ``with-unit`` ``Sat 2024-11-16 19:24:11 UTC host tag: msg`` and the head line
    of an ``-o verbose`` record: a full date in the zone whose abbreviation follows it. UTC/GMT and numeric
    offsets are read; another abbreviation is ambiguous (CST), so the node's zone stands for it."""
    wall = _wall(int(m["Y"]), int(m["mo"]), int(m["d"]), _clock(m))
    name = m["zn"]
    notes: tuple[str, ...] = ()
    if name is not None and name.upper() in _UTC_NAMES:
        time = _in_zone(wall, _UTC)
    elif name is not None and name[:1] in "+-":
        zone = _offset_zone(name)
        time = None if zone is None else _in_zone(wall, zone)
    else:
        time = _in_zone(wall, ctx.zone, ctx)
        notes = (_zone_note(ctx), *((f"zone abbreviation {name} not used",) if name else ()))
    if time is None:
        return None
    if m["cursor"] is not None:
        return _stamp("journal_verbose", m, line, time, notes)
    return _stamp("journal_short_full", m, line, time, notes, host=m["host"], uptime=_uptime_of(m), tag=m["tag"])


def _h_epoch_host(m: re.Match[str], line: str, ctx: TimeContext) -> ParsedStamp | None:
    """``journalctl -o short-unix`` ``1722253127.470994 host tag: msg``: seconds since the epoch, UTC."""
    time = _EPOCH + timedelta(seconds=int(m["epoch"]), microseconds=_micros(m["f"]))
    return _stamp("journal_short_unix", m, line, time, host=m["host"], uptime=_uptime_of(m), tag=m["tag"])


def _h_ucx(m: re.Match[str], line: str, ctx: TimeContext) -> ParsedStamp | None:
    """UCX's ``[1737425283.943620] [host:pid:thread]``: seconds since the epoch, UTC."""
    time = _EPOCH + timedelta(seconds=int(m["epoch"]), microseconds=_micros(m["f"]))
    return _stamp("ucx", m, line, time, host=m["host"])


def _h_rfc5424(m: re.Match[str], line: str, ctx: TimeContext) -> ParsedStamp | None:
    """RFC 5424 ``<PRI>1 TIMESTAMP HOST APP-NAME PROCID MSGID SD MSG``: APP-NAME is the program's tag; a left-out
    one (``-``) is the kernel's only when the priority's facility is kern (0)."""
    resolved = _absolute(m, ctx)
    if resolved is None:
        return None
    tag: str | None = m["tag"]
    if tag == "-":
        tag = "kernel" if m["pri"] is not None and int(m["pri"]) >> 3 == 0 else None
    host = None if m["host"] == "-" else m["host"]
    return _stamp("rfc5424", m, line, resolved[0], resolved[1], host=host, tag=tag)


def from_epoch_micros(micros: int) -> datetime:
    """A UTC time from microseconds since the epoch (the journal's __REALTIME_TIMESTAMP)."""
    return _EPOCH + timedelta(microseconds=micros)


def json_object(text: str, limit: int = JOURNAL_JSON_MAX,
                pairs: Callable[[list[tuple[str, Any]]], Any] | None = None) -> dict[str, object] | None:
    """``text`` read as one JSON object, or None: not JSON, not an object, or longer than ``limit`` characters
    (a log line that only looks like a record is not parsed at any length). ``pairs``: json's object_pairs_hook."""
    if len(text) > limit:
        return None
    try:
        value = json.loads(text, object_pairs_hook=pairs)
    except (ValueError, RecursionError):  # RecursionError: a line of 20,000 nested brackets
        return None
    return value if isinstance(value, dict) else None


def _h_journal_field(m: re.Match[str], line: str, ctx: TimeContext) -> ParsedStamp | None:
    """A field line of ``journalctl -o export`` / ``-o verbose``: ``__REALTIME_TIMESTAMP=`` says when the record
    was written; a ``MESSAGE=`` line carries no time of its own (its record's lines say when and who)."""
    realtime = m["realtime"]
    if realtime is None:
        return _stamp("journal_field", m, line, None)
    return _stamp("journal_export", m, line, from_epoch_micros(int(realtime)))


def _h_journal_pretty(m: re.Match[str], line: str, ctx: TimeContext) -> ParsedStamp | None:
    """The MESSAGE line of a ``journalctl -o json-pretty`` record: its JSON string, decoded (a value that is not
    one stays as written)."""
    raw = line[m.end() - 1:].rstrip().removesuffix(",")
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    message = value if isinstance(value, str) else line[m.end():]
    return ParsedStamp(None, message, "journal_field", None, None, (), None, None)


def _h_journal_json(m: re.Match[str], line: str, ctx: TimeContext) -> ParsedStamp | None:
    """``journalctl -o json``: one object per line; the message is its MESSAGE, the time its
    __REALTIME_TIMESTAMP, the host its _HOSTNAME and the program what :func:`journal_tag` makes of it."""
    entry = json_object(line)
    if entry is None:
        return None
    realtime = entry.get("__REALTIME_TIMESTAMP")
    message = journal_text(entry.get("MESSAGE"))
    if not isinstance(realtime, str) or not realtime.isdecimal() or len(realtime) > 20 or message is None:
        return None
    host = entry.get("_HOSTNAME")
    return ParsedStamp(from_epoch_micros(int(realtime)), message, "journal_json",
                       host if isinstance(host, str) else None, None, (), journal_tag(entry))


def journal_tag(fields: dict[str, object]) -> str | None:
    """The program a journal record came from: ``kernel`` only when the journal read it from the kernel
    (``_TRANSPORT=kernel``). Any other transport is a program's, whatever its SYSLOG_IDENTIFIER says
    (``logger -t kernel`` sets that): its identifier, command or transport, never the bare word ``kernel``; an
    identifier that is not the command the journal saw (``_COMM``) is named with it, so it matches no daemon.
    A record without a transport (a hand-made export) names its identifier, or nothing. A program writing to
    /dev/kmsg gets the kernel transport too, but never the kernel's facility (0: the kernel gives such a write
    LOG_USER unless it names another, devkmsg_write) nor its identifier (journald-kmsg.c parses the program's
    from the text): such a record is named by its identifier with the transport, never ``kernel``."""
    transport = fields.get("_TRANSPORT")
    if transport == "kernel":
        facility = fields.get("SYSLOG_FACILITY")
        ident = fields.get("SYSLOG_IDENTIFIER")
        if (facility is None or str(facility) == "0") and ident in (None, "kernel"):
            return "kernel"
        return f"{ident if isinstance(ident, str) and ident else 'kmsg'}(kmsg)"
    named = next((v for v in (fields.get("SYSLOG_IDENTIFIER"), fields.get("_COMM")) if isinstance(v, str) and v), None)
    comm = fields.get("_COMM")
    if isinstance(named, str) and isinstance(comm, str) and comm and named[:15] != comm[:15]:
        # the journal's own record of the command (at most 15 characters) is not the identifier it was given:
        # logger -t nv-fabricmanager, not the daemon
        return f"{named}({comm})"
    if not isinstance(transport, str):
        return named
    tag = named or transport
    return f"{tag}({transport})" if tag == "kernel" else tag


def journal_text(value: object) -> str | None:
    """A journal field's text: a string, or the list of byte values journalctl writes for one that is not
    valid UTF-8."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(b, int) and 0 <= b < 256 for b in value):
        return bytes(value).decode("utf-8", "replace")
    return None


def _yearless_handler(fmt: str) -> Callable[[re.Match[str], str, TimeContext], Optional[ParsedStamp]]:
    """Handler for formats with a numeric month ``mo`` and day ``d`` but no year (local time): glog / c10
    ``[E1120 10:30:55.201344 tid file:line] msg``, vLLM ``ERROR 08-29 02:03:28 [core.py:700] msg``."""

    def handle(m: re.Match[str], line: str, ctx: TimeContext) -> ParsedStamp | None:
        resolved = _yearless(int(m["mo"]), int(m["d"]), _clock(m), ctx)
        return None if resolved is None else _stamp(fmt, m, line, resolved[0], resolved[1])

    return handle


def _h_glog_notime(m: re.Match[str], line: str, ctx: TimeContext) -> ParsedStamp | None:
    """Old PyTorch ``[E ProcessGroupNCCL.cpp:455] msg``: recognised, but it carries no time."""
    return _stamp("glog_notime", m, line, None)


_Handler = Callable[[re.Match[str], str, TimeContext], Optional[ParsedStamp]]

# Order matters: bracketed forms first, then the ISO family from most to least specific, then syslog.
# The middle column is a gate: the first character after the leading blanks must match it for the
# format's pattern to have any chance (``[`` for the bracketed forms, a digit for the ISO family, ...);
# the last is text the line's head must contain ("" when none). A gate only skips a pattern that could
# not match, so the first format that matches still wins; it spares a line up to a dozen failed regexes.
_FORMATS: tuple[tuple[re.Pattern[str], re.Pattern[str], str, _Handler], ...] = (
    (_RE_JOURNAL_JSON, re.compile(r"\{"), '"__REALTIME_TIMESTAMP"', _h_journal_json),
    (_RE_JOURNAL_FIELD, re.compile(r"[_M]"), "", _h_journal_field),
    (_RE_JOURNAL_PRETTY, re.compile(r'"'), "", _h_journal_pretty),
    (_RE_UCX, re.compile(r"\["), "] [", _h_ucx),
    (_RE_DMESG_UPTIME, re.compile(r"[<\[a-z]"), "", _h_dmesg_uptime),
    (_RE_DMESG_CTIME, re.compile(r"[<\[a-z]"), "", _ctime_handler("dmesg_ctime")),
    (_RE_DMESG_RELTIME, re.compile(r"\["), "", _h_dmesg_reltime),
    (_RE_DMESG_DELTA, re.compile(r"\["), "", _h_dmesg_delta),
    (_RE_BRACKET_ISO, re.compile(r"\["), "", _absolute_handler("bracket_iso")),
    (_RE_GLOG, re.compile(r"[\[IWEF]"), "", _yearless_handler("glog")),
    (_RE_GLOG_NOTIME, re.compile(r"\["), "", _h_glog_notime),
    (_RE_TALOS, re.compile(r"\S"), ": [", _h_talos),
    (_RE_KMSG, re.compile(r"\d"), ";", _h_kmsg),
    (_RE_DMESG_ISO, re.compile(r"[a-z\d]"), "", _absolute_handler("dmesg_iso")),
    (_RE_RFC5424, re.compile(r"[<1]"), "", _h_rfc5424),
    (_RE_EPOCH_HOST, re.compile(r"\d"), "", _h_epoch_host),
    (_RE_ISO_HOST, re.compile(r"[<\d]"), "", _h_iso_host),
    (_RE_PYTHON_LOGGING, re.compile(r"\d"), "", _absolute_handler("python_logging")),
    (_RE_ISO8601, re.compile(r"\d"), "", _absolute_handler("iso8601")),
    (_RE_VLLM, re.compile(r"[DIWEC]"), "", _yearless_handler("vllm")),
    (_RE_JOURNAL_FULL, re.compile(r"[MTWFS]"), "", _h_journal_full),
    (_RE_LOGREAD, re.compile(r"[MTWFS]"), "", _ctime_handler("logread")),
    (_RE_CTIME, re.compile(r"[MTWFS]"), "", _ctime_handler("ctime")),
    (_RE_RFC3164, re.compile(r"<|[^\W_]"), "", _h_rfc3164),  # a month in any script, or 11月
)


@lru_cache(maxsize=512)
def _formats_for(first: str) -> tuple[tuple[re.Pattern[str], str, _Handler], ...]:
    """The formats, in order, whose pattern can start with ``first`` (the character after the blanks)."""
    return tuple((pattern, needs, handler) for pattern, gate, needs, handler in _FORMATS if gate.match(first))


# --- public entry points --------------------------------------------------------------------------


def parse_line_time(line: str, ctx: TimeContext) -> ParsedStamp:
    """Find and resolve the timestamp prefix of one log line; never raises.

    Only the first ``PREFIX_LIMIT`` characters are examined. Out-of-range dates count as no stamp.
    """
    if line[:1] == "\ufeff":  # a byte-order mark opens a file's first line
        line = line[1:]
    stamp = _parse_own(line, ctx)
    if stamp.fmt:
        return stamp
    collected = _RE_COLLECTED.match(line, 0, PREFIX_LIMIT)
    if collected is None:
        return stamp
    inner = _parse_own(line[collected.end():], ctx)
    if not inner.fmt:
        return stamp
    if collected["lineno"] is not None:
        return inner._replace(assumptions=tuple(sorted({*inner.assumptions, "line prefixed by a line number"})))
    if collected["quote"] is not None:
        return inner._replace(assumptions=tuple(sorted({*inner.assumptions, "line quoted (a pasted log)"})))
    host = collected["host"]
    if host == "kernel":  # a forwarder that kept the kernel's tag and dropped the rest
        return inner._replace(tag=inner.tag or host)
    notes = (*inner.assumptions, "line prefixed by a collection tool (pdsh, clush, grep)")
    return inner._replace(host=inner.host or host, assumptions=tuple(sorted(set(notes))))


def _parse_own(line: str, ctx: TimeContext) -> ParsedStamp:
    """:func:`parse_line_time` without the collection tool's prefix."""
    head = line[:PREFIX_LIMIT]
    for pattern, needs, handler in _formats_for(head.lstrip(" \t")[:1]):
        if needs and needs not in head:
            continue
        m = pattern.match(head)
        if m is None or (m.end() == len(head) < len(line)):
            continue  # no match, or the prefix runs into the cut and cannot be verified
        try:
            parsed = handler(m, line, ctx)
        except (ValueError, OverflowError):
            parsed = None
        if parsed is not None:
            return parsed
    return ParsedStamp(None, line, "", None, None, ())


def parse_iso(text: str, ctx: TimeContext | None = None) -> datetime | None:
    """Parse an ISO 8601 / RFC 3339 date-time to aware UTC, or None if it is not one.

    Accepts 'T' or space, '.' or ',' fractions (finer than microseconds truncated), 'Z', '+HHMM',
    '+HH:MM'; a stamp without an offset is taken in ``ctx.zone`` (UTC without a context).
    """
    if len(text) > PREFIX_LIMIT:
        return None
    m = _RE_ISO_FULL.match(text)
    if m is None:
        return None
    resolved = _absolute(m, ctx if ctx is not None else TimeContext())
    return None if resolved is None else resolved[0]


def iso_offset(text: str) -> str | None:
    """The UTC offset ('Z', '+02:00', '-0500') written in an ISO 8601 date-time, or None without one."""
    if len(text) > PREFIX_LIMIT:
        return None
    m = _RE_ISO_FULL.match(text)
    return None if m is None else _opt(m, "off")


def zone_from_name(name: str) -> tzinfo:
    """The zone for 'UTC', an IANA name such as 'Europe/Berlin', or a fixed offset such as '+02:00'.

    Raises ValueError for anything else, so configuration errors surface early.
    """
    key = name.strip()
    if key.upper() in _UTC_NAMES:
        return _UTC
    if key[:1] in ("+", "-"):
        zone = _offset_zone(key)
        if zone is None:
            raise ValueError(f"invalid UTC offset: {name!r}")
        return zone
    try:
        return ZoneInfo(key)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(f"unknown time zone: {name!r}") from None
