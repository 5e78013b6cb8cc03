"""Streaming, prefiltered scanning of evidence files.

A file is read in fixed-size blocks; a multi-pattern prefilter (each rule's regex widened to bytes,
or the literal anchors of every rule of that source) finds candidate positions in each block, and
only the lines holding a hit are decoded and handed to the rules, once each, with the rules named.
Memory is bounded by the block size, the look-ahead window and the cap on one line, never by the
file size. Lines longer than :data:`MAX_LINE_BYTES` are cut there; the rest
of such a line is skipped and counted. Gzip-compressed (rotated) logs are read transparently, and what a
log's presentation added is taken off before the rules read it: terminal control sequences, JSON text
sequences' record separators, the entities of a
log saved from a web page's source, a viewer's line-number column (offsets still name the file's own bytes).
"""

from __future__ import annotations

import bisect
import codecs
import gzip
import io
import os
import re
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import IO, Any, Callable, Optional, Protocol

from .safeio import open_regular

BLOCK_BYTES = 1 << 22
LOOKAHEAD_BYTES = 64 << 10
MAX_LINE_BYTES = 1 << 20
LOOKBACK_BYTES = 64 << 10
MAX_TEXT_CHARS = 64 << 10  # what the detailed regexes see of one line
ANY_RULE = -1  # a hit that names no rule: the line's anchors choose the rules


class Prefilter(Protocol):
    """Finds the lines worth handing to the rules in a block of bytes."""

    def hits(self, data: bytes, start: int, end: int) -> Iterator[tuple[int, int]]:
        """(position inside the candidate line, rule index or ANY_RULE), in position order."""
        ...


class RegexPrefilter:
    """The pure-``re`` prefilter: one alternation of the escaped literal anchors (those in ``folded`` in any
    ASCII case: the anchors of rules whose regex ignores case); a hit names no rule."""

    def __init__(self, anchors: Sequence[bytes], folded: Sequence[bytes] = ()) -> None:
        ordered = sorted(set(anchors), key=lambda a: (-len(a), a))
        fold = set(folded)
        self._pattern = re.compile(b"|".join(fold_bytes(anchor_regex(a), a in fold) for a in ordered)) \
            if ordered else None

    def hits(self, data: bytes, start: int, end: int) -> Iterator[tuple[int, int]]:
        if self._pattern is None:
            return
        for match in self._pattern.finditer(data, start, end):
            yield match.start(), ANY_RULE


def fold_bytes(pattern: bytes, fold: bool) -> bytes:
    """``pattern`` made to ignore (ASCII) case where ``fold``."""
    return b"(?i:" + pattern + b")" if fold else pattern


def anchor_regex(anchor: bytes) -> bytes:
    """An escaped literal anchor; one that ends a line (``Error\\n``) also ends one with blanks after it or
    written with CRLF (``Error  \\r\\n``: padded output, a Windows editor, a log shipped through a terminal), and
    one a JSON record carries, where the line's end is the escape in its string (Docker's json-file:
    ``{"log":"NotImplementedError\\n",...}``)."""
    if anchor.endswith(b"\n"):
        return re.escape(anchor[:-1]) + rb'(?:[ \t\r]*\n|(?:[ \t]|\\[rt])*\\n")'
    return re.escape(anchor)


