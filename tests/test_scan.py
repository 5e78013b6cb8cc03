"""The streaming scanner: hits, line numbers, offsets, huge lines, garbage, gzip, symlinks."""

from __future__ import annotations

import gzip
import io
import os
import re
from pathlib import Path

import pytest

from slurm_attrib import scan
from slurm_attrib.engine.prefilter import build
from slurm_attrib.ruleset import Match, Rule
from slurm_attrib.scan import MAX_TEXT_CHARS, Line, RegexPrefilter, decode, open_evidence, scan_bytes, scan_stream


def _hits(data: bytes, anchors: list[bytes]) -> list[Line]:
    found: list[Line] = []
    scan_bytes(data, RegexPrefilter(anchors), found.append)
    return found


def test_line_numbers_and_offsets() -> None:
    data = b"alpha\nbeta XID here\ngamma\nXID again\n"
    hits = _hits(data, [b"XID"])
    assert [(h.lineno, h.offset, h.text) for h in hits] == [(2, 6, "beta XID here"), (4, 26, "XID again")]
    assert data[hits[1].offset:].startswith(b"XID again")


def test_an_anchor_that_ends_a_line_ends_a_crlf_or_padded_line_and_the_last_line_without_its_newline() -> None:
    data = b"KeyError\r\nmid Error word\r\nIndexError\nValueError  \nTypeError"
    hits = _hits(data, [b"Error\n"])
    assert [(h.lineno, h.text) for h in hits] == [(1, "KeyError"), (3, "IndexError"), (4, "ValueError  "),
                                                  (5, "TypeError")]
    stats = scan_bytes(data, RegexPrefilter([b"Error\n"]), lambda _line: None)
    assert stats.lines == 5 and stats.bytes == len(data)


def test_an_anchor_that_ends_a_line_ends_one_inside_a_json_record() -> None:
    """Docker's json-file keeps the line's newline as the escape in its string: '{"log":"NotImplementedError\\n"'."""
    data = (b'{"log":"NotImplementedError\\n","stream":"stderr"}\n{"log": "ValueError\\r\\n"}\n'
            b'{"log":"no Error here","stream":"stderr"}\n{"log":"KeyError\\n is quoted"}\n')
    assert [h.lineno for h in _hits(data, [b"Error\n"])] == [1, 2]


def test_control_sequences_are_cut_and_offsets_stay_the_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """`dmesg --color=always` colours the subsystem apart from the message ("NVRM: " then "Xid ..."): the
    sequences are cut before the scan, and each hit's offset is still its first kept byte in the file."""
    monkeypatch.setattr(scan, "BLOCK_BYTES", 48)
    monkeypatch.setattr(scan, "LOOKAHEAD_BYTES", 8)
    colored = (b"\x1b[32m[ 5051.000000] \x1b[0m\x1b[33mNVRM: \x1b[0m\x1b[31mXid (PCI:0000:01:00): 79, "
               b"GPU has fallen off the bus.\x1b[0m\n")
    data = b"boot\n" + colored * 3 + b"\x1b[2Kplain NVRM: Xid 13\n"
    hits = _hits(data, [b"NVRM: Xid"])
    assert [h.lineno for h in hits] == [2, 3, 4, 5]
    assert hits[0].text == "[ 5051.000000] NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus."
    assert hits[3].text == "plain NVRM: Xid 13"
    for hit in hits:
        assert data[hit.offset:].startswith(hit.text[:3].encode())


def test_one_call_per_line_with_several_anchors() -> None:
    hits = _hits(b"x NVRM: Xid and NCCL WARN here\n", [b"NVRM: Xid", b"NCCL WARN"])
    assert len(hits) == 1


def test_hits_across_blocks_keep_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan, "BLOCK_BYTES", 64)
    monkeypatch.setattr(scan, "LOOKAHEAD_BYTES", 16)
    lines = [f"line {i} {'HIT' if i % 7 == 0 else 'ok'}".encode() for i in range(1, 200)]
    data = b"\n".join(lines) + b"\n"
    hits = _hits(data, [b"HIT"])
    assert [h.lineno for h in hits] == [i for i in range(1, 200) if i % 7 == 0]
    for hit in hits:
        assert data[hit.offset:].startswith(hit.text.encode())


