"""Node facts from a fake /proc and /etc tree."""

from __future__ import annotations

from pathlib import Path

from slurm_attrib.connectors.node_facts import NodeFactsSource, driver_from_proc

NVRM = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.54.03  Tue Jun  6 22:20:39 UTC 2023\n"
        "GCC version:  gcc version 12.2.0\n")


def _tree(root: Path, zone_link: str | None = "/usr/share/zoneinfo/Europe/Berlin") -> None:
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/driver/nvidia").mkdir(parents=True)
    (root / "etc").mkdir()
    (root / "proc/stat").write_text("cpu  1 2 3\nbtime 1795166000\nprocesses 9\n")
    (root / "proc/sys/kernel/hostname").write_text("node-02\n")
    (root / "proc/sys/kernel/osrelease").write_text("6.1.0-18-amd64\n")
    (root / "proc/driver/nvidia/version").write_text(NVRM)
    if zone_link:
        (root / "etc/localtime").symlink_to(zone_link)


def test_facts_from_tree(tmp_path: Path) -> None:
    _tree(tmp_path)
    facts, problems = NodeFactsSource(str(tmp_path)).gather()
    assert problems == []
    assert facts == {"hostname": "node-02", "kernel": "6.1.0-18-amd64", "boot_time": "2026-11-20T09:13:20Z",
                     "timezone": "Europe/Berlin", "driver_version": "535.54.03"}


def test_missing_values_are_problems_not_errors(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/stat").write_text("cpu 1\n")
    facts, problems = NodeFactsSource(str(tmp_path), hostname="n1").gather()
    assert facts == {"hostname": "n1", "timezone": "UTC"}
    assert any("btime" in p for p in problems) and any("timezone" in p for p in problems)


def test_timezone_file_fallback(tmp_path: Path) -> None:
    _tree(tmp_path, zone_link=None)
    (tmp_path / "etc/timezone").write_text("America/Chicago\n")
    assert NodeFactsSource(str(tmp_path)).gather()[0]["timezone"] == "America/Chicago"


def test_driver_version_forms() -> None:
    assert driver_from_proc(NVRM) == "535.54.03"
    assert driver_from_proc("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.133.20  Release Build") \
        == "570.133.20"
    assert driver_from_proc("garbage") is None
