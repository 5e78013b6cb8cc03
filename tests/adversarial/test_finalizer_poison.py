"""Poison input is quarantined and the rest goes on (issue 11): every input below used to stop the
finalizer, on every restart. Each test queues a good job beside the poison, runs a real
``slurm-attrib finalize --once`` and checks that the good job got its verdict, the finalizer ended
by itself, and the poison is either handled or listed by ``finalize --status`` with its reason."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from .finalizer_harness import Site, enqueue

DEEP = "[" * 5000 + "]" * 5000
BOMB = ("state: error\na: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
        + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(9))
        + "reason: *j\n")


def _run(site: Site) -> None:
    result = site.finalize(timeout=90)
    assert result.returncode == 0, result.stderr[-3000:]
    assert site.done()["c_1_0"]["outcome"] == "diagnosed"


def _quarantined(site: Site, text: str) -> None:
    listing = site.status()
    assert "1 quarantined" in listing and text in listing, listing


def test_facts_with_a_pci_that_is_no_pci_address(tmp_path: Path) -> None:
    site = Site(tmp_path)
    enqueue(site.spool, "1")
    enqueue(site.spool, "2")
    folder = site.node_bundle("c_2_0")
    (folder / "facts").mkdir()
    (folder / "facts" / "node-01.yaml").write_text("gpus:\n- {pci: 'not a pci address', uuid: GPU-1}\n")
    _run(site)
    assert site.done()["c_2_0"]["outcome"] == "diagnosed"


@pytest.mark.parametrize("collection", [f"state: ok\nx: {DEEP}\n", BOMB], ids=["5000_deep", "alias_bomb"])
def test_a_hostile_collection_yaml_is_read_no_further_and_the_job_diagnosed(tmp_path: Path, collection: str) -> None:
    site = Site(tmp_path)
    enqueue(site.spool, "1")
    enqueue(site.spool, "3")
    site.node_bundle("c_3_0", collection=collection)
    _run(site)
    assert site.done()["c_3_0"]["outcome"] == "diagnosed"


def _spooled(site: Site, name: str, payload: object) -> Path:
    folder = site.spool / "verdicts"
    folder.mkdir(exist_ok=True)
    path = folder / f"verdict-{name}.json"
    path.write_text(json.dumps(payload))
    return path


def test_a_spooled_verdict_that_is_a_list(tmp_path: Path) -> None:
    site = Site(tmp_path)
    enqueue(site.spool, "1")
    path = _spooled(site, "list", [1, 2, 3])
    _run(site)
    assert not path.exists()
    _quarantined(site, "spooled verdict: verdict-list.json: ValueError: not a spooled verdict")


def test_a_spooled_verdict_holding_2_to_the_70(tmp_path: Path) -> None:
    site = Site(tmp_path)
    enqueue(site.spool, "1")
    diag = {"schema_version": 1, "status": "unattributed", "category": "unknown", "responsible": "unknown",
            "job": {"job_id": "5", "cluster": "c", "restart_count": 2 ** 70, "nodes": ["node-01"]}}
    path = _spooled(site, "huge", {"kind": "slurm-attrib.verdict", "version": 1,
                                    "verdict_time": "2026-12-02T12:00:00Z", "diagnosis": diag})
    _run(site)
    assert not path.exists()
    _quarantined(site, "spooled verdict: verdict-huge.json: OverflowError")


def test_a_restart_count_that_is_a_superscript_digit(tmp_path: Path) -> None:
    site = Site(tmp_path)
    enqueue(site.spool, "1")
    path = enqueue(site.spool, "6", restart="\u00b2", name="c_6_x.json")
    _run(site)
    assert not path.exists()
    _quarantined(site, "queue entry: c_6_x.json: restart count '\u00b2' is not a number")


def test_a_fifo_named_like_a_queue_entry(tmp_path: Path) -> None:
    site = Site(tmp_path)
    enqueue(site.spool, "1")
    os.mkfifo(site.spool / "queue" / "x.json")
    _run(site)
    assert not (site.spool / "queue" / "x.json").exists()
    _quarantined(site, "queue entry: x.json: unreadable queue entry")


def test_an_old_symlink_in_jobs_is_pruned_as_a_link(tmp_path: Path) -> None:
    site = Site(tmp_path)
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep").write_text("keep")
    link = site.spool / "jobs" / "c_8_0"
    link.symlink_to(precious)
    old = time.time() - 400 * 86400
    os.utime(link, (old, old), follow_symlinks=False)
    enqueue(site.spool, "1")
    _run(site)
    assert not os.path.lexists(link) and (precious / "keep").read_text() == "keep"


def test_a_symlink_where_the_job_bundle_goes(tmp_path: Path) -> None:
    site = Site(tmp_path)
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep").write_text("keep")
    (site.spool / "jobs" / "c_1_0").symlink_to(precious)
    enqueue(site.spool, "1")
    _run(site)
    assert (precious / "keep").read_text() == "keep" and sorted(os.listdir(precious)) == ["keep"]
    assert (site.spool / "jobs" / "c_1_0" / "job.yaml").is_file()


def test_a_1_5_gib_node_bundle_file_is_left_out_unread(tmp_path: Path) -> None:
    site = Site(tmp_path)
    enqueue(site.spool, "1")
    enqueue(site.spool, "10")
    folder = site.node_bundle("c_10_0")
    with open(folder / "syslog" / "node-01.log", "wb") as handle:
        handle.truncate(3 << 29)  # sparse: 1.5 GiB that take no disk
    began = time.monotonic()
    _run(site)
    assert time.monotonic() - began < 60
    assert site.done()["c_10_0"]["outcome"] == "diagnosed"
    job_yaml = (site.spool / "jobs" / "c_10_0" / "job.yaml").read_text()
    assert "node-01: syslog/node-01.log left out" in job_yaml


def test_a_job_that_raises_is_quarantined_and_the_others_go_on(tmp_path: Path) -> None:
    """Whatever the next poison is: a job whose processing raises is set aside with the exception."""
    site = Site(tmp_path)
    enqueue(site.spool, "1")
    enqueue(site.spool, "11")
    (site.spool / "done" / "c_11_0.json").mkdir()  # a folder where its done marker goes
    _run(site)
    assert not (site.spool / "queue" / "c_11_0.json").exists()
    listing = site.status()
    assert "job: c_11_0: IsADirectoryError" in listing, listing
    reason = json.loads(next((site.spool / "quarantine").glob("*-c_11_0/reason.json")).read_text())
    assert reason["kind"] == "job" and "Traceback" in reason["reason"]
    assert {Path(p).name for p in reason["moved"]} == {"c_11_0.json", "c_11_0"}


def test_a_nodelist_no_parser_will_ever_read_is_quarantined_not_retried_forever(tmp_path: Path) -> None:
    """A SlurmParseError (here a hostlist of 10^9 hosts in the hook's node list) comes back on every
    retry: after a few tries the job is set aside; it used to be retried every 2 s for ever, and
    `--once` never ended."""
    site = Site(tmp_path)
    enqueue(site.spool, "1")
    enqueue(site.spool, "2", nodes="n[0-9999][0-9999][0-9]")
    _run(site)
    _quarantined(site, "SlurmParseError")
