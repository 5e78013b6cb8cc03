"""Which job node a line or an NCCL/IB peer names (slurm_attrib.engine.nodes)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

import pytest

from slurm_attrib.bundle import Bundle, NodeFacts
from slurm_attrib.engine.context import EngineContext, EngineSettings
from slurm_attrib.engine.nodes import _bare_address, match_node, resolve_node, resolve_peer
from slurm_attrib.model import JobFacts
from slurm_attrib.ruleset import RuleSet

NODES = ("node-01", "node-03")


def context(nodes: tuple[str, ...] = NODES) -> EngineContext:
    job = JobFacts(job_id="1", nodes=nodes, ranks=((0, "node-01"), (1, "node-03")),
                   addresses=(("10.0.0.3", "node-03"), ("fe80::1", "node-01")))
    bundle = Bundle(root=Path("."), job=job, files=[], node_facts={})
    return EngineContext(bundle=bundle, ruleset=RuleSet(rules=(), version="", digest=""),
                         settings=EngineSettings())


@pytest.mark.parametrize(("name", "expected"), [
    ("node-03", "node-03"),
    ("node-03.cluster.example", "node-03"),  # FQDN → the short name Slurm uses
    ("node-02", None),
    ("node-02.cluster.example", None),
    ("node", None),  # a prefix is not a node
])
def test_match_node(name: str, expected: Optional[str]) -> None:
    assert match_node(NODES, name) == expected


@pytest.mark.parametrize(("peer", "expected"), [
    ("node-03", "node-03"),
    ("node-03.cluster.example", "node-03"),
    ("node-03.cluster.example<54862>", "node-03"),
    ("10.0.0.3<54862>", "node-03"),  # NCCL's address<port>
    (" 10.0.0.3 ", "node-03"),
    ("10.0.0.3", "node-03"),
    ("fe80::1%ib0<5>", "node-01"),  # IPv6 with interface and port
    ("fe80::1", "node-01"),  # a bare IPv6 address keeps its last group: ':1' is no port here
    ("10.0.0.9<54862>", None),
    ("node-02<1>", None),
])
def test_resolve_peer(peer: str, expected: Optional[str]) -> None:
    assert resolve_peer(context(), peer) == expected


@pytest.mark.parametrize(("file_node", "rank", "host", "expected"), [
    ("node-01", 1, "node-03.cluster.example", "node-03"),  # the host the line names comes first
    ("node-01", 1, "elsewhere", "node-03"),  # a host not in the job: the rank's node
    ("node-01", None, None, "node-01"),  # else the file's node
    ("node-01", 7, None, "node-01"),  # a rank without a node in the rank map
    (None, None, None, None),  # several nodes and nothing to go by
])
def test_resolve_node(file_node: Optional[str], rank: Optional[int], host: Optional[str],
                      expected: Optional[str]) -> None:
    assert resolve_node(context(), file_node, rank, host) == expected


def test_resolve_node_puts_an_unplaced_line_of_a_one_node_job_on_that_node() -> None:
    assert resolve_node(context(("node-01",)), None, None, None) == "node-01"


@pytest.mark.parametrize(("peer", "expected"), [
    ("node-03:29500", "node-03"),  # host:port
    ("10.0.0.3:29500", "node-03"),  # IPv4:port
    ("fe80::1%ib0", "node-01"),
])
def test_resolve_peer_drops_a_port_after_a_host_but_not_an_ipv6_group(peer: str, expected: str) -> None:
    assert resolve_peer(context(), peer) == expected


@pytest.mark.parametrize(("name", "node"), [
    ("node05", "node05"),
    ("node05.cluster.example.org", "node05"),
    ("node05.36041hfi_userinit_internal", None),  # PSM's host.pid glued to its message: no domain after the dot
    ("node05.ib", "node05"),
])
def test_a_short_name_is_taken_only_before_a_domain(name: str, node: Optional[str]) -> None:
    assert match_node({"node05"}, name) == node


# the tail pattern _bare_address read with a regex search before it read it from the end: both must agree
_TAIL = re.compile(r"(?:%[\w.]+)?(?:<\d+>)?$")


@pytest.mark.parametrize("peer", [
    "node-03<54862>", "10.0.0.3<1>", "fe80::1%ib0<5>", "fe80::1%ib0", "a%b.c<12>", "a%b:c<1>", "a<1>%ib0", "<5>",
    "<>", "a<>", "a<x1>", "a%<1>", "a%", "%ib0", "a%ib0%ib1<2>", "a<1><2>", "a<٣>", "a<²>", "a%é<1>", "a%b-c<1>",
    "  node-03<7>  ", "10.0.0.3:5000<9>", "x" * 300 + "<1>", "",
])
def test_bare_address_strips_the_tail_the_regex_did(peer: str) -> None:
    text = _TAIL.sub("", peer.strip(), count=1)
    host, colon, port = text.rpartition(":")
    expected = host if colon and port.isdigit() and ":" not in host else text
    assert _bare_address(peer) == expected


def test_a_short_host_name_finds_the_one_node_whose_fully_qualified_name_it_begins() -> None:
    """NCCL prints the host name cut at its first dot: 'node48' is node48.cluster.local where the NodeNames are
    fully qualified, but not where two nodes share the label, and a qualified name of another domain is no match."""
    ctx = context(("node48.cluster.local", "node49.cluster.local"))
    assert resolve_peer(ctx, "node48<54862>") == "node48.cluster.local"
    assert resolve_node(ctx, None, None, "node49") == "node49.cluster.local"
    assert resolve_node(context(("gpu1.a.example", "gpu1.b.example")), None, None, "gpu1") is None
    assert resolve_node(ctx, None, None, "node48.other.example") is None


def test_a_host_name_the_facts_record_finds_its_node() -> None:
    """A NodeName that is not the host name (ParallelCluster's 'queue1-st-p4d-1' on host 'ip-10-0-1-23'): the
    host name the node's facts record places a line that names it; one that two nodes' facts claim places none."""
    job = JobFacts(job_id="1", nodes=("queue1-st-p4d-1", "queue1-st-p4d-2"))
    facts = {"queue1-st-p4d-1": NodeFacts(node="queue1-st-p4d-1", hostname="ip-10-0-1-23.ec2.internal"),
             "queue1-st-p4d-2": NodeFacts(node="queue1-st-p4d-2", hostname="ip-10-0-1-24")}
    bundle = Bundle(root=Path("."), job=job, files=[], node_facts=facts)
    ctx = EngineContext(bundle=bundle, ruleset=RuleSet(rules=(), version="", digest=""), settings=EngineSettings())
    assert resolve_node(ctx, None, None, "ip-10-0-1-23") == "queue1-st-p4d-1"
    assert resolve_node(ctx, None, None, "IP-10-0-1-23.ec2.internal") == "queue1-st-p4d-1"
    assert resolve_node(ctx, None, None, "ip-10-0-1-24") == "queue1-st-p4d-2"
    # a name with a domain is the recorded name whole or nothing (PSM's 'host.36041hfi_...' glued to its message)
    assert resolve_node(ctx, None, None, "ip-10-0-1-24.ec2.internal") is None
    assert resolve_node(ctx, None, None, "ip-10-0-1-23.36041hfi_userinit_internal") is None
    assert resolve_node(ctx, None, None, "ip-10-0-1-25") is None
    # a kernel line's host is held to the node's own names, as the file's trust check reads it
    assert resolve_node(ctx, None, None, "ip-10-0-1-23", kernel=True) is None


@pytest.mark.parametrize("hostnames", [
    {"queue1-st-p4d-1": "shared", "queue1-st-p4d-2": "shared"},  # two nodes' facts claim it
    {"queue1-st-p4d-1": "localhost"},  # a name that is no one machine's
    {"queue1-st-p4d-1": "queue1-st-p4d-2"},  # another node's own name
])
def test_a_host_name_that_is_not_one_nodes_own_places_nothing(hostnames: dict[str, str]) -> None:
    job = JobFacts(job_id="1", nodes=("queue1-st-p4d-1", "queue1-st-p4d-2"))
    facts = {node: NodeFacts(node=node, hostname=host) for node, host in hostnames.items()}
    bundle = Bundle(root=Path("."), job=job, files=[], node_facts=facts)
    ctx = EngineContext(bundle=bundle, ruleset=RuleSet(rules=(), version="", digest=""), settings=EngineSettings())
    for host in sorted(set(hostnames.values()) - set(job.nodes)):
        assert resolve_node(ctx, None, None, host) is None
    assert resolve_node(ctx, None, None, "queue1-st-p4d-2") == "queue1-st-p4d-2"