@pytest.mark.parametrize("every", [1, 3, 7, 1000])
@pytest.mark.parametrize("ending", [b"\n", b""])
def test_the_line_count_is_exact_however_dense_the_hits(monkeypatch: pytest.MonkeyPatch, every: int,
                                                          ending: bytes) -> None:
    """Numbering the hits counts a block's newlines up to its last hit; the block's count goes on
    from there, so no byte is counted twice and none is missed, whatever the block boundaries."""
    monkeypatch.setattr(scan, "BLOCK_BYTES", 64)
    monkeypatch.setattr(scan, "LOOKAHEAD_BYTES", 16)
    lines = [f"line {i} {'HIT' if i % every == 0 else 'ok'}".encode() for i in range(1, 300)]
    data = b"\n".join(lines) + ending
    found: list[Line] = []
    stats = scan_bytes(data, RegexPrefilter([b"HIT"]), found.append)
    assert stats.lines == 299
    assert [h.lineno for h in found] == [i for i in range(1, 300) if i % every == 0]


def test_following_and_preceding_lines() -> None:
    data = b"one\ntwo\nTraceback HIT\nthree\nfour\n"
    hit = _hits(data, [b"HIT"])[0]
    assert hit.following(2) == ["three", "four"]
    assert list(hit.preceding(5)) == ["two", "one"]


def test_huge_line_is_cut_and_later_lines_keep_offsets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan, "BLOCK_BYTES", 1024)
    monkeypatch.setattr(scan, "MAX_LINE_BYTES", 4096)
    monkeypatch.setattr(scan, "LOOKAHEAD_BYTES", 256)
    big = b"HIT " + b"x" * 50_000
    data = b"first\n" + big + b"\nafter HIT\n"
    hits: list[Line] = []
    stats = scan_bytes(data, RegexPrefilter([b"HIT"]), hits.append)
    assert stats.cut_lines == 1
    assert [h.lineno for h in hits] == [2, 3]
    assert len(hits[0].text) <= 4096
    assert data[hits[1].offset:].startswith(b"after HIT")


def test_garbage_nul_and_invalid_utf8_never_raise() -> None:
    data = os.urandom(200_000) + b"\n\x00\xff\xfe NVRM: Xid \xc3\x28 bad\n"
    hits = _hits(data, [b"NVRM: Xid"])
    assert hits and "\x00" not in hits[-1].text
    stats = scan_bytes(data, RegexPrefilter([b"NVRM: Xid"]), lambda _line: None)
    assert stats.nul_bytes >= 1


def test_no_trailing_newline_and_empty_input() -> None:
    assert [h.text for h in _hits(b"a\nlast HIT", [b"HIT"])] == ["last HIT"]
    assert _hits(b"", [b"HIT"]) == []


def _literal_rule(anchor: str) -> Rule:
    match = Match(source="kernel", anchors=(anchor,), pattern=re.escape(anchor))
    return Rule(id=anchor, version=1, phase="extract", title=anchor, description="", path="r.yaml", line=1,
                match=match)


def test_hyperscan_and_re_prefilters_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    rules = [_literal_rule(a) for a in ("NVRM: Xid", "NCCL WARN", "Error: ")]
    data = b"".join(f"l{i} {'NVRM: Xid' if i % 5 == 0 else ''} {'Error: x' if i % 3 == 0 else ''}\n".encode()
                    for i in range(500))
    fast = build(rules)
    monkeypatch.setenv("SLURM_ATTRIB_PREFILTER", "re")
    slow = build(rules)
    out_fast: list[int] = []
    out_slow: list[int] = []
    scan_stream(io.BytesIO(data), fast, lambda h: out_fast.append(h.lineno))
    scan_stream(io.BytesIO(data), slow, lambda h: out_slow.append(h.lineno))
    assert out_fast == out_slow and out_fast


def test_a_line_hit_by_several_rules_comes_once_naming_them_all() -> None:
    pytest.importorskip("hyperscan")
    found: list[Line] = []
    scan_bytes(b"a\nNCCL WARN after NVRM: Xid\nb\n", build([_literal_rule("NVRM: Xid"), _literal_rule("NCCL WARN")]),
               found.append)
    assert [(h.lineno, h.rules) for h in found] == [(2, frozenset({0, 1}))]