@dataclass
class ScanStats:
    """What reading one file saw, for the coverage report."""

    bytes: int = 0
    lines: int = 0
    hits: int = 0  # lines the prefilter handed to the rules
    symptoms: int = 0  # symptoms the rules made of them (set by the caller)
    symptom_lines: int = 0  # hit lines that made at least one symptom (set by the caller)
    cut_lines: int = 0
    nul_bytes: int = 0
    error: str = ""

    def add(self, other: ScanStats) -> None:
        """Fold another file's counts into these totals (the error stays per file)."""
        for name in ("bytes", "lines", "hits", "symptoms", "symptom_lines", "cut_lines", "nul_bytes"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass
class Line:
    """A line the prefilter picked, with the rules it may concern and access to its neighbourhood."""

    text: str
    lineno: int
    offset: int
    rules: frozenset[int] = frozenset()  # rule indexes of the prefilter's hits, or ANY_RULE
    # what the reader took off this line before the rules read it (pdsh's 'node-03: ', a quote marker '> '):
    # taken off the neighbours that carry it too, so they read as the same stream's lines
    lead: str = ""
    _buf: bytes = field(repr=False, default=b"")
    _start: int = field(repr=False, default=0)
    _end: int = field(repr=False, default=0)

    def holds(self, pattern: re.Pattern[bytes]) -> bool:
        """Whether the line's raw bytes, its newline included, hold a match of ``pattern``."""
        return pattern.search(self._buf, self._start, self._end + 1) is not None

    def following(self, limit: int = 50) -> list[str]:
        """Up to ``limit`` lines after this one (within the look-ahead window)."""
        return list(self.iter_following(limit))

    def iter_following(self, limit: int = 50) -> Iterator[str]:
        """The lines of :meth:`following`, decoded one at a time: a search that stops at the first
        line it wants does not decode the rest."""
        for begin, stop in self.following_spans(limit):
            yield self._unlead(decode(self._buf[begin:stop]))

    def preceding(self, limit: int = 200) -> Iterator[str]:
        """Lines before this one, nearest first, within the look-back window."""
        for begin, stop in self.preceding_spans(limit):
            yield self._unlead(decode(self._buf[begin:stop]))

    def _unlead(self, text: str) -> str:
        return text[len(self.lead):] if self.lead and text.startswith(self.lead) else text

    @property
    def start(self) -> int:
        """Where the line begins in :attr:`buffer` (what :meth:`following_spans` yields for its neighbours)."""
        return self._start

    @property
    def end(self) -> int:
        """Where the line ends in :attr:`buffer` (its newline, or the end of the buffer)."""
        return self._end

    @property
    def buffer(self) -> bytes:
        """The block the line lies in (with its look-back and look-ahead), for :meth:`following_spans`."""
        return self._buf

    def following_spans(self, limit: int = 50) -> Iterator[tuple[int, int]]:
        """(start, end) in :attr:`buffer` of up to ``limit`` lines after this one, newline excluded."""
        pos, count, size = self._end + 1, 0, len(self._buf)
        while count < limit and pos < size:
            nl = self._buf.find(b"\n", pos)
            stop = size if nl < 0 else nl
            yield pos, stop
            count += 1
            if nl < 0:
                break
            pos = nl + 1

    def preceding_spans(self, limit: int = 200) -> Iterator[tuple[int, int]]:
        """(start, end) in :attr:`buffer` of the lines before this one, nearest first, within the look-back."""
        floor = max(0, self._start - LOOKBACK_BYTES)
        stop = self._start - 1
        count = 0
        while stop > floor and count < limit:
            begin = self._buf.rfind(b"\n", floor, stop) + 1
            if begin <= floor and floor > 0:
                return
            yield begin, stop
            count += 1
            stop = begin - 1


_np: Any = None
# numpy counts newlines at ~9 GB/s, bytes.count at ~2.9 GB/s, and importing numpy costs ~60 ms: it pays
# for itself after ~250 MB in one process (bench/README.md)
NUMPY_AFTER_BYTES = 256 << 20
_counted = 0  # bytes this process counted before numpy was worth importing


def count_newlines(buf: bytes, start: int, end: int) -> int:
    """Number of b"\\n" in buf[start:end]; the scan's hot loop. ``bytes.count`` until this process has
    counted :data:`NUMPY_AFTER_BYTES` (most bundles never do, and the import would cost more than it
    saves) or was told it will (:func:`will_count`), numpy's vectorised count after that when it is
    installed. Both give the same number."""
    global _counted
    if _np is None:
        _counted += end - start
        if _counted < NUMPY_AFTER_BYTES:
            return buf.count(b"\n", start, end)
        _load_numpy()
    if _np is False or end - start < 4096:
        return buf.count(b"\n", start, end)
    view = _np.frombuffer(buf, dtype=_np.uint8, count=end - start, offset=start)
    return int(_np.count_nonzero(view == 10))


def will_count(nbytes: int) -> None:
    """This process is about to count ``nbytes``: when that is enough to pay for numpy, import it now
    (before a fork, so the helpers share it) rather than after the first :data:`NUMPY_AFTER_BYTES`."""
    if _np is None and nbytes >= NUMPY_AFTER_BYTES:
        _load_numpy()


def _load_numpy() -> None:
    global _np
    try:
        import numpy as _np
    except ImportError:  # pragma: no cover - exercised by the pure fallback
        _np = False


def decode(raw: bytes) -> str:
    """Bytes of one line to text: invalid UTF-8 and NUL become U+FFFD, CR is dropped. A line too long for the
    rules that a progress bar redrew with carriage returns is read from its last one: what a terminal shows
    (the error printed after a minute of tqdm frames is at the end, past what the rules would see). NULs that
    open a line are dropped: a log file's blocks the file system zero-filled after a crash, before the first
    line written after the reboot, are no part of that line (and would hide its stamp)."""
    if raw[:1] == b"\x00":
        raw = raw.lstrip(b"\x00")
    if len(raw) > MAX_TEXT_CHARS:
        redrawn = raw.rstrip(b"\r").rfind(b"\r")
        if redrawn >= 0:
            raw = raw[redrawn + 1:]
    text = raw[:MAX_TEXT_CHARS * 4].decode("utf-8", errors="replace")
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    return text.rstrip("\r")[:MAX_TEXT_CHARS]


# what reading an evidence file can raise: an I/O error, a compressed file cut short (EOFError) or corrupt inside
# (zlib.error; gzip.BadGzipFile is an OSError): each reader keeps what came before it and notes the rest unread
EVIDENCE_READ_ERRORS = (OSError, EOFError, zlib.error)


def open_evidence(path: str | os.PathLike[str]) -> IO[bytes]:
    """Open an evidence file (see :mod:`.safeio`); ``.gz`` files are decompressed on the fly, and a file
    that opens with a UTF-16 byte-order mark (Windows PowerShell's ``>``) is read as UTF-8 (offsets then
    count the UTF-8 bytes)."""
    handle = open_regular(path)
    stream: IO[bytes] = handle
    if str(path).endswith(".gz"):
        stream = gzip.GzipFile(fileobj=handle, mode="rb")  # type: ignore[assignment]
    peek = getattr(stream, "peek", None)
    head = peek(2)[:2] if peek is not None else b""
    if head in (b"\xff\xfe", b"\xfe\xff"):
        return _Utf16AsUtf8(stream)  # type: ignore[return-value]
    return stream


class _Utf16AsUtf8(io.RawIOBase):
    """A UTF-16 stream read as UTF-8 bytes, decoded incrementally (the byte-order mark says which end)."""

    def __init__(self, stream: IO[bytes]) -> None:
        super().__init__()
        self._stream = stream
        self._decoder = codecs.getincrementaldecoder("utf-16")(errors="replace")
        self._pending = b""

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self._pending) < size:
            raw = self._stream.read(BLOCK_BYTES if size < 0 else max(size, 2))
            self._pending += self._decoder.decode(raw, final=not raw).encode("utf-8")
            if not raw:
                break
        if size < 0:
            out, self._pending = self._pending, b""
        else:
            out, self._pending = self._pending[:size], self._pending[size:]
        return out

    def close(self) -> None:
        self._stream.close()
        super().close()


