"""When a log line happened: the time context of a node's lines, and for a line without a stamp the
stamps of its neighbours of the same rank (a lower bound from the preceding line, an upper bound from
the following one)."""

from __future__ import annotations

from datetime import datetime
from typing import Optional

from ..model import Symptom
from ..scan import Line, decode
from ..timestamps import ParsedStamp, TimeContext, parse_iso, parse_line_time, zone_from_name
from .context import EngineContext
from .ranks import Stream, StreamKey, split_rank, stream_key


def time_context(ctx: EngineContext, node: Optional[str]) -> TimeContext:
    """The TimeContext for a node's lines: job window, the node's zone and boot time."""
    facts = ctx.bundle.facts_for(node)
    if facts and facts.timezone:
        zone_name, source = facts.timezone, f"facts/{node}.yaml"
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

    def at(self, buffer: bytes, start: int, stop: int) -> tuple[Optional[StreamKey], str]:
        """:meth:`split` of the line at buffer[start:stop]: the neighbours of a burst of hits are asked
        again and again, so each is decoded once per block (its stamp, :meth:`stamp`, only when wanted)."""
        if buffer is not self._buffer or len(self._spans) >= self.BUDGET_SPANS:
            self._buffer, self._spans = buffer, {}
        found = self._spans.get(start)
        if found is None:
            found = self._spans[start] = self.split(decode(buffer[start:stop]))
        return found

    def hit(self, line: Line) -> tuple[Optional[Stream], str]:
        """:func:`split_rank` of a hit line, remembered as a neighbour too: the hits of a burst are each
        other's neighbours, so the look-back and look-ahead of the next hits find them split already."""
        stream, key, rest = self.parts(line.text)
        if line.buffer is not self._buffer or len(self._spans) >= self.BUDGET_SPANS:
            self._buffer, self._spans = line.buffer, {}
        self._spans[line.start] = (key, rest)
        return stream, rest

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
    stamps = stamps or LineStamps(timectx)
    fallback: Optional[ParsedStamp] = None
    wanted = stream_key(rank)
    buffer = line.buffer
    for count, (start, stop) in enumerate(line.preceding_spans(limit)):
        if fallback is not None and count > 50:
            break
        prev_key, rest = stamps.at(buffer, start, stop)
        same = prev_key == wanted
        if not same and (fallback is not None or not want_any):
            continue
        stamp = stamps.stamp(rest)
        if stamp.time is None:
            continue
        if same:
            return stamp
        if fallback is None and want_any:
            fallback = stamp
    return fallback


def next_time(line: Line, rank: Optional[Stream], timectx: TimeContext,
              stamps: Optional[LineStamps] = None) -> Optional[datetime]:
    """The stamp of the next line of the same rank (else of any rank): an upper bound for an
    unstamped line."""
    stamps = stamps or LineStamps(timectx)
    fallback: Optional[datetime] = None
    wanted = stream_key(rank)
    buffer = line.buffer
    for count, (start, stop) in enumerate(line.following_spans(100)):
        if fallback is not None and count > 20:
            break
        next_key, rest = stamps.at(buffer, start, stop)
        same = next_key == wanted
        if not same and fallback is not None:
            continue
        stamp = stamps.stamp(rest)
        if stamp.time is None:
            continue
        if same:
            return stamp.time
        fallback = fallback or stamp.time
    return fallback


def latest_time(sym: Symptom) -> Optional[datetime]:
    """The latest the symptom can have happened: its own stamp, or the upper bound of an unstamped
    line (the next stamped line of the same rank); None when an unstamped line has no bound."""
    upper = sym.fields.get("time_upper")
    if isinstance(upper, str):
        return parse_iso(upper)
    return None if sym.fields.get("time_inferred") else sym.time
