"""The line decoders (slurm_attrib.engine.decoders): an Xid read once per distinct message in a file, the same
as read afresh every time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from slurm_attrib import canonical
from slurm_attrib.engine import Engine, decoders
from slurm_attrib.nvidia.assess import assess_xid
from slurm_attrib.nvidia.parse import caused_by_previous, parse_xid

XID_79 = "NVRM: Xid (PCI:0000:18:00): 79, pid=4242, name=python3, GPU has fallen off the bus."
XID_74 = ("NVRM: Xid (PCI:0000:18:00): 74, pid=88123, name=python3, NVLink: fatal error detected on link 14(0x0, 0x0, "
          "0x10000, 0x0, 0x0, 0x0, 0x0)")
XID_45 = "NVRM: Xid (PCI:0000:3b:00): 45, pid=9, name=python3, Ch 00000010, caused by previous Xid 79"


def _afresh(text: str, driver: str | None) -> Any:
    event = parse_xid(text)
    return None if event is None else (event, assess_xid(event, driver), caused_by_previous(event.message))


@pytest.mark.parametrize("text", [
    f"Nov 20 08:00:01 node-007 kernel: [86401.812765] {XID_79}",
    f"[  86401.812765] {XID_74}",
    f"<4>{XID_45}",
    # an 'NVRM: Xid' that does not parse, then one that does: read from the first, the second is still found
    f"Nov 20 08:00:01 node-007 kernel: NVRM: Xid seen earlier; {XID_79}",
    "Nov 20 08:00:01 node-007 kernel: NVRM: Xid (PCI:0000:18:00): 13x, not a code",
    "Nov 20 08:00:01 node-007 kernel: NVRM: GPU at PCI:0000:18:00: GPU-0b1c",
])
@pytest.mark.parametrize("driver", [None, "550.54.15", "570.124.06"])
def test_an_xid_read_through_the_memo_is_the_line_read_afresh(text: str, driver: str | None) -> None:
    memo: dict[str, Any] = {}
    first = decoders._read_xid(text, driver, memo)
    assert first == _afresh(text, driver)
    assert decoders._read_xid(text, driver, memo) == first  # from the memo
    assert decoders._read_xid(text, driver, None) == first  # no memo at all


def test_the_memo_tells_drivers_apart() -> None:
    memo: dict[str, Any] = {}
    text = f"kernel: {XID_74}"
    for driver in ("550.54.15", "570.124.06", None):
        assert decoders._read_xid(text, driver, memo) == _afresh(text, driver)
    assert len(memo["xid"]) == 3


def test_the_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(decoders, "XID_MEMO_ENTRIES", 4)
    memo: dict[str, Any] = {}
    texts = [XID_79.replace("pid=4242", f"pid={pid}") for pid in range(10)]
    for text in texts:
        assert decoders._read_xid(text, None, memo) == _afresh(text, None)
    assert len(memo["xid"]) == 4
    long = XID_79 + " " + "x" * decoders.XID_MEMO_CHARS
    assert decoders._read_xid(long, None, {}) == _afresh(long, None)
    kept: dict[str, Any] = {}
    decoders._read_xid(long, None, kept)
    assert kept["xid"] == {}  # read, but not remembered


def _bundle(root: Path, lines: list[str]) -> Path:
    (root / "syslog").mkdir(parents=True)
    (root / "job.yaml").write_text("job_id: '77'\nstate: FAILED\nexit_code: '1:0'\nstart: '2026-11-20T08:00:00Z'\n"
                                   "end: '2026-11-20T09:00:00Z'\nnodes: [node-007]\n", encoding="utf-8")
    (root / "syslog" / "node-007.log").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return root


def test_symptoms_of_one_repeated_message_are_each_their_own(engine: Engine, tmp_path: Path) -> None:
    """Xid 74's decoded registers are each symptom's own dict: changing one's leaves the next one's as read."""
    lines = [f"Nov 20 08:{m:02d}:0{s} node-007 kernel: [{86400 + 60 * m + s}.000001] {XID_74}"
             for m in range(3) for s in range(2)]
    ctx = engine.run(_bundle(tmp_path, lines))
    xids = [s for s in ctx.symptoms if s.kind == "xid"]
    assert len(xids) == len(lines)
    assert xids[0].fields["decoded"] == xids[1].fields["decoded"]
    assert xids[0].fields["decoded"] is not xids[1].fields["decoded"]


def test_a_flood_diagnoses_as_without_the_memo(engine: Engine, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the caps as before them: the same verdict, notes and counts whether each line is read afresh."""
    lines = [f"Nov 20 08:{i // 60:02d}:{i % 60:02d} node-007 kernel: [{86400 + i}.{i:06d}] "
             f"NVRM: Xid (PCI:0000:{0x18 + 0x10 * (i % 8):02x}:00): 13, pid=4242, name=python3, Graphics SM Warp "
             f"Exception on (GPC 1, TPC 2, SM 0): Out Of Range Address" for i in range(600)]
    lines[450] = f"Nov 20 08:07:30 node-007 kernel: [86850.000000] {XID_79}"
    bundle = _bundle(tmp_path, lines)
    remembered = canonical.dumps(engine.diagnose(bundle).to_dict())
    monkeypatch.setattr(decoders, "XID_MEMO_ENTRIES", 0)
    assert canonical.dumps(engine.diagnose(bundle).to_dict()) == remembered
    assert "199 more line(s) of rule kernel.nvidia_xid past the caps" in remembered  # 8 GPUs x 50 kept, and the 79
