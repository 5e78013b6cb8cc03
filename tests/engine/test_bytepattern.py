"""A rule's byte pattern must match every line its Python regex matches, or the Hyperscan prefilter
loses symptoms. Checked on every line of the fixtures, golden bundles and corpus that holds one of
the rule's anchors, and on hostile variants of those lines: rank prefixes, a quote marker, CRLF, Unicode spaces and
digits, case folds beyond ASCII, NUL and invalid UTF-8."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

from slurm_attrib.bundle import load_bundle
from slurm_attrib.engine.bytepattern import CASE_FOLDS_BEYOND_ASCII, Untranslatable, translate
from slurm_attrib.engine.ranks import quote_end, split_rank
from slurm_attrib.ruleset import Rule, load_ruleset
from slurm_attrib.ruletest import fixture_paths, materialise
from slurm_attrib.scan import decode

hyperscan = pytest.importorskip("hyperscan")
ROOT = Path(__file__).resolve().parents[2]
RULES = [r for r in load_ruleset(include_site=False).rules if r.match]
ARABIC_INDIC_DIGITS = str.maketrans("0123456789", "".join(chr(0x660 + d) for d in range(10)))  # Python's \d takes them


def _matched_lines(pattern: bytes, lines: list[bytes]) -> set[int]:
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=[pattern], ids=[0], flags=[hyperscan.HS_FLAG_MULTILINE | hyperscan.HS_FLAG_PREFILTER])
    data = b"\n".join(lines) + b"\n"
    ends: list[int] = []
    db.scan(data, match_event_handler=lambda _i, _f, to, _fl, _c: ends.append(to - 1))
    return {data.count(b"\n", 0, end) for end in ends}


def _python_matches(regex: re.Pattern[str], line: bytes, app: bool) -> bool:
    text = decode(line)
    return regex.search(split_rank(text)[1] if app else text[quote_end(text):]) is not None


def _assert_superset(regex: re.Pattern[str], lines: list[bytes], app: bool) -> None:
    wanted = {i for i, line in enumerate(lines) if _python_matches(regex, line, app)}
    missed = wanted - _matched_lines(translate(regex, rank_prefixed=app), lines)
    assert not missed, [lines[i] for i in sorted(missed)][:5]


def _variants(line: bytes) -> list[bytes]:
    text = line.decode("utf-8", errors="replace")
    return [line, b"7: [rank7]: " + line, b"  [default3]:" + line, b"> " + line, line + b"\r",
            line.replace(b":", b":\xff"), line.replace(b" ", b" \x00 "), text.replace(" ", "\u00a0").encode(),
            text.swapcase().encode(), text.translate(ARABIC_INDIC_DIGITS).encode(),
            text.replace("k", "\u212a").replace("s", "\u017f").replace("i", "\u0131").encode(),
            _docker_json(text), json.dumps({"log": text + "\n"}).encode()]  # a JSON writer that escapes all but ASCII


def _docker_json(text: str) -> bytes:
    """Docker's json-file record of the line: Go's encoder keeps UTF-8 but escapes <, > and &."""
    record = json.dumps({"log": text + "\n", "stream": "stderr"}, ensure_ascii=False)
    return record.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").encode()


def _evidence_lines(tmp: Path) -> dict[str, list[bytes]]:
    """Every line of every bundle the tests know, by source: fixtures, golden cases, corpus."""
    bundles = [p / "bundle" for p in sorted((ROOT / "tests" / "golden").iterdir()) if (p / "bundle").is_dir()]
    bundles += [p for p in sorted((ROOT / "corpus").iterdir()) if (p / "job.yaml").is_file()]
    for number, rule in enumerate(RULES):
        for kind in ("positive", "negative"):
            for index, fixture in enumerate(fixture_paths(ROOT / "tests" / "rules", rule.id, kind)):
                target = tmp / f"{number}-{kind}-{index}"
                target.mkdir()
                bundles.append(materialise(fixture, target))
    lines: dict[str, list[bytes]] = defaultdict(list)
    for bundle in bundles:
        for bf in load_bundle(bundle).files:
            if bf.source != "scheduler" and not bf.path.name.endswith(".gz"):
                lines[bf.source].extend(Path(bf.path).read_bytes().splitlines())
    return lines


@pytest.fixture(scope="module")
def evidence(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[bytes]]:
    return _evidence_lines(tmp_path_factory.mktemp("fixtures"))


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_every_line_the_regex_matches_the_byte_pattern_matches(rule: Rule, evidence: dict[str, list[bytes]]) -> None:
    assert rule.match is not None
    anchors = [a.rstrip("\n").encode() for a in rule.match.anchors]
    near = [line for line in evidence[rule.match.source] if any(a in line for a in anchors)]
    lines = [variant for line in near for variant in _variants(line)]
    _assert_superset(rule.match.regex, lines, rule.match.source == "app")


def test_every_shipped_regex_translates() -> None:
    for rule in RULES:
        assert rule.match is not None
        translate(rule.match.regex, rank_prefixed=rule.match.source == "app")


@pytest.mark.parametrize(("regex", "line"), [
    (r"^(?P<e>[A-Za-z_][\w.]*Error)(?:: (?P<m>.*))?$", b"[rank3]: 3: ValueError: x"),  # ^ after rank prefixes
    (r"^(?P<e>[A-Za-z_][\w.]*Error)(?:: (?P<m>.*))?$", b"2026-11-20T09:45:12.123456789Z [rank3]: ValueError: x"),
    # Docker's json-file object around the line, compact or re-serialised with blanks
    (r"^(?P<e>[A-Za-z_][\w.]*Error)(?:: (?P<m>.*))?$", b'{"log":"[rank3]: ValueError: x\\n","stream":"stderr"}'),
    (r"^(?P<e>[A-Za-z_][\w.]*Error)(?:: (?P<m>.*))?$", b'{ "log" : "ValueError: x\\n", "stream": "stderr"}'),
    (r"host (?P<h>[\w.-]+) down\s*$", "host n\u00f6de-01 down\r".encode()),  # \w beyond ASCII, $ before CR
    (r"code=(?P<c>\d+)", "code=\u0663".encode()),  # a Unicode digit
    (r"a\sb", b"a\x1cb"),  # Python's \s takes the ASCII separators
    (r"(?i)kelvin", "\u212aELVIN".encode()),  # case folding beyond ASCII
    (r"bad '(?P<w>[^']+)'", b"bad '\x00\xff'"),  # NUL and invalid bytes become U+FFFD
    (r"(?<=x)y\b(?!z)", b"xy z"),  # lookarounds and \b are dropped
    (r"(?P<q>['\"])v(?P=q)", b"'v'"),  # a back-reference is any text
    (r"t{2,30}x", b"t" * 25 + b"x"),  # a long bounded repeat is unbounded
    (r"pre(?P<tail>.*)", b"pre"),  # the tail is cut
    # Docker's json-file record, Go's escapes of <, > and & included; a Python writer's ASCII escapes
    (r"unable to write to file </torch_\d+>", b'{"log":"unable to write to file \\u003c/torch_31\\u003e\\n"}'),
    (r'File "(?P<f>[^"]+)", line \d+, in <module>',
     b'{"log":"  File \\"/a.py\\", line 3, in \\u003cmodule\\u003e\\n"}'),
    (r"n\u00f6de\tdown", b'{"log":"n\\u00f6de\\tdown\\n"}'),
    (r"I/O error, dev (?P<dev>\w+)", b'{"log":"blk_update_request: I\\/O error, dev nvme0n1\\n"}'),  # json-c
    (r"^(?P<e>[A-Za-z_][\w.]*Error)", b'{"log":"\\t[rank3]: KeyError: 1\\n"}'),  # a tab before the rank prefix
    (r"^(?P<e>[A-Za-z_][\w.]*Error)", b'{"log":"[1,2]\\u003cstderr\\u003e:KeyError: 1\\n"}'),  # in a line-start prefix
])
def test_hostile_forms_stay_in_the_superset(regex: str, line: bytes) -> None:
    compiled = re.compile(regex)
    assert _python_matches(compiled, line, app=True)
    assert _matched_lines(translate(compiled, rank_prefixed=True), [line]) == {0}


def test_the_superset_still_refuses_lines_that_only_share_an_anchor() -> None:
    pattern = translate(re.compile(r"nfs: server (?P<server>\S+) not responding"))
    assert _matched_lines(pattern, [b"nfs: server storage01 OK", b"nfs: server s1 not responding"]) == {1}


ASSERTION = (r"(?P<program>[^\s:]{1,200}): (?P<file>[^\s:]{1,300}):(?P<line>\d{1,7}): (?P<function>.{1,400}?): "
             r"Assertion `(?P<expression>.+?)' failed\.")


def test_a_head_that_varies_in_width_gives_way_to_the_longest_literal() -> None:
    # the program/file/line head would start a match at every ': ' of every line; the tail decides
    pattern = translate(re.compile(ASSERTION))
    assert pattern.startswith(b"\\x3a\\x20\\x41\\x73")  # ': As'
    lines = [b"a.out: t.c:7: main: Assertion `n > 0' failed.", b"Assertion `n' failed.", b"x: Assertion `n' held."]
    assert _matched_lines(pattern, lines) == {0}


def test_a_head_anchored_at_the_line_start_or_before_a_short_literal_stays() -> None:
    anchored = translate(re.compile(r"^(?P<w>[a-z]+): Assertion failed"))
    assert _matched_lines(anchored, [b"1: Assertion failed", b"ab: Assertion failed"]) == {1}
    short = translate(re.compile(r"(?P<w>[a-z]{2,9})=ok"))
    assert _matched_lines(short, [b"1=ok", b"ab=ok"]) == {1}


def test_a_regex_that_can_match_an_empty_line_is_untranslatable() -> None:
    with pytest.raises(Untranslatable):
        translate(re.compile(r"(?:x)?$"))
    with pytest.raises(Untranslatable):
        translate(re.compile(r"\n"))


def test_the_case_folds_beyond_ascii_are_pythons() -> None:
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    beyond = "".join(chr(c) for c in range(0x80, 0x110000) if not 0xD800 <= c < 0xE000)
    assert {c for c in letters if re.search("(?i)" + c, beyond)} == set(CASE_FOLDS_BEYOND_ASCII)
