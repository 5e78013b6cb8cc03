"""Hostlist expressions as Slurm prints them (sacct NodeList, SLURM_JOB_NODELIST)."""

from __future__ import annotations

import pytest

from slurm_attrib.slurm import hostlist
from slurm_attrib.slurm.errors import SlurmParseError


@pytest.mark.parametrize(("expr", "hosts"), [
    ("node-[01-04]", ["node-01", "node-02", "node-03", "node-04"]),
    ("node-[01-02,07],gpu9", ["node-01", "node-02", "node-07", "gpu9"]),
    ("r[1-2]n[08-09]", ["r1n08", "r1n09", "r2n08", "r2n09"]),
    ("node-[8-10]", ["node-8", "node-9", "node-10"]),
    ("single", ["single"]),
    ("None assigned", []),
    ("", []),
])
def test_expand(expr: str, hosts: list[str]) -> None:
    assert hostlist.expand(expr) == hosts


@pytest.mark.parametrize("bad", ["node-[01-", "node-]", "node-[a-b]", "node-[5-1]"])
def test_bad_expression(bad: str) -> None:
    with pytest.raises(SlurmParseError):
        hostlist.expand(bad)


def test_compress_round_trips() -> None:
    hosts = ["node-01", "node-02", "node-03", "node-07", "gpu9"]
    assert sorted(hostlist.expand(hostlist.compress(hosts))) == sorted(hosts)
