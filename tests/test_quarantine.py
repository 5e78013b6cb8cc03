"""The quarantine: entries moved with their reason, listed; links moved, never followed."""

from __future__ import annotations

import json
from pathlib import Path

from slurm_attrib import quarantine


def test_quarantine_moves_and_lists(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    (spool / "queue").mkdir(parents=True)
    entry = spool / "queue" / "c_1_0.json"
    entry.write_text("{")
    target = tmp_path / "precious"
    target.mkdir()
    link = spool / "queue" / "link"
    link.symlink_to(target)
    folder = quarantine.quarantine(spool / "quarantine", "job", "c_1_0", [entry, link, spool / "absent"], "bad\nmore")
    assert not entry.exists() and not link.is_symlink() and target.is_dir()
    assert (folder / "c_1_0.json").read_text() == "{" and (folder / "link").is_symlink()
    record = json.loads((folder / "reason.json").read_text())
    assert record["kind"] == "job" and record["reason"] == "bad\nmore" and len(record["moved"]) == 2
    again = quarantine.quarantine(spool / "quarantine", "job", "c_1_0", [], "twice")
    assert again != folder
    listed = quarantine.listing(spool / "quarantine")
    assert [(q.kind, q.name, q.reason) for q in listed] == [("job", "c_1_0", "bad\nmore"), ("job", "c_1_0", "twice")]


def test_a_hostile_name_stays_one_component(tmp_path: Path) -> None:
    folder = quarantine.quarantine(tmp_path / "q", "queue entry", "../../etc/x", [], "why")
    assert folder.parent == tmp_path / "q" and "/" not in folder.name


def test_listing_survives_a_broken_reason(tmp_path: Path) -> None:
    (tmp_path / "q" / "20260101T000000-x").mkdir(parents=True)
    (tmp_path / "q" / "20260101T000000-x" / "reason.json").write_text("[")
    assert "unreadable" in quarantine.listing(tmp_path / "q")[0].reason
