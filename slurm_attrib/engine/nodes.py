"""Which job node a line is about: the host it names, the node of its rank, or the file's node; and
which job node an NCCL/IB peer address stands for."""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any, Optional

from ..model import Symptom
from .context import EngineContext

_INTERFACE = re.compile(r"[\w.]+")  # NCCL's %interface after an address


def resolve_node(ctx: EngineContext, file_node: Optional[str], rank: Optional[int],
                 host: Any, kernel: bool = False) -> Optional[str]:
    """Host named in the line (a job node's name, or one of its addresses in job.yaml; in a program's line also the
    other names :func:`job_node` knows), else the rank's node, else the node the file belongs to. A kernel line's
    host is held to the names its file's trust check knows (KernelLines)."""
    if isinstance(host, str) and host:
        named = (match_node(ctx.job.node_set, host) or ctx.job.node_for_address(host)) if kernel \
            else job_node(ctx, host)
        if named:
            return named
    if rank is not None:
        mapped = ctx.job.rank_node(rank)
        if mapped:
            return mapped
    if file_node is None and len(ctx.job.nodes) == 1:
        return ctx.job.nodes[0]  # a one-node job: whatever happened, happened there
    return file_node


_DOMAIN = re.compile(r"[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,8}")


def match_node(nodes: Collection[str], name: str) -> Optional[str]:
    """``node-03`` or ``node-03.cluster.example`` → ``node-03`` when it is one of ``nodes`` (a job's
    :attr:`~slurm_attrib.model.JobFacts.node_set` answers in one look-up however many nodes it has)."""
    if name in nodes:
        return name
    short, dot, domain = name.partition(".")
    if dot and not _DOMAIN.fullmatch(domain):
        return None  # 'node05.36041hfi_userinit_internal' (PSM's host.pid glued to its message) names no domain
    return short if short in nodes else None


def resolve_peer(ctx: EngineContext, peer: str) -> Optional[str]:
    """An NCCL/IB peer (``10.0.0.3<54862>``, ``fe80::1%ib0<5>``, ``node-03``) → a job node."""
    return job_node(ctx, _bare_address(peer))


def job_node(ctx: EngineContext, name: str) -> Optional[str]:
    """The job node ``name`` stands for: one of its names (:func:`match_node`), the first label of one of its
    fully qualified names, one of its addresses (job.yaml) or the host name its facts record."""
    job = ctx.job
    return match_node(job.node_set, name) or job.node_for_short_name(name) or job.node_for_address(name) \
        or ctx.bundle.node_for_hostname(name)


def _bare_address(peer: str) -> str:
    """The address without interface and port. A ``:port`` goes only after a host or IPv4 address (one
    colon): in an IPv6 address (``fe80::1``) the last group is no port."""
    text = peer.strip()
    if text.endswith(">"):  # NCCL's '<port>' (the tail read from the end: a search for it tries every position)
        opened = text.rfind("<")
        if opened >= 0 and text[opened + 1:-1].isdecimal():
            text = text[:opened]
    percent = text.rfind("%")
    if percent >= 0 and _INTERFACE.fullmatch(text, percent + 1):  # '%ib0'
        text = text[:percent]
    host, colon, port = text.rpartition(":")
    return host if colon and port.isdigit() and ":" not in host else text


def place_ranks(symptoms: list[Symptom]) -> int:
    """A rank whose node a launcher's or MPI library's own line names (Cray MPICH's '[Rank N] ... [host]',
    Open MPI's 'rank N with PID P on node X': the symptom's ``host`` field made its node) places that
    rank's other lines that name no node, in a combined output file without a rank map. A rank named on
    two nodes places nothing. Run when extraction ends, before the symptoms are sorted."""
    named: dict[int, set[str]] = {}
    unplaced = False
    for sym in symptoms:
        if sym.rank is None:
            continue
        if sym.node is None:
            unplaced = True
            continue
        host = sym.fields.get("host")
        if isinstance(host, str) and (host == sym.node or host.split(".", 1)[0] == sym.node.split(".", 1)[0]):
            named.setdefault(sym.rank, set()).add(sym.node)
    if not unplaced or not named:
        return 0
    count = 0
    for sym in symptoms:
        nodes = named.get(sym.rank) if sym.rank is not None and sym.node is None else None
        if nodes and len(nodes) == 1:
            sym.node = next(iter(nodes))
            sym.notes.append(f"rank {sym.rank} ran on {sym.node}, as the launcher's own line for it says")
            count += 1
    return count
