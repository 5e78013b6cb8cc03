"""When a log line happened: the time context of a node's lines, and for a line without a stamp the
stamps of its neighbours of the same rank (a lower bound from the preceding line, an upper bound from
the following one)."""

from __future__ import annotations

import functools
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Optional

from ..model import Symptom
from ..scan import LOOKBACK_BYTES, Line, decode
from ..timestamps import ParsedStamp, TimeContext, format_utc, parse_iso, parse_line_time, zone_from_name
from .context import EngineContext
from .ranks import Stream, StreamKey, split_rank, stream_key


def time_context(ctx: EngineContext, node: Optional[str]) -> TimeContext:
    """The TimeContext for a node's lines: job window, the node's zone and boot time."""
    facts = ctx.bundle.facts_for(node)
    if facts and facts.timezone:
        zone_name, source = facts.timezone, f"facts/{node}.yaml"
    elif not ctx.job.timezone_source.startswith("job.yaml") and (shared := ctx.bundle.nodes_zone):
        # a combined job log is written by processes on the job's nodes, in their local time: the zone all their
        # facts name says more than the offset the controller printed the job's start with
        zone_name, source = shared, "the facts of the job's nodes"
    else:
        zone_name, source = ctx.job.timezone or "UTC", ctx.job.timezone_source
    try:
        zone = zone_from_name(zone_name)
    except ValueError:
        ctx.assumptions.add(f"unknown time zone {zone_name!r}; UTC assumed")
        zone_name, source, zone = "UTC", "default", zone_from_name("UTC")
    label = f"{zone_name} (from {source})" if source != "default" else f"{zone_name} (no zone in the node facts or job)"
    return TimeContext(window_start=ctx.window_start, window_end=ctx.window_end, zone=zone,
                       zone_name=label, boot_time=facts.boot_time if facts else None)