def test_an_anchor_that_ends_a_line_is_found_at_a_block_boundary(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan, "BLOCK_BYTES", 64)
    monkeypatch.setattr(scan, "LOOKAHEAD_BYTES", 16)
    data = b"".join(b"x" * (i % 13) + (b" Error\n" if i % 4 == 0 else b" fine\n") for i in range(200))
    assert [h.lineno for h in _hits(data, [b"Error\n"])] == [i + 1 for i in range(200) if i % 4 == 0]


def test_gzip_rotated_log(tmp_path: Path) -> None:
    path = tmp_path / "kern.log.1.gz"
    with gzip.open(path, "wb") as handle:
        handle.write(b"a\nNVRM: Xid one\n")
    found: list[Line] = []
    with open_evidence(path) as stream:
        scan_stream(stream, RegexPrefilter([b"NVRM: Xid"]), found.append)
    assert [h.lineno for h in found] == [2]


def test_truncated_gzip_keeps_what_was_read(tmp_path: Path) -> None:
    path = tmp_path / "kern.log.gz"
    raw = gzip.compress(b"NVRM: Xid first\n" + os.urandom(100_000))
    path.write_bytes(raw[: len(raw) // 2])
    found: list[Line] = []
    with open_evidence(path) as stream:
        stats = scan_stream(stream, RegexPrefilter([b"NVRM: Xid"]), found.append)
    assert stats.error and found


def test_open_evidence_refuses_symlinks(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("root only\n")
    link = tmp_path / "link.log"
    link.symlink_to(secret)
    with pytest.raises(OSError):
        open_evidence(link)


def test_newline_counting_with_and_without_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    """bytes.count first; numpy (when installed) once the process has counted NUMPY_AFTER_BYTES."""
    data = b"".join(f"line {i}{' HIT' if i % 97 == 0 else ''}\n".encode() for i in range(20_000))
    monkeypatch.setattr(scan, "_np", None)
    monkeypatch.setattr(scan, "_counted", 0)
    without = [h.lineno for h in _hits(data, [b"HIT"])]
    assert scan._np is None  # 200 kB counted: numpy not worth importing
    monkeypatch.setattr(scan, "NUMPY_AFTER_BYTES", 0)
    with_numpy = [h.lineno for h in _hits(data, [b"HIT"])]
    assert scan._np is not None  # imported, or False where it is not installed
    assert with_numpy == without == [i + 1 for i in range(20_000) if i % 97 == 0]
    assert scan.count_newlines(data, 0, len(data)) == 20_000


def test_a_process_told_it_will_count_enough_imports_numpy_up_front(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan, "_np", None)
    monkeypatch.setattr(scan, "NUMPY_AFTER_BYTES", 1000)
    scan.will_count(999)
    assert scan._np is None  # not enough to pay for the import
    scan.will_count(1000)
    assert scan._np is not None  # imported (or False where numpy is not installed) before the first count


def test_a_utf16_file_is_read_as_utf8(tmp_path: Path) -> None:
    """Windows PowerShell 5.1's '>' writes UTF-16LE with a byte-order mark: every character two bytes, so no
    anchor matched and the NULs were counted as garbage."""
    text = "Dec  2 11:38:27 worker4 kernel: NVRM: Xid (PCI:0000:07:00): 48, pid='<unknown>'\r\nsecond line\r\n"
    path = tmp_path / "worker4.log"
    path.write_bytes(text.encode("utf-16"))
    found: list[Line] = []
    with open_evidence(path) as stream:
        st = scan_stream(stream, RegexPrefilter([b"NVRM: Xid"]), found.append)
    assert [h.text.rstrip("\r") for h in found] == [text.splitlines()[0]]
    assert st.nul_bytes == 0 and st.lines == 2


def test_a_long_line_redrawn_with_carriage_returns_is_read_from_its_last_one() -> None:
    """tqdm frames for 80 KB, then the error: the rules see what a terminal shows, not the first 64 Ki
    characters of frames; a short line keeps its frames (its whole text is within reach)."""
    frames = b"".join(b"\r  7%%|%d/1000 [00:01<00:10, 5.2it/s]" % i for i in range(2500))
    error = b"RuntimeError: CUDA error: uncorrectable ECC error encountered"
    assert len(frames) > MAX_TEXT_CHARS and decode(frames + b"\r" + error + b"\r") == error.decode()
    assert decode(b"\r 1%|1/100\r" + error) == "\r 1%|1/100\r" + error.decode()


def test_nuls_that_open_a_line_are_dropped_so_its_stamp_reads() -> None:
    # a syslog file's zero-filled blocks after a crash run into the first line written after the reboot
    line = b"\x00" * 512 + b"2025-03-01T10:02:31.774512+00:00 gpu-a04 kernel: NVRM: Xid (PCI:0000:3b:00): 79"
    assert decode(line).startswith("2025-03-01T10:02:31.774512+00:00 gpu-a04 kernel:")
    assert decode(b"a\x00b") == "a\ufffdb"  # inside a line a NUL stays visible


def test_a_log_saved_with_its_markup_escaped_is_read_unescaped_and_offsets_stay_the_files(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A log copied from a web page's source: '&gt;', '&quot;' and '&#39;' are read as the characters, an
    entity a block boundary cut is read whole, and each hit's offset still names the file's own bytes."""
    monkeypatch.setattr(scan, "BLOCK_BYTES", 50)
    monkeypatch.setattr(scan, "LOOKAHEAD_BYTES", 8)
    data = (b"step 1 &amp; 2\n"
            b"slurmstepd: error: Job 7 exceeded memory limit (1450 &gt; 1024), being killed\n"
            b"  File &quot;train.py&quot;, line 3, in &lt;module&gt; Error\n"
            b"pid=&#39;&lt;unknown&gt;&#39; Error\n")
    hits = _hits(data, [b"exceeded memory limit", b"Error"])
    assert [h.text for h in hits] == [
        "slurmstepd: error: Job 7 exceeded memory limit (1450 > 1024), being killed",
        '  File "train.py", line 3, in <module> Error',
        "pid='<unknown>' Error"]
    assert [h.lineno for h in hits] == [2, 3, 4]
    for hit in hits:
        assert data[hit.offset:].startswith(hit.text[:4].encode())
    assert hits[1].following(1) == ["pid='<unknown>' Error"]


def test_a_log_that_holds_markup_of_its_own_keeps_its_entities() -> None:
    data = b"see <https://x/?a=1&amp;b=2> Error\n"
    assert [h.text for h in _hits(data, [b"Error"])] == ["see <https://x/?a=1&amp;b=2> Error"]


@pytest.mark.parametrize("gutter", ["{:>6}\t", "{:>5} | ", "{}|"])
def test_a_log_pasted_with_its_viewers_line_numbers_is_read_without_them(
        monkeypatch: pytest.MonkeyPatch, gutter: str) -> None:
    """cat -n, nl, an editor or a paste site number the lines: the column is cut before the scan, in every
    block (a block boundary inside a line leaves its rest alone), and offsets still name the file's bytes. The
    file's first block decides (here its first 40 bytes)."""
    monkeypatch.setattr(scan, "BLOCK_BYTES", 40)
    monkeypatch.setattr(scan, "LOOKAHEAD_BYTES", 8)
    body = ["a", "b", "c", "d", "[rank0]: step 1", "", "0: srun label kept", "[rank0]: RuntimeError: NCCL error 12\t3",
            "srun: error: node-02: task 3: Exited with exit code 1"]
    data = "".join(gutter.format(n) + line + "\n" for n, line in enumerate(body, start=41)).encode()
    hits = _hits(data, [b"RuntimeError", b"srun: error", b"srun label"])
    assert [h.text for h in hits] == ["0: srun label kept", "[rank0]: RuntimeError: NCCL error 12\t3",
                                      "srun: error: node-02: task 3: Exited with exit code 1"]
    assert [h.lineno for h in hits] == [7, 8, 9]
    for hit in hits:
        assert data[hit.offset:].startswith(hit.text[:4].encode())


@pytest.mark.parametrize("head", [b"0: a\n1: b\n2: c\n3: d\n", b"1\tx\n2\ty\n4\tz\n5\tw\n",
                                  b"1\tx\n2\ty\nplain\n3\tz\n", b"plain\n"])
def test_srun_labels_and_numbers_that_do_not_count_lines_are_no_gutter(head: bytes) -> None:
    data = head + b"7\tsrun: error: node-02: task 3: Exited\n"
    assert [h.text for h in _hits(data, [b"srun: error"])] == ["7\tsrun: error: node-02: task 3: Exited"]


def test_a_one_line_file_numbered_1_is_read_without_its_number() -> None:
    assert [h.text for h in _hits(b"   1 | srun: error: x\n", [b"srun: error"])] == ["srun: error: x"]


def _numbered_by_split(data: bytes) -> bool:
    """The gutter test as it read before it looked for lines one by one: every line of the head split apart."""
    numbers: list[int] = []
    for raw in data[:1 << 16].split(b"\n"):
        if not raw.strip():
            continue
        found = scan._GUTTER.match(raw)
        if found is None:
            return False
        numbers.append(int(found.group(1)))
        if len(numbers) == scan._GUTTER_PROOF:
            break
    return bool(numbers) and all(b == a + 1 for a, b in zip(numbers, numbers[1:]))


@pytest.mark.parametrize("head", [
    b"", b"\n\n", b" \t\r\n\x0b\x0c\n", b"1\tx", b"1\tx\n", b"\n\n  1\tx\n \n2\ty\r\n\n3 | z\n4\tw\n5\tv\n",
    b"1\tx\n\t\n2\ty\n3\tz\nplain\n", b"1\tx\n3\ty\n", b"plain\n1\tx\n", b"\r\n1\tx\n2\ty\n",
    b"1\tx\n2\ty\n3\tz\n4\tw\nplain\n", b"\n" * 70000 + b"1\tx\n", b"1\tx\n" + b" \n" * 40000 + b"2\ty\n",
    b"1\tx\n2\ty\n3\tz" + b"z" * 70000 + b"\n4\tw\n", b"   7 | a\n   8 | b\n\x0c\n   9 | c\n",
])
def test_the_gutter_test_reads_the_lines_the_split_read(head: bytes) -> None:
    """scan._numbered finds the head's first lines that are not blank in C; it decides as splitting the whole
    head into lines did, with blank and whitespace-only lines, a head cut inside a line, and a 64 KiB limit."""
    assert scan._numbered(head) == _numbered_by_split(head)


def test_filters_reading_a_file_apart_cut_its_gutter_too(tmp_path: Path) -> None:
    numbered, plain = tmp_path / "numbered.log", tmp_path / "plain.log"
    numbered.write_bytes(b"     1\tstep 1 loss 2.0\n     2\tstep 2 loss 1.9\n")
    plain.write_bytes(b"1\tstep\n3\tstep\n")
    assert scan.gutter_cutter(numbered)(b"     2\tstep 2 loss 1.9") == b"step 2 loss 1.9"
    assert scan.gutter_cutter(plain)(b"3\tstep") == b"3\tstep"
    assert scan.gutter_cutter(tmp_path / "missing.log")(b"3\tstep") == b"3\tstep"


def test_json_text_sequences_record_separators_are_cut() -> None:
    """journalctl -o json-seq (RFC 7464) opens each record with 0x1E: the record reads as its JSON object."""
    data = b'\x1e{"MESSAGE":"NVRM: Xid (PCI:0000:8a:00): 48, DBE"}\n\x1e{"MESSAGE":"other"}\n'
    hits = _hits(data, [b'{"MESSAGE":"NVRM: Xid'])
    assert [h.text for h in hits] == ['{"MESSAGE":"NVRM: Xid (PCI:0000:8a:00): 48, DBE"}']
    assert data[hits[0].offset:].startswith(b'{"MESSAGE"')


@pytest.mark.parametrize(("data", "wanted"), [
    # loguru colours the stamp: a filter reading the file's tail must see the line the scan read
    (b" [\x1b[32m2024-04-06 03:02:12\x1b[0m] iteration 71/100 | lm loss: 1.8\n",
     b" [2024-04-06 03:02:12] iteration 71/100 | lm loss: 1.8"),
    # a numbered paste whose lines are coloured: the escapes, then the gutter
    (b"     1\t\x1b[31mERROR\x1b[0m a\n     2\tb\n     3\tc\n", b"ERROR a"),
    (b"\x1e{\"MESSAGE\":\"x\"}\n", b"{\"MESSAGE\":\"x\"}"),
    (b"plain line\n", b"plain line"),
])
def test_a_line_read_apart_from_the_scan_is_cut_as_the_scan_cut_it(tmp_path: Path, data: bytes, wanted: bytes) -> None:
    """gutter_cutter takes a line a filter reads from the file itself (its tail) to the text the scan read: terminal
    escapes and a record separator cut, then a gutter's numbers."""
    path = tmp_path / "job.log"
    path.write_bytes(data)
    assert scan.gutter_cutter(path)(data.split(b"\n", 1)[0]) == wanted