def scan_stream(stream: IO[bytes], prefilter: Prefilter, on_line: Callable[[Line], None],
                stats: Optional[ScanStats] = None) -> ScanStats:
    """Read ``stream`` block by block and call ``on_line`` once for every line with an anchor hit."""
    st = stats or ScanStats()
    for seg in _BlockReader(stream, st).segments():
        _emit_hits(seg, prefilter, on_line, st)
    return st


@dataclass
class _Segment:
    """buf[begin:end] holds whole lines to scan; before it a look-back, after it a look-ahead."""

    buf: bytes
    begin: int
    end: int
    base_offset: int  # file offset of buf[0], not counting cut bytes
    first_line: int  # line number of buf[begin]
    skips: list[tuple[int, int]]  # (buffer index, bytes cut before it, cumulative)
    counted: tuple[int, int] = (-1, 0)  # (index, newlines in buf[begin:index]) once the hits were numbered

    def newlines_to(self, index: int) -> int:
        """Newlines in buf[begin:index], counting on from where numbering the hits stopped."""
        pos, lines = self.counted if self.counted[0] >= 0 else (self.begin, 0)
        return lines + count_newlines(self.buf, pos, index)

    def offset_of(self, index: int) -> int:
        extra = 0
        if self.skips:
            at = bisect.bisect_right(self._skip_at, index) - 1
            extra = self.skips[at][1] if at >= 0 else 0
        return self.base_offset + index + extra

    @cached_property
    def _skip_at(self) -> list[int]:
        """The skips' buffer indexes, for bisection: a coloured log has a skip per escape sequence."""
        return [at for at, _ in self.skips]


