"""InfiniBand / RoCE and TCP (socket, TCPStore, rendezvous) failures: decoders that decide, from the
message itself, whether a network line is a root candidate, a cascade of another rank dying, or context.

Vocabulary: ``ibv_wc_status`` (libibverbs verbs.h), ``ibv_event_type_str`` (libibverbs enum_strs.c),
the mlx5 CQE syndromes UCX prints (ucx src/uct/ib/mlx5/ib_mlx5_log.c) and the errno names Linux uses.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Optional

from ...bundle import TRUSTED_KERNEL_ORIGINS
from ...model import Symptom
from ...scan import Line
from ...timestamps import parse_line_time
from ..context import EngineContext
from ..ranks import split_rank
from ..registry import decoder
from ..timeinfer import time_context


@dataclass(frozen=True)
class Verdict:
    """What one network message means on its own: role, category, who is responsible, how strong."""

    role: str
    responsible: str = "unknown"
    strength: int = 0
    meaning: str = ""
    category: str = "network"
    readings: tuple[str, ...] = ()  # categories the line fits alike: alone, an ambiguous verdict with each


def _apply(sym: Symptom, verdict: Verdict) -> None:
    sym.role, sym.category, sym.responsible = verdict.role, verdict.category, verdict.responsible
    sym.strength = verdict.strength if verdict.role == "candidate" else 0
    if verdict.meaning:
        sym.fields["meaning"] = verdict.meaning
    if verdict.readings:
        sym.fields["readings"] = list(verdict.readings)


# --- work completion status (ibv_wc_status) -------------------------------------------------------
# https://github.com/linux-rdma/rdma-core/blob/master/libibverbs/verbs.h (enum ibv_wc_status)
WC_STATUS_NAMES = {
    1: "local length error", 2: "local QP operation error", 4: "local protection error",
    5: "work request flushed", 6: "memory window bind error", 7: "bad response", 8: "local access error",
    9: "remote invalid request", 10: "remote access error", 11: "remote operation error",
    12: "transport retry counter exceeded", 13: "RNR retry counter exceeded", 15: "remote invalid RD request",
    16: "remote aborted", 19: "fatal error", 20: "response timeout", 21: "general error",
}
_CONFIG_STATUSES = {1, 2, 4, 6, 8, 9, 10, 11, 15}  # protection / access / length: ACS, GDR, MTU, registration
_MEMORY_STATUSES = {4, 8, 10}  # local protection, local access, remote access: the memory a request named

# mlx5 CQE syndrome -> ibv_wc_status (rdma-core providers/mlx5/cq.c mlx5_handle_error_cqe)
MLX5_SYNDROME_STATUS = {0x1: 1, 0x2: 2, 0x4: 4, 0x5: 5, 0x6: 6, 0x10: 7, 0x11: 8, 0x12: 9, 0x13: 10,
                        0x14: 11, 0x15: 12, 0x16: 13, 0x22: 16}


@functools.lru_cache(maxsize=64)
def completion_verdict(status: Optional[int], nccl: bool = False) -> Verdict:
    """A failed work completion: 12 (the peer stopped acknowledging: the link or the peer) is a network
    candidate without a culprit; 5 (flushed after the QP broke) and 13 (receiver not ready: the peer
    process stalled or died) are cascades; protection/access errors are configuration candidates
    (ACS / GPUDirect / registration). A protection or access error also fits the program's own registration
    (a buffer freed or never registered, an RMA runtime's bug): both readings, except in NCCL's report (``nccl``),
    whose buffers NCCL registers itself."""
    name = WC_STATUS_NAMES.get(status or -1, f"status {status}")
    if status == 12:
        return Verdict("candidate", "unknown", 40, "transport retry counter exceeded: the link or the peer "
                       "stopped acknowledging; the lines alone cannot tell which")
    if status in (5, 13, 16):
        return Verdict("cascade", meaning=f"{name}: a consequence of a queue pair or peer that already failed")
    if status in _MEMORY_STATUSES and not nccl:
        # the HCA refused the memory a work request named: a registration the program got wrong (a buffer freed
        # or never registered, a runtime's bug) as often as the host's set-up (PCIe ACS breaking GPUDirect RDMA)
        return Verdict("candidate", "unknown", 45, f"{name}: memory the request named was not registered for "
                       "it: the program's (or its runtime's) registration, or the host's GPUDirect RDMA set-up "
                       "(PCIe ACS, nvidia-peermem)", readings=("network", "application"))
    if status in _CONFIG_STATUSES:
        return Verdict("candidate", "unknown", 45, f"{name}: usually a host configuration problem (PCIe ACS "
                       "breaking GPUDirect RDMA, memory registration, MTU/GID mismatch)")
    if status is None:
        return Verdict("candidate", "unknown", 35, "an RDMA completion error")
    return Verdict("candidate", "unknown", 40, name)


def _int(value: Any, base: int = 10) -> Optional[int]:
    try:
        return int(str(value), base)
    except (TypeError, ValueError):
        return None


@decoder("net_ib_completion_status")
def decode_completion(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """NCCL 'Got completion from peer X with error|status=N': classify by the work completion status."""
    status = _int(sym.fields.get("status"))
    sym.fields["status_name"] = WC_STATUS_NAMES.get(status or -1, "unknown")
    _apply(sym, completion_verdict(status, nccl=True))
    return True


_UCX_ERRORS = {
    "transport retry count exceeded": 12, "receive-no-ready retry count exceeded": 13,
    "local protection error": 4, "local access error": 8, "remote access error": 10,
    "remote operation error": 11, "invalid request": 9, "local length error": 1,
    "local qp operation error": 2, "remote side aborted": 16, "bad response": 7,
    "memory window bind error": 6,
}


def _judge_status(sym: Symptom, status: Optional[int]) -> bool:
    """Record the completion status (when known) and judge the symptom by it."""
    if status is not None:
        sym.fields["status"] = status
    _apply(sym, completion_verdict(status))
    return True


# The rule's four wordings (see rules/app/net_ucx_completion_error.yaml) name the same facts differently
_UCX_BRANCHES = {"qp_error": "error", "qp_synd": "synd", "qp_vendor_err": "vendor_err", "qp_device": "device",
                 "qp_port": "port", "wc_error": "error", "dc_vendor_err": "vendor_err", "rc_vendor_err": "vendor_err"}
# ibv_wc_status_str (libibverbs/enum_strs.c): what the verbs transports print for a failed completion
_VERBS_STATUS_TEXT = {text.lower(): status for status, text in {
    1: "local length error", 2: "local QP operation error", 4: "local protection error",
    5: "Work Request Flushed Error", 6: "memory management operation error", 7: "bad response error",
    8: "local access error", 9: "remote invalid request error", 10: "remote access error",
    11: "remote operation error", 12: "transport retry counter exceeded", 13: "RNR retry counter exceeded",
    15: "remote invalid RD request", 16: "operation aborted", 19: "fatal error", 20: "response timeout error",
    21: "general error"}.items()}


@decoder("net_ucx_completion_error")
def decode_ucx(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """UCX 'X on mlx5_0:1/IB (synd 0x15 vend 0x81 ...)' and its older wordings: the mlx5 syndrome names the
    completion status, else the status text does."""
    for branch, name in _UCX_BRANCHES.items():
        if branch in sym.fields:
            sym.fields[name] = sym.fields.pop(branch)
    status = MLX5_SYNDROME_STATUS.get(_int(sym.fields.get("synd"), 16) or -1)
    if status is None:
        text = str(sym.fields.get("error", "")).strip().lower()
        status = _UCX_ERRORS.get(text, _VERBS_STATUS_TEXT.get(text))
    return _judge_status(sym, status)


_OMPI_STATUS = re.compile(r"status number (\d+)")


@decoder("net_ompi_completion_error")
def decode_ompi(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """Open MPI openib 'error polling CQ with status X status number N'; the help text about the retry
    count being exceeded is status 12."""
    match = _OMPI_STATUS.search(extra["text"])
    status = int(match.group(1)) if match else (12 if "retry count" in extra["text"] else None)
    return _judge_status(sym, status)


_HEX_ROW = re.compile(r"^\s*([0-9a-fA-F]{8}) ([0-9a-fA-F]{8}) ([0-9a-fA-F]{8}) ([0-9a-fA-F]{8})\s*$")


@decoder("net_mlx5_error_cqe")
def decode_mlx5_cqe(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """libmlx5 'got completion with error:' is followed by the 64-byte CQE in four hex rows; the
    syndrome is the low byte of the second word of the last row (mlx5_err_cqe)."""
    rows = [m for m in (_HEX_ROW.match(split_rank(t)[1]) or _HEX_ROW.match(t.split(": ", 1)[-1])
                        for t in line.following(4)) if m]  # (a pdsh or pod host before the row, too)
    status = None
    if len(rows) == 4:
        word = int(rows[3].group(2), 16)
        sym.fields["synd"] = f"0x{word & 0xFF:x}"
        sym.fields["vendor_err"] = f"0x{(word >> 8) & 0xFF:x}"
        status = MLX5_SYNDROME_STATUS.get(word & 0xFF)
    return _judge_status(sym, status)


# --- asynchronous events (ibv_event_type_str) -----------------------------------------------------
# https://github.com/linux-rdma/rdma-core/blob/master/libibverbs/enum_strs.c
_ASYNC_EVENTS: tuple[tuple[str, Verdict], ...] = (
    ("local catastrophic error", Verdict("candidate", "infrastructure", 85,
                                         "the HCA reported a device-fatal error (IBV_EVENT_DEVICE_FATAL)")),
    # A QP in error or an access violation follows from the HCA, the peer, GPUDirect/ACS or registration
    # alike: a network candidate that blames no node on its own.
    ("local work queue catastrophic error", Verdict("candidate", "unknown", 55,
                                                    "the HCA put a queue pair in error (IBV_EVENT_QP_FATAL)")),
    ("local access violation work queue error", Verdict(
        "candidate", "unknown", 50, "this HCA rejected a queue pair's memory access "
        "(IBV_EVENT_QP_ACCESS_ERR): its HCA, GPUDirect/ACS setup or memory registration")),
    ("invalid request local work queue error", Verdict("candidate", "unknown", 45,
                                                       "a malformed work request (IBV_EVENT_QP_REQ_ERR)")),
    ("cq error", Verdict("candidate", "unknown", 45, "a completion queue overran or failed (IBV_EVENT_CQ_ERR)")),
    ("path migration request error", Verdict("candidate", "unknown", 45, "alternate path migration failed")),
    ("srq catastrophic error", Verdict("context")),
    ("port error", Verdict("candidate", "infrastructure", 70,
                           "the IB port of this node left the ACTIVE state (IBV_EVENT_PORT_ERR)")),
    ("rdma_cm_event_device_removal", Verdict("candidate", "infrastructure", 70, "the RDMA device was taken away "
                                             "under the connection: its driver reset or unloaded it, or a bond lost "
                                             "its ports (RDMA_CM_EVENT_DEVICE_REMOVAL)")),
)


def async_event_verdict(event: str) -> Verdict:
    """Device-fatal, QP-fatal and port errors are faults of the node that logs them; port active, GID,
    LID, P_Key, SM changes and client re-registration are fabric housekeeping (context)."""
    wanted = event.strip().lower()
    for name, verdict in _ASYNC_EVENTS:
        if wanted.startswith(name):
            return verdict
    return Verdict("context", meaning="an informational IB async event")


@decoder("net_ib_async_event")
def decode_async(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    event = str(sym.fields.get("event") or sym.fields.get("fatal_event") or "")
    if not event and "GID table changed" in extra["text"]:
        event = "GID table change"
    sym.fields["event"] = event.strip()
    sym.fields.pop("fatal_event", None)
    _apply(sym, async_event_verdict(event))
    return True


# --- verbs call failures (NCCL misc/ibvwrap.cc) ---------------------------------------------------
# ENOMEM as verbs, libfabric and their providers print it: a registration or pinning that ran out
_ENOMEM = re.compile(r"\(-12\)|RC: -12\b|Cannot allocate memory|ENOMEM|Unknown error -12\b")
_CASCADE_CALLS = ("ibv_get_async_event", "ibv_poll_cq", "ibv_post_send", "ibv_post_recv", "ibv_destroy",
                  "ibv_dereg_mr", "ibv_dealloc", "ibv_close_device", "ibv_ack")


def verbs_verdict(call: str, error: str) -> Verdict:
    """Setup calls (open/query device, create QP/CQ, register memory, move a QP to RTR/RTS) fail on
    configuration: GID index, routing, rails, locked-memory limits, GPUDirect modules; calls on a
    queue pair that already broke, and teardown calls, are consequences."""
    if call.startswith(_CASCADE_CALLS):
        return Verdict("cascade", meaning="a verbs call on a device or queue pair that already failed")
    if call == "ibv_modify_qp":
        return Verdict("candidate", "unknown", 45, "the queue pair could not be connected to its peer "
                       f"({error or 'no reason given'}): GID index, RoCE routing, rail or NIC mismatch")
    if call.startswith(("ibv_reg", "mlx5dv_reg")) and _ENOMEM.search(error):
        return Verdict("context", meaning="memory registration refused for want of lockable memory: a locked-memory "
                       "limit too low for the job's processes (ulimit -l), buffers sized past it (NCCL_BUFFSIZE), or "
                       "the host kernel's pinning; the line alone does not say which")
    if call.startswith(("ibv_reg", "mlx5dv_reg")):
        return Verdict("candidate", "unknown", 40, f"memory registration failed ({error or 'no reason given'}):"
                       " locked-memory limit, GPUDirect RDMA module (nvidia-peermem) or dmabuf support")
    return Verdict("candidate", "unknown", 40, f"{call} failed ({error or 'no reason given'}): RDMA resources "
                   "or device setup (locked-memory limits, device permissions in the container)")


@decoder("net_ibv_call_failed")
def decode_verbs(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    call = str(sym.fields.get("call") or sym.fields.pop("call2", "") or "")
    if not call:
        call = "ibv_open_device" if "open" in str(sym.fields.get("what", "")).lower() else "ibv_query_device"
    sym.fields["call"] = call
    _apply(sym, verbs_verdict(call, str(sym.fields.get("error", "")).strip()))
    return True


# --- libfabric setup (EFA, aws-ofi-nccl, MPICH's OFI netmod) -----------------------------------------
_MEMLOCK_ACTION = ("raise the locked-memory limit the job's processes get (ulimit -l unlimited on the node, "
                   "PropagateResourceLimitsExcept=MEMLOCK in slurm.conf, docker --ulimit memlock=-1): RDMA "
                   "registration of the transport's buffers needs it")
_REGISTER_ACTION = ("check the EFA/libfabric installation against the NCCL version (EFA installer >= 1.29.1 for "
                    "NCCL >= 2.19, or FI_EFA_SET_CUDA_SYNC_MEMOPS=0) and GPUDirect RDMA (nvidia-peermem or dmabuf)")


@decoder("net_ofi_setup")
def decode_ofi_setup(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """A libfabric endpoint, address vector, event queue or memory registration the transport could not set
    up: the node's RDMA configuration (locked-memory limit, provider and driver versions, devices given to a
    container), not a link that failed under traffic. ENOMEM here is the locked-memory limit, not the host
    out of memory."""
    text = extra["text"]
    if _ENOMEM.search(text):
        sym.fields["meaning"] = "RDMA resources could not be pinned: the locked-memory limit (ulimit -l)"
        sym.actions = (_MEMLOCK_ACTION,)
    elif "register memory" in text:
        sym.actions = (_REGISTER_ACTION,)
    return True


# --- PSM / PSM2 (InfiniPath, Omni-Path) -----------------------------------------------------------
_PSM_CONTEXTS_TAKEN = re.compile(r"(?i)Device or resource busy|Interrupted system call")
_PSM_FOLLOWS = re.compile(r"can't open hfi unit|unable to open an endpoint")


@decoder("psm_driver")
def decode_psm_driver(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """Whose a PSM adapter failure is, by assign_context's strerror: contexts all taken (EBUSY) or a profiler's
    signals (EINTR) are the job's; a port down or a driver refusing (EINVAL, no active unit) the node's; a
    line that only says the unit could not be opened follows the one that says why."""
    text = extra["text"]
    if _PSM_CONTEXTS_TAKEN.search(str(sym.fields.get("reason") or "")):
        _apply(sym, Verdict("candidate", "workload", 45, "every hardware context of the adapter taken by the "
                            "job's processes (ranks times endpoints or VCIs per node)", category="application"))
        sym.actions = ("use fewer processes or endpoints per node (MPICH's VCIs, PSM2_SHAREDCONTEXTS=1) so the "
                       "adapter's contexts suffice; the adapter is not at fault",)
    elif _PSM_FOLLOWS.search(text):
        _apply(sym, Verdict("cascade", meaning="the unit could not be opened; the line before says why"))
    elif "trying again" in text:
        _apply(sym, Verdict("context", meaning="a retry; the attempt that fails for good says why"))
    return True


# --- sockets (NCCL bootstrap / net_socket, c10d TCPStore) ----------------------------------------
_MISCONFIG = re.compile(r"(?i)network is unreachable|no route to host|cannot assign requested address|"
                        r"name or service not known|temporary failure in name resolution|no address associated|"
                        r"nodename nor servname|EADDRNOTAVAIL|ENETUNREACH|EHOSTUNREACH|"
                        r"address family not supported by protocol|EAFNOSUPPORT|"
                        # NCCL retries refused, timed-out and unreachable connects; any other errno fails at
                        # once (socketConnectCheck): an abort is the local stack refusing the address
                        r"Software caused connection abort|ECONNABORTED")
# a connection to a loopback address of another rank: a host name that resolves to 127.0.1.1 (Debian's
# /etc/hosts) or an interface choice that advertised loopback; nothing of another node's was reached
_LOOPBACK_PEER = re.compile(r"\[(?:127\.\d{1,3}\.\d{1,3}\.\d{1,3}|::1)\]:\d+|(?<![\d.])127\.0\.[01]\.1(?![\d.])")
# a link-local address (IPv4 169.254/16, IPv6 fe80::/10): an interface no other node routes to (a GH200's
# 169.254.3.1 host NIC, an ip6tnl or veth interface with only its fe80:: address) that the bootstrap or socket
# transport picked and advertised; a connect to it from another node reached nothing of the peer's
_LINK_LOCAL_PEER = re.compile(r"(?<![\d.])169\.254\.\d{1,3}\.\d{1,3}(?!\.?\d)|"
                              r"(?i:(?<![\w:])fe[89ab][0-9a-f]:[0-9a-f:]{1,40})")
_REFUSED = re.compile(r"(?i)connection refused|ECONNREFUSED")
_PEER_GONE = re.compile(r"(?i)connection refused|connection reset|broken pipe|closed by (?:remote )?peer|"
                        r"end of file|ECONNRESET|EPIPE|ECONNREFUSED")

_NO_INTERFACE = re.compile(r"(?i)no (?:usable listening |socket )?interface|no device found|No interface found in the "
                           r"same subnet|Invalid NCCL_COMM_ID|No valid .*pair found|getting address info|"
                           r"neither AF_INET|Unable to find (?:address|interface) for")
# torchelastic's C10dRendezvousBackend._call_store: any store call that raised while the rendezvous was being
# joined (the inner exception is often not printed)
_STORE_UNREACHABLE = re.compile(r"RendezvousConnectionError: The connection to the C10d store has failed")
_CONNECT_DEADLINE = re.compile(r"(?i)has timed out after .* while trying to connect|Timed out after \d+ seconds "
                               r"waiting for clients|wait timeout after")
# src/misc/socket.cc socketPollConnect: poll() on the connecting socket came back without POLLOUT, or failed
_POLL_NO_CONNECT = re.compile(r"socketPollConnect poll\(\) (?:returned -?\d+, no POLLOUT events|failed with error)")
_CONNECT_TIMED_OUT = re.compile(r"(?i)(?:failed to connect to|connect to|Connect to)\b.*(?:Connection timed out|"
                                r"errno: 110\b|ETIMEDOUT)")


def socket_verdict(text: str, one_node: bool = False) -> Verdict:
    """A peer that closed, reset or refused the connection, or a timeout, is a cascade of another rank
    dying or hanging; an unreachable network, a missing route, an address that is not local or a name
    that does not resolve is a configuration candidate (interface, MASTER_ADDR, firewall). A connection
    refused at a loopback address in a job of several nodes reached no peer at all (the host's name resolves
    to 127.0.1.1); one that was closed or reset was up, so the peer was there and went away (in a one-node
    job every peer is at a loopback address). A connect refused or timed out at an IPv4 link-local address in a job
    of several nodes, or timed out at an fe80:: one, went to an interface no other node routes to. A connect NCCL's
    socketPollConnect saw end without POLLOUT is a weak candidate naming no node, context in a one-node job."""
    if not one_node and _REFUSED.search(text) and _LOOPBACK_PEER.search(text):
        return Verdict("candidate", "unknown", 45, "the peer's address is a loopback address: the host name "
                       "resolves to 127.0.x.x (/etc/hosts) or the interface chosen is lo (GLOO_SOCKET_IFNAME / "
                       "NCCL_SOCKET_IFNAME)")
    link_local = _LINK_LOCAL_PEER.search(text) if not one_node else None
    if link_local and (_CONNECT_TIMED_OUT.search(text) or (_REFUSED.search(text) and link_local.group(0)[:1] == "1")):
        # (a refusal at an fe80:: address came from a neighbour on the same link, IPoIB included: a peer that was
        # there and went away, as at any other address)
        return Verdict("candidate", "unknown", 45, "the peer's address is link-local (169.254.x.x, fe80::): the "
                       "interface chosen is one no other node routes to (NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME, a "
                       "host-only or virtual interface)")
    if _MISCONFIG.search(text):
        return Verdict("candidate", "unknown", 40, "the address or interface chosen for the connection is "
                       "not usable from this host (interface selection, MASTER_ADDR, routing or DNS)")
    if _NO_INTERFACE.search(text):
        return Verdict("candidate", "unknown", 45, "no usable network interface or address: NCCL_SOCKET_IFNAME / "
                       "NCCL_COMM_ID configuration")
    if _STORE_UNREACHABLE.search(text):
        return Verdict("candidate", "unknown", 30, "the rendezvous store could not be reached at all (torchelastic's "
                       "'The connection to the C10d store has failed'): its host's address or port is not "
                       "reachable from here (MASTER_ADDR, a firewall, ports a container or cluster does not "
                       "expose), or the store's host was gone before the job began")
    if _POLL_NO_CONNECT.search(text):
        if one_node:
            return Verdict("context", meaning="a connection between the ranks of one host never completed: the "
                           "interface NCCL chose (NCCL_SOCKET_IFNAME: a VPN, docker or down interface), no fabric in "
                           "between")
        return Verdict("candidate", "unknown", 30, "the connection never completed (NCCL's socketPollConnect saw no "
                       "POLLOUT): the interface or address chosen is one the peer does not route back to "
                       "(NCCL_SOCKET_IFNAME), a firewall dropping the handshake, or a peer host that is down")
    if _CONNECT_DEADLINE.search(text):
        return Verdict("cascade", meaning="the rendezvous host never answered within the deadline: it died, "
                       "stalled or was never started")
    if _CONNECT_TIMED_OUT.search(text):
        return Verdict("candidate", "unknown", 35, "nothing answered at the address the connection was sent to: "
                       "a wrong MASTER_ADDR / interface, a firewall, or a host that is down")
    if _PEER_GONE.search(text):
        return Verdict("cascade", meaning="the peer closed the connection: it exited or was killed first")
    return Verdict("cascade", meaning="a socket error on the bootstrap or data connection")


@decoder("net_verbs_status")
def decode_verbs_status(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """Retry counters exceeded: nothing answered on the RDMA path (candidate); any other status follows a
    failure elsewhere (cascade). A provider that prints the status as a number (ionic's 'cqe with error 12')
    is read by its name."""
    status = _int(sym.fields.get("status"))
    if status is not None:
        sym.fields["status"], sym.fields["error"] = status, WC_STATUS_NAMES.get(status, f"status {status}")
    if "retry counter exceeded" in str(sym.fields.get("error", "")):
        _apply(sym, Verdict("candidate", "unknown", 35, "the RDMA peer or the path to it stopped answering "
                            "(a dead peer, a link, or a GID / RoCE setting that never worked)"))
    return True


@decoder("net_ofi_no_provider")
def decode_ofi_no_provider(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """libfabric's shared-memory provider that could not be created: most often a container's /dev/shm too small
    for it (host memory, the job's container setup), a little stronger than 'no provider' on its own."""
    if sym.fields.get("shm"):
        sym.category, sym.responsible, sym.strength = "host_oom", "workload", 40
        sym.notes.append("libfabric's shm provider needs room in /dev/shm: a container started with a small "
                         "--shm-size (64 MB by default) cannot create it")
    return True


@decoder("net_socket_error")
def decode_socket(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    _apply(sym, socket_verdict(extra["text"], one_node=len(ctx.job.nodes) == 1))
    return True


def listen_verdict(text: str) -> Verdict:
    """A server socket that cannot listen: the port is taken (another job or a leftover process on the
    same node and MASTER_PORT) or the address is not local."""
    if re.search(r"(?i)address already in use|EADDRINUSE|errno: 98\b", text):
        return Verdict("candidate", "workload", 55, "the rendezvous port is already in use on this node "
                       "(another job or a leftover process with the same MASTER_PORT)")
    return Verdict("candidate", "unknown", 45, "the rendezvous server could not listen on its address/port")


@decoder("net_c10d_listen_failed")
def decode_listen(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """The summary line ('[E socket.cpp] ... failed to listen on any local network address.') follows
    the per-address bind warnings that carry the errno: read them too."""
    _apply(sym, listen_verdict(" ".join([extra["text"], *line.preceding(4)])))
    return True


@decoder("c10d_store_barrier")
def decode_store_barrier(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """init_process_group's store-based barrier gave up: more workers joined it than the world size (a second launch
    on the same MASTER_ADDR:MASTER_PORT, or a store left over from an earlier run) is the job's launch; fewer is a
    rank that never came (crashed, still busy before it, or never started): a wait, whose cause is elsewhere."""
    joined, world = _int(sym.fields.get("joined")), _int(sym.fields.get("world_size"))
    if joined is not None and world is not None and joined > world:
        _apply(sym, Verdict("candidate", "workload", 50, "more processes joined the process group's barrier than its "
                            "world size: two launches on one MASTER_ADDR:MASTER_PORT, or workers an earlier run left "
                            "on that store", category="application"))
    else:
        _apply(sym, Verdict("cascade", meaning="some ranks never reached init_process_group: one crashed, was still "
                            "busy (a download, a preprocessing step on one rank) or was never started"))
    return True


# --- kernel: ConnectX port and cable state --------------------------------------------------------
@decoder("net_mlx5_port_module_event")
def decode_module(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """A plugged cable is the recovery (context); unplugged, disabled or failed takes the port down."""
    if str(sym.fields.get("status", "")).lower() == "cable plugged":
        _apply(sym, Verdict("context", meaning="the cable/transceiver came back"))
    return True


@decoder("net_tx_timeout")
def decode_tx_timeout(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """A queue paused by flow control from the network (ice's 'Fake Tx hang ... PFC storm' after it) is no fault
    of this NIC."""
    if any("Fake Tx hang detected" in text for text in line.iter_following(40)):
        _apply(sym, Verdict("context", meaning="the queue was paused by a PFC storm from the network, not this NIC"))
    return True


@decoder("net_bond_state")
def decode_bond(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """A bond with an active interface again is the recovery."""
    if sym.fields.get("state") == "active interface up":
        _apply(sym, Verdict("context", meaning="the bond has an active interface again"))
    return True


@decoder("remote_service")
def decode_remote_service(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """A web service the job could not reach: a 429 is the service limiting the job's own fan-out (the workload's),
    a 5xx the service's own failure, anything else the route, DNS or the service (no one named)."""
    status = str(sym.fields.get("status", ""))
    if status == "429":
        _apply(sym, Verdict("candidate", "workload", 45, "the service limited the job's requests (HTTP 429): every "
                            "rank downloading at once"))
    elif status.startswith("5"):
        _apply(sym, Verdict("candidate", "unknown", 45, f"the remote service failed (HTTP {status})"))
    return True


_MANAGEMENT_NIC = re.compile(r"(?<![\w-])(?:e1000e?|igb|igc)(?:[: ]|$)")


@decoder("nic_link_state")
def decode_nic_link(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """An Ethernet driver's 'NIC Link is Down' (Intel's e1000e, igb, igc, ixgbe, i40e, ice; Broadcom's bnxt_en): a
    fault of the port; 'Up' is its return, noted on the 'Down' it follows."""
    ifname = str(sym.fields.get("ifname", ""))
    if str(sym.fields.get("state", "")).lower() != "down":
        _apply(sym, Verdict("context", meaning="the link came back"))
    elif _MANAGEMENT_NIC.search(extra["text"]):
        # a 1 GbE controller (e1000e, igb, igc): a GPU node's management or BMC-side port, not the fabric its jobs'
        # collectives or storage ride; recorded, never the job's cause (W185: a flapping e1000e port took the blame
        # for an InfiniBand switch's failure)
        _apply(sym, Verdict("context", meaning="a management-class 1 GbE port went down, not the job's fabric"))
    else:
        note_link_back(ctx, sym, line, re.compile(rf"(?<![\w.-]){re.escape(ifname)}:? NIC Link is [Uu]p\b"),
                       re.compile(rf"(?<![\w.-]){re.escape(ifname)}:? NIC Link is [Dd]own\b"))
    return True


@decoder("net_link_state")
def decode_link(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """Only 'down' is a fault; 'up' is the recovery, noted on the 'down' it follows (:func:`note_link_back`)."""
    if str(sym.fields.get("state", "")).lower() != "down":
        _apply(sym, Verdict("context", meaning="the link came back"))
    else:
        ifname = str(sym.fields.get("ifname"))
        note_link_back(ctx, sym, line, line_end(f"{ifname}: Link up"), line_end(f"{ifname}: Link down"))
    return True


def line_end(text: str) -> re.Pattern[str]:
    """A pattern of ``text`` ending its line (blanks after it aside)."""
    return re.compile(re.escape(text) + r"\s*$")


LINK_BACK_REACH = 200  # lines below a link's 'down' searched for its return


def note_link_back(ctx: EngineContext, sym: Symptom, line: Line, back: re.Pattern[str], down: re.Pattern[str]) -> None:
    """Where the same port's return (``back``, searched in each line: 'mlx5_3: Port: 1 Link ACTIVE' at its end, 'eth1
    NIC Link is Up 1000 Mbps ...') follows the line of its going down within LINK_BACK_REACH lines of the file:
    ``back_active``, and ``back_after_s`` where both lines carry a stamp, the return is the kernel's (no other
    program's tag) in a log only the kernel writes, and the port did not go down (``down``) again below it or before
    it within the reach: a flapping port is a fault however short each flap (filter.recovered_link_flap reads it)."""
    timectx = time_context(ctx, sym.node)
    following = line.iter_following(LINK_BACK_REACH)
    for count, text in enumerate(following, 1):
        if not back.search(text):
            continue
        sym.fields["back_active"] = True
        sym.notes.append(f"the port came back {count} line(s) below")
        stamp = parse_line_time(text, timectx)
        origin = ctx.bundle.kernel_origin(sym.node)
        trusted = origin == "" or origin in TRUSTED_KERNEL_ORIGINS
        if stamp.time is None or sym.time is None or stamp.time < sym.time or not trusted \
                or stamp.tag not in (None, "kernel") or any(down.search(rest) for rest in following) \
                or any(down.search(above) for above in line.preceding(LINK_BACK_REACH)):
            return
        sym.fields["back_after_s"] = round((stamp.time - sym.time).total_seconds(), 3)
        return


# --- NCCL result codes surfaced by PyTorch --------------------------------------------------------
_NETWORK_LAST_ERROR = re.compile(r"(?i)Last (?:NCCL warning\(error\)|error):.*(?:socket|interface|NET/|connect|"
                                 r"Bootstrap|ibv_|address)")


# NCCL before 2.4 named each way of calling it wrongly (src/core.cu ncclGetErrorString until 2.3.5): what Horovod
# and TensorFlow print from a build against a mismatched NCCL ('ncclAllReduce failed: invalid data type')
_OLD_USAGE = ("invalid data type", "invalid reduction operation", "parameter mismatch between ranks",
              "invalid device pointer", "invalid device index", "lib wrapper not initialized")
# ncclGetErrorString's words for the caller's mistakes: ncclInvalidUsage and ncclInvalidArgument (a rank, count,
# pointer or type NCCL refuses; a CUDA failure inside NCCL is 'unhandled cuda error' instead)
_USAGE_RESULTS = ("invalid usage", "ncclinvalidusage", "invalid argument", "ncclinvalidargument", *_OLD_USAGE)


@decoder("net_nccl_result")
def decode_nccl_result(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """ncclInvalidUsage ('invalid usage', and before NCCL 2.4 its particular texts: 'invalid data type', ...) and
    ncclInvalidArgument ('invalid argument') are NCCL rejecting how it was called (duplicate GPUs per rank,
    mismatched communicator setup, a rank or count out of range, a build against another NCCL): a weak application
    candidate, unless the same line quotes NCCL's last warning naming a network/bootstrap problem, which the
    network rules judge. Every other result stays a cascade."""
    reason = " ".join(str(sym.fields.get(k, "")) for k in ("reason", "result", "call_reason")).lower()
    if any(text in reason for text in _USAGE_RESULTS) and not _NETWORK_LAST_ERROR.search(extra["text"]):
        _apply(sym, Verdict("candidate", "workload", 35, "NCCL rejected how it was called (ncclInvalidUsage, "
                            "ncclInvalidArgument)", category="application"))
    return True


# --- an assertion inside the interconnect's own software -------------------------------------------
# The source files of NCCL's network transports and plugins (net_ib.cc, net_socket.cc, aws-ofi-nccl's
# nccl_ofi_*.c, the Omni-Path PSM2 plugin's psm2_nccl_net.c) and of the fabric libraries under them (libfabric's
# prov/, UCX's ucp/uct/ucs, PSM2's ptl_*, rdma-core's providers, HCOLL, SHARP): a path component, so a program's
# own 'network.py' or 'netutils.c' stays the program's
_TRANSPORT_SOURCE = re.compile(
    r"(?i)(?:^|/)(?:net_(?:ib|socket)\.cc|[\w-]*nccl_net[\w-]*\.c\w*|nccl_ofi[\w-]*\.c\w*|psm2?_[\w-]+\.c|"
    r"ptl_(?:am|ips|self)/|prov/[\w-]+/|(?:ucp|uct|ucs)/|providers/(?:mlx[45]|efa|hfi1verbs)/|hcoll[\w-]*/|"
    r"sharp[\w-]*/)")
TRANSPORT_ASSERT = Verdict("candidate", "unknown", 40,
                           "an assertion inside the interconnect's software (an NCCL network plugin or fabric "
                           "library): that software's bug, or a fabric event it did not expect",
                           category="unknown", readings=("network", "application"))


@decoder("assert_site")
def decode_assert_site(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """A failed assertion is the asserting code's bug, except where that code is the interconnect's own software:
    then the fabric event the plugin did not expect is as likely, and both readings stand, no node blamed."""
    if _TRANSPORT_SOURCE.search(str(sym.fields.get("file", ""))):
        _apply(sym, TRANSPORT_ASSERT)
    return True