class LineStamps:
    """The stream key, message and stamp of each distinct line, worked out once: the unstamped hits of
    a burst look at the same neighbours again and again. Both are pure functions of the line's text
    (and of the one time context the instance serves)."""

    BUDGET_CHARS = 4 << 20  # text held before the memo starts afresh: lines may be 64 Ki characters long
    BUDGET_SPANS = 1 << 16  # neighbours remembered per block (their text is held by the memo above)

    def __init__(self, timectx: TimeContext) -> None:
        self.timectx = timectx
        self._split: dict[str, tuple[Optional[Stream], Optional[StreamKey], str]] = {}
        self._stamps: dict[str, ParsedStamp] = {}
        self._chars = 0  # characters of the texts held (each held a few times: key, rest, message)
        self._buffer: bytes = b""  # the block the spans below index
        self._spans: dict[int, tuple[Optional[StreamKey], str]] = {}
        self._blank: list[tuple[int, int]] = []  # [start, stop) of the block whose lines were all read unstamped

    def at(self, buffer: bytes, start: int, stop: int) -> tuple[Optional[StreamKey], str]:
        """:meth:`split` of the line at buffer[start:stop]: the neighbours of a burst of hits are asked
        again and again, so each is decoded once per block (its stamp, :meth:`stamp`, only when wanted)."""
        spans = self._spans_of(buffer)
        found = spans.get(start)
        if found is None:
            found = spans[start] = self.split(decode(buffer[start:stop]))
        return found

    def _spans_of(self, buffer: bytes) -> dict[int, tuple[Optional[StreamKey], str]]:
        """The split neighbours of ``buffer`` by line start, begun afresh for a new block or when full."""
        if buffer is not self._buffer or len(self._spans) >= self.BUDGET_SPANS:
            self._buffer, self._spans, self._blank = buffer, {}, []
        return self._spans

    def _note_blank(self, start: int, stop: int) -> None:
        """Remember that the lines of the block from ``start`` up to ``stop`` (both line starts) have no stamp:
        the next hit of a burst of unstamped lines walks past them in one step. A run that touches a remembered
        one joins it; four are kept, the latest."""
        if start >= stop:
            return
        for index, (begin, end) in enumerate(self._blank):
            if begin <= stop and start <= end:
                self._blank[index] = (min(begin, start), max(end, stop))
                return
        self._blank = [*self._blank[-3:], (start, stop)]

    def _blank_above(self, stop: int) -> Optional[int]:
        """The start of a remembered unstamped run that holds the lines just before line start ``stop``."""
        for begin, end in self._blank:
            if begin < stop <= end:
                return begin
        return None

    def _blank_below(self, start: int) -> Optional[int]:
        """The end of a remembered unstamped run that holds the line starting at ``start``."""
        for begin, end in self._blank:
            if begin <= start < end:
                return end
        return None

    def hit(self, line: Line) -> tuple[Optional[Stream], str]:
        """:func:`split_rank` of a hit line, remembered as a neighbour too: the hits of a burst are each
        other's neighbours, so the look-back and look-ahead of the next hits find them split already."""
        stream, key, rest = self.parts(line.text)
        self._spans_of(line.buffer)[line.start] = (key, rest)
        return stream, rest

    def next_time(self, line: Line, wanted: Optional[StreamKey], limit: int = 100,
                  after_any: int = 20) -> Optional[datetime]:
        """:func:`next_time`: among the next ``limit`` lines, the stamp of the first of stream ``wanted``,
        else of the first stamped line, looking no further than ``after_any`` lines once that is found.
        This runs for every unstamped hit: the neighbours are walked here, with the memo of :meth:`at`
        at hand, instead of through :meth:`Line.following_spans` and a call per line."""
        buffer = line.buffer
        spans, find, size = self._spans_of(buffer), buffer.find, len(buffer)
        fallback: Optional[datetime] = None
        wanted_time: Optional[datetime] = None
        pos = first = blank = line.end + 1  # the lines from first up to blank were read unstamped
        count = 0
        while count < limit:
            if pos >= size or (fallback is not None and count > after_any):
                break
            skip = self._blank_below(pos)
            if skip is not None:  # lines known to have no stamp: none of them can end the walk
                count += buffer.count(b"\n", pos, skip)
                blank = skip if blank == pos else blank
                pos = skip
                continue
            nl = find(b"\n", pos)
            found = spans.get(pos)
            if found is None:
                found = spans[pos] = self.split(decode(buffer[pos:size if nl < 0 else nl]))
            key, rest = found
            same = key == wanted
            if same or fallback is None:
                time = self.stamp(rest).time
                if time is not None:
                    if same:
                        wanted_time = time
                        break
                    fallback = time
                elif blank == pos:
                    blank = size if nl < 0 else nl + 1
            if nl < 0:
                break
            pos = nl + 1
            count += 1
        self._note_blank(first, blank)
        return wanted_time if wanted_time is not None else fallback

    def preceding_stamp(self, line: Line, wanted: Optional[StreamKey], limit: int = 200, want_any: bool = True,
                        after_any: int = 50) -> Optional[ParsedStamp]:
        """:func:`infer_time`: among the ``limit`` lines before ``line`` (within the look-back), the stamp of
        the nearest of stream ``wanted``, else (``want_any``) of the nearest stamped line, looking no further
        than ``after_any`` lines once that is found; walked here as in :meth:`next_time`."""
        buffer = line.buffer
        spans, rfind = self._spans_of(buffer), buffer.rfind
        fallback: Optional[ParsedStamp] = None
        wanted_stamp: Optional[ParsedStamp] = None
        floor = max(0, line.start - LOOKBACK_BYTES)
        stop = line.start - 1
        blank = line.start  # the lines from blank up to the hit were read unstamped
        count = 0
        while count < limit:
            if stop <= floor or (fallback is not None and count > after_any):
                break
            skip = self._blank_above(stop + 1)
            if skip is not None:  # lines known to have no stamp, as in next_time
                count += buffer.count(b"\n", skip, stop + 1)
                blank = skip if blank == stop + 1 else blank
                stop = skip - 1
                continue
            begin = rfind(b"\n", floor, stop) + 1
            if begin <= floor and floor > 0:
                break  # the line runs past the look-back: not a whole line
            found = spans.get(begin)
            if found is None:
                found = spans[begin] = self.split(decode(buffer[begin:stop]))
            key, rest = found
            same = key == wanted
            if same or (fallback is None and want_any):
                stamp = self.stamp(rest)
                if stamp.time is not None:
                    if same:
                        wanted_stamp = stamp
                        break
                    fallback = stamp
                elif blank == stop + 1:
                    blank = begin
            stop = begin - 1
            count += 1
        self._note_blank(blank, line.start)
        return wanted_stamp if wanted_stamp is not None else fallback

    def split(self, text: str) -> tuple[Optional[StreamKey], str]:
        """``stream_key`` of the line's rank prefix, and the line without it."""
        _, key, rest = self.parts(text)
        return key, rest

    def parts(self, text: str) -> tuple[Optional[Stream], Optional[StreamKey], str]:
        """The line's rank prefix (:func:`split_rank`), its ``stream_key`` and the line without it."""
        found = self._split.get(text)
        if found is None:
            self._make_room(len(text))
            stream, rest = split_rank(text)
            found = self._split[text] = (stream, stream_key(stream), rest)
        return found

    def stamp(self, text: str) -> ParsedStamp:
        """:func:`parse_line_time` of the text in this context."""
        found = self._stamps.get(text)
        if found is None:
            self._make_room(len(text))
            found = self._stamps[text] = parse_line_time(text, self.timectx)
        return found

    def _make_room(self, chars: int) -> None:
        self._chars += chars
        if self._chars > self.BUDGET_CHARS:
            self._split.clear()
            self._stamps.clear()
            self._chars = chars