def _emit_hits(seg: _Segment, prefilter: Prefilter, on_line: Callable[[Line], None], st: ScanStats) -> None:
    """Group the prefilter's hits by line and hand each line over once, with every rule it named.
    The scan takes in the newline that ends the segment, so an anchor that ends a line is found
    wherever the block boundary falls."""
    buf, count_pos, count_line = seg.buf, seg.begin, seg.first_line
    start = stop = -1
    tags: set[int] = set()
    for pos, tag in prefilter.hits(buf, seg.begin, min(seg.end + 1, len(buf))):
        if pos > stop:
            if tags:
                _hand_over(seg, start, stop, count_line, tags, on_line, st)
            start = max(buf.rfind(b"\n", seg.begin, pos) + 1, seg.begin)
            stop = buf.find(b"\n", pos, seg.end)
            stop = seg.end if stop < 0 else stop
            count_line += count_newlines(buf, count_pos, start)
            count_pos, tags = start, set()
        tags.add(tag)
    if tags:
        _hand_over(seg, start, stop, count_line, tags, on_line, st)
    seg.counted = (count_pos, count_line - seg.first_line)  # the block's line count goes on from here


def _hand_over(seg: _Segment, start: int, stop: int, lineno: int, tags: set[int],
               on_line: Callable[[Line], None], st: ScanStats) -> None:
    st.hits += 1
    on_line(Line(text=decode(seg.buf[start:stop]), lineno=lineno, offset=seg.offset_of(start),
                 rules=frozenset(tags), _buf=seg.buf, _start=start, _end=stop))


class _BlockReader:
    """Cuts a stream into segments of whole lines, keeping a look-back and a look-ahead window
    around each and cutting any line that grows past MAX_LINE_BYTES."""

    def __init__(self, stream: IO[bytes], stats: ScanStats) -> None:
        self._stream = stream
        self._st = stats
        self._skipping = False
        self._failed = False
        self._gutter: Optional[bool] = None  # decided on the first block: see _numbered

    def segments(self) -> Iterator[_Segment]:
        buf, begin, base_offset, line = b"", 0, 0, 1
        skips: list[tuple[int, int]] = []
        eof = False
        while not eof:
            data = self._read()
            eof = not data
            if data:
                buf, skips = self._append(buf, data, skips)
            if eof:
                if len(buf) > begin and not buf.endswith(b"\n"):
                    buf += b"\n"  # the last line, cut before its newline: an anchor that ends a line ends it too
                end = len(buf)
            else:
                end = buf.rfind(b"\n", begin, max(begin, len(buf) - LOOKAHEAD_BYTES))
                if end < 0:
                    continue
            seg = _Segment(buf, begin, end, base_offset, line, skips)
            yield seg
            consumed = min(len(buf), end + 1)
            lines = seg.newlines_to(consumed)
            self._st.lines += lines
            line += lines
            keep_from = buf.find(b"\n", max(0, consumed - LOOKBACK_BYTES), consumed) + 1
            keep_from = min(keep_from, consumed) if keep_from > 0 else 0
            dropped = _cut_before(skips, keep_from)
            base_offset += keep_from + dropped
            buf = buf[keep_from:]
            begin = consumed - keep_from
            skips = [(i - keep_from, d - dropped) for i, d in skips if i >= keep_from]

    def _read(self) -> bytes:
        """Up to BLOCK_BYTES; a read error (truncated gzip, I/O error) keeps what came before it."""
        if self._failed:
            return b""
        pieces: list[bytes] = []
        size = 0
        read = getattr(self._stream, "read1", None) if isinstance(self._stream, gzip.GzipFile) else None
        try:
            if read is None:
                pieces.append(self._stream.read(BLOCK_BYTES))
            else:
                while size < BLOCK_BYTES:
                    piece = read(BLOCK_BYTES - size)
                    if not piece:
                        break
                    pieces.append(piece)
                    size += len(piece)
        except EVIDENCE_READ_ERRORS as exc:
            self._st.error = f"read stopped: {exc}"
            self._failed = True
        data = b"".join(pieces)
        for _ in range(8):  # a block that ends inside a control sequence, an entity or a gutter takes the rest of it
            if self._failed or not (_CUT_OPEN.search(data, max(0, len(data) - 40)) or (
                    self._gutter is not False and _GUTTER_OPEN.fullmatch(data, data.rfind(b"\n") + 1))):
                break
            more = self._finish_escape()
            if not more:
                break
            data += more
        self._st.bytes += len(data)
        if b"\x00" in data:
            self._st.nul_bytes += data.count(b"\x00")
        return data

    def _finish_escape(self) -> bytes:
        """The few bytes that end a control sequence, an entity or a gutter a block's last read cut in two (so it
        can be cut whole)."""
        try:
            return self._stream.read(8) or b""
        except (OSError, EOFError) as exc:
            self._st.error = f"read stopped: {exc}"
            self._failed = True
            return b""

    def _append(self, buf: bytes, data: bytes,
                skips: list[tuple[int, int]]) -> tuple[bytes, list[tuple[int, int]]]:
        total = skips[-1][1] if skips else 0
        if self._skipping:
            nl = data.find(b"\n")
            total += len(data) if nl < 0 else nl
            skips = _set_skip(skips, len(buf), total)
            if nl < 0:
                return buf, skips
            self._skipping = False
            data = data[nl:]
        if b"\x1b" in data:  # one byte: memchr, ~20x faster than looking for the two
            data, skips, total = _rewrite(data, len(buf), skips, total, _CSI, _cut)
        if b"\x1e" in data:
            data, skips, total = _rewrite(data, len(buf), skips, total, _RECORD_SEPARATOR, _cut)
        if self._gutter is None:
            self._gutter = _numbered(data)
        if self._gutter:
            first = 0 if not buf or buf.endswith(b"\n") else data.find(b"\n") + 1
            if first > 0 or not buf or buf.endswith(b"\n"):
                data, skips, total = _rewrite(data, len(buf), skips, total, _GUTTER, _cut, first)
        if b"&" in data and b"<" not in data and _ENTITY.search(data):
            data, skips, total = _rewrite(data, len(buf), skips, total, _ENTITY, _unescape)
        buf += data
        tail = buf.rfind(b"\n") + 1
        if len(buf) - tail > MAX_LINE_BYTES:
            total += len(buf) - tail - MAX_LINE_BYTES
            buf = buf[: tail + MAX_LINE_BYTES]
            self._skipping = True
            self._st.cut_lines += 1
            skips = _set_skip(skips, len(buf), total)
        return buf, skips


