"""Hostlist expressions as Slurm prints them (sacct NodeList, SLURM_JOB_NODELIST)."""

from __future__ import annotations

import pytest

from slurm_attrib.slurm import hostlist
from slurm_attrib.slurm.errors import SlurmParseError


# Hosts come back sorted (ClusterShell NodeSet's order), not in the order written: Slurm prints node
# lists sorted itself, so only hand-written lists such as the second one see a difference.
@pytest.mark.parametrize(("expr", "hosts"), [
    ("node-[01-04]", ["node-01", "node-02", "node-03", "node-04"]),
    ("node-[01-02,07],gpu9", ["gpu9", "node-01", "node-02", "node-07"]),
    ("gpu[01-99,100-101]", [f"gpu{i:02d}" for i in range(1, 100)] + ["gpu100", "gpu101"]),
    ("n[1-2],n[2-3]", ["n1", "n2", "n3"]),
    ("r[1-2]n[08-09]", ["r1n08", "r1n09", "r2n08", "r2n09"]),
    ("node-[8-10]", ["node-8", "node-9", "node-10"]),
    ("single", ["single"]),
    ("None assigned", []),
    ("", []),
])
def test_expand(expr: str, hosts: list[str]) -> None:
    assert hostlist.expand(expr) == hosts


@pytest.mark.parametrize("bad", ["node-[01-", "node-]", "node-[a-b]", "node-[5-1]", "@admins", "n[1-3]!n2",
                                 "n[1-3]&n2", "n[1-4/2]", "n[[1-2]]", "n[1-99999999999999999999]"])
def test_bad_expression(bad: str) -> None:
    with pytest.raises(SlurmParseError):
        hostlist.expand(bad)


def test_the_host_count_is_checked_before_anything_is_expanded() -> None:
    """``n[0-9999][0-9999][0-9]`` names 10^9 hosts from 26 characters; each bracket alone is small."""
    with pytest.raises(SlurmParseError, match="more than"):
        hostlist.expand("n[0-9999][0-9999][0-9]")
    assert len(hostlist.expand(f"n[1-{hostlist.MAX_HOSTS}]")) == hostlist.MAX_HOSTS


def test_compress_round_trips() -> None:
    hosts = ["node-01", "node-02", "node-03", "node-07", "gpu9"]
    assert sorted(hostlist.expand(hostlist.compress(hosts))) == sorted(hosts)