def infer_time(line: Line, rank: Optional[Stream], timectx: TimeContext, limit: int = 200,
               want_any: bool = True, stamps: Optional[LineStamps] = None) -> Optional[ParsedStamp]:
    """The stamp of the nearest preceding line of the same rank (or, with ``want_any``, of any line)."""
    return (stamps or LineStamps(timectx)).preceding_stamp(line, stream_key(rank), limit, want_any)


def next_time(line: Line, rank: Optional[Stream], timectx: TimeContext,
              stamps: Optional[LineStamps] = None) -> Optional[datetime]:
    """The stamp of the next line of the same rank (else of any rank): an upper bound for an
    unstamped line."""
    return (stamps or LineStamps(timectx)).next_time(line, stream_key(rank))


def own_time(sym: Symptom) -> Optional[datetime]:
    """The symptom's time when its own line (or its record) stamped it; None when it was inferred or is unknown."""
    return None if sym.fields.get("time_inferred") else sym.time


def latest_time(sym: Symptom) -> Optional[datetime]:
    """The latest the symptom can have happened: its own stamp, or the upper bound of an unstamped
    line (the next stamped line of the same rank); None when an unstamped line has no bound."""
    upper = sym.fields.get("time_upper")
    if isinstance(upper, str):
        return _upper_time(upper)
    return own_time(sym)


@functools.lru_cache(maxsize=1024)
def _upper_time(text: str) -> Optional[datetime]:
    """:func:`parse_iso` of a ``time_upper`` field: a burst of unstamped lines shares a few bounds, and the
    refine and outcome phases ask for each symptom's again and again."""
    return parse_iso(text)


def shift_time(sym: Symptom, shift: timedelta) -> None:
    """Move a symptom's time, its evidence's and its upper bound by ``shift`` (a clock found off, a log read
    in another zone)."""
    if sym.time is not None:
        sym.time = sym.time + shift
    sym.evidence = [replace(e, time=e.time + shift if e.time else None) for e in sym.evidence]
    upper = sym.fields.get("time_upper")
    bound = parse_iso(upper) if isinstance(upper, str) else None
    if bound is not None:
        sym.fields["time_upper"] = format_utc(bound + shift)