# Terminal control sequences (CSI: colours, erase-line): `dmesg --color=always`, coloured loggers and progress
# bars write them inside the text ("\x1b[33mNVRM: \x1b[0m\x1b[31mXid ..."), where they split what the rules read.
# They are cut before the scan like an over-long line's tail: offsets still name the file's own bytes.
_CSI = re.compile(rb"\x1b\[[0-9;?]{0,32}[@-~]")
# RFC 7464 JSON text sequences ('journalctl -o json-seq', 'jq --seq') open each record with the ASCII record
# separator: cut like an escape, the record reads as the JSON object it is
_RECORD_SEPARATOR = re.compile(rb"(?:^|(?<=\n))\x1e")
# A log saved from a web page's source or a ticket system's export has its markup characters escaped
# ('exceeded memory limit (1450 &gt; 1024)', 'File &quot;train.py&quot;, line 3, in &lt;module&gt;'). Every
# escaper escapes '<', so a block that holds one of these entities and no '<' at all is read unescaped (a log
# that holds '<' keeps an '&amp;' of its own); each character stands where its entity began.
_ENTITY = re.compile(rb"&(?:lt|gt|amp|quot|apos|#0{0,3}(?:34|38|39|60|62)|#[xX]0{0,2}(?:22|26|27|3[cCeE]));")
# a sequence or an entity a read cut before its last byte: the block takes the rest of it
_CUT_OPEN = re.compile(rb"\x1b(?:\[[0-9;?]{0,32})?\Z|&#?[0-9A-Za-z]{0,5}\Z")


# A log pasted with its viewer's line numbers ('cat -n', 'nl', an editor or a paste site: '    12\t[rank3]: ...',
# '  12 | [rank3]: ...'): the column is cut before the scan, so a line's stamp and prefixes open it again. A file
# has one when its first lines all carry it and their numbers run on by one; srun's '--label' ('3: ') is no
# such column (ranks' numbers do not count lines, and it writes ': ').
_GUTTER = re.compile(rb"^[ \t]*(\d{1,9})(?:\t|[ \t]?\|[ \t]?)", re.M)
_GUTTER_OPEN = re.compile(rb"[ \t]{0,16}\d{0,9}[ \t]?\|?")  # a gutter a read cut in two
_NOT_BLANK = re.compile(rb"\S")  # a byte that is not whitespace as bytes.strip() reads it
_GUTTER_PROOF = 4  # numbered lines that must open the file, one after another (all it has, when fewer)


def _numbered(data: bytes) -> bool:
    """Whether ``data``, a file's first block, opens with lines numbered in a gutter, one after another
    (``nl`` leaves a blank line unnumbered): its first :data:`_GUTTER_PROOF` lines, or all of a shorter
    file's."""
    numbers: list[int] = []
    head = data[:1 << 16]
    pos = 0
    # the next line that is not blank, found in C: splitting the whole head took ~40 us a file, to read 4 lines
    while (text := _NOT_BLANK.search(head, pos)) is not None:
        stop = head.find(b"\n", text.start())
        stop = len(head) if stop < 0 else stop
        raw, pos = head[head.rfind(b"\n", 0, text.start()) + 1:stop], stop + 1
        found = _GUTTER.match(raw)
        if found is None:
            return False
        numbers.append(int(found.group(1)))
        if len(numbers) == _GUTTER_PROOF:
            break
    return bool(numbers) and all(b == a + 1 for a, b in zip(numbers, numbers[1:]))


def gutter_cutter(path: str | os.PathLike[str]) -> Callable[[bytes], bytes]:
    """What takes a line of ``path`` read apart from the scan (a filter reading its tail) back to what the scan
    read: terminal control sequences and a record separator cut as the scan cuts them, then the gutter's column
    when the file opens with one (:func:`_numbered`)."""
    try:
        with open_evidence(path) as stream:
            head = stream.read(1 << 16)
    except EVIDENCE_READ_ERRORS:
        head = b""
    return _cut_gutter if head and _numbered(_as_read(head)) else _as_read


def _cut_gutter(raw: bytes) -> bytes:
    raw = _as_read(raw)
    found = _GUTTER.match(raw)
    return raw[found.end():] if found else raw


def _as_read(raw: bytes) -> bytes:
    if b"\x1b" in raw:
        raw = _CSI.sub(b"", raw)
    return _RECORD_SEPARATOR.sub(b"", raw) if b"\x1e" in raw else raw


def _cut(_found: bytes) -> bytes:
    return b""


def _unescape(found: bytes) -> bytes:
    import html  # on first use: a log with HTML entities is rare, and html.entities costs ~2 ms to import

    return html.unescape(found.decode("ascii")).encode("ascii")


def _rewrite(data: bytes, at: int, skips: list[tuple[int, int]], total: int, pattern: re.Pattern[bytes],
             replace: Callable[[bytes], bytes], begin: int = 0) -> tuple[bytes, list[tuple[int, int]], int]:
    """``data`` with each match of ``pattern`` from ``begin`` on replaced, and a skip after each for the bytes it
    lost (``at``: where ``data`` goes in the buffer)."""
    pieces: list[bytes] = []
    skips = list(skips)
    pos = 0
    for found in pattern.finditer(data, begin):
        kept = replace(found.group())
        pieces.append(data[pos:found.start()])
        pieces.append(kept)
        at += found.start() - pos + len(kept)
        total += found.end() - found.start() - len(kept)
        if skips and skips[-1][0] == at:
            skips[-1] = (at, total)
        else:
            skips.append((at, total))
        pos = found.end()
    pieces.append(data[pos:])
    return b"".join(pieces), skips, total


def _set_skip(skips: list[tuple[int, int]], index: int, total: int) -> list[tuple[int, int]]:
    return [s for s in skips if s[0] != index] + [(index, total)]


def _cut_before(skips: list[tuple[int, int]], index: int) -> int:
    """Bytes cut before buffer ``index`` (the cumulative count of the last skip at or before it)."""
    total = 0
    for at, cut in skips:
        if at <= index:
            total = cut
    return total


def scan_bytes(data: bytes, prefilter: Prefilter, on_line: Callable[[Line], None]) -> ScanStats:
    """Scan an in-memory buffer (tests, fixtures)."""
    return scan_stream(io.BytesIO(data), prefilter, on_line)
