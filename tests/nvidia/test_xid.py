"""Tests for the Xid / SXid line parsers, payload decoders and assessment (slurm_attrib.nvidia.xid).

Log lines are the real ones quoted in the research notes (xid-dcgm.md §A.1-A.4 and §C), with the
source given next to each group.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest

from slurm_attrib.nvidia.catalog import Catalog, load_catalog, parse_catalog
from slurm_attrib.nvidia.xid import (
    BUCKET_WORDS,
    SxidEvent,
    XidEvent,
    assess_fallen_off_bus,
    assess_sxid,
    assess_xid,
    caused_by_previous,
    decode_containment,
    decode_nvlink5,
    decode_xid74,
    decode_xid154,
    fallen_off_bus_event,
    normalise_pci,
    parse_fallen_off_bus,
    parse_gpu_uuid,
    parse_sxid,
    parse_xid,
)

# --------------------------------------------------------------------------------------------------
# parse_xid: (line, pci, code, gpu_instance, compute_instance, pid, process, message)

XID_LINES: list[tuple[str, str, int, int | None, int | None, int | None, str | None, str]] = [
    # A.1 driver format strings (kernel_rc.c / kern_gpu_ga100.c)
    (
        "NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9). RST: No, "
        "D-RST: No",
        "0000:01:00",
        94,
        5,
        None,
        7194,
        None,
        "Contained: CE User Channel (0x9). RST: No, D-RST: No",
    ),
    (
        "NVRM: Xid (PCI:0000:01:00): 94, pid=7062, Contained: CE User Channel (0x9). RST: No, D-RST: No",
        "0000:01:00",
        94,
        None,
        None,
        7062,
        None,
        "Contained: CE User Channel (0x9). RST: No, D-RST: No",
    ),
    (
        "NVRM: Xid (PCI:0000:01:00): 95, pid=7062, Uncontained: LTC TAG (0x2, 0x1). RST: Yes, D-RST: No",
        "0000:01:00",
        95,
        None,
        None,
        7062,
        None,
        "Uncontained: LTC TAG (0x2, 0x1). RST: Yes, D-RST: No",
    ),
    # old driver without 'PCI:' (pastebin 2012)
    (
        "NVRM: Xid (0000:01:00): 13, 0005 00000000 0000502d",
        "0000:01:00",
        13,
        None,
        None,
        None,
        None,
        "0005 00000000 0000502d",
    ),
    # 45 naming its cause (open-gpu-kernel-modules#1150), journalctl form
    (
        "kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous "
        "Xid 149",
        "0000:dc:00",
        45,
        None,
        None,
        1818990,
        "python3",
        "Ch 00000001 caused by previous Xid 149",
    ),
    # A.4 real lines
    (
        "NVRM: Xid (PCI:0000:01:00): 13, Graphics Exception: ESR 0x404000=0x80000002",
        "0000:01:00",
        13,
        None,
        None,
        None,
        None,
        "Graphics Exception: ESR 0x404000=0x80000002",
    ),
    (
        "NVRM: Xid (PCI:0000:b5:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on "
        "(GPC 1, TPC 3, SM 0): Out Of Range Address",
        "0000:b5:00",
        13,
        None,
        None,
        None,
        None,
        "Graphics SM Warp Exception on (GPC 1, TPC 3, SM 0): Out Of Range Address",
    ),
    (
        "[14328.198504] NVRM: Xid (PCI:0000:0a:00): 31, pid=13332, name=cuda_plot_k32_v, Ch 00000010, intr "
        "00000000. "
        "MMU Fault: ENGINE CE2 HUBCLIENT_CE0 faulted @ 0x7f29_5b8c9000. Fault is of type "
        "FAULT_PRIV_VIOLATION "
        "ACCESS_TYPE_VIRT_READ",
        "0000:0a:00",
        31,
        None,
        None,
        13332,
        "cuda_plot_k32_v",
        "Ch 00000010, intr 00000000. MMU Fault: ENGINE CE2 HUBCLIENT_CE0 faulted @ 0x7f29_5b8c9000. "
        "Fault is of type FAULT_PRIV_VIOLATION ACCESS_TYPE_VIRT_READ",
    ),
    (
        "[Fri Jan 29 23:42:34 2021] NVRM: Xid (PCI:0000:db:00): 31, pid=13641, Ch 00000008, intr 00000000. "
        "MMU Fault: "
        "ENGINE GRAPHICS GPCCLIENT_T1_10 faulted @ 0x7fd7_90743000. Fault is of type FAULT_PDE "
        "ACCESS_TYPE_VIRT_READ",
        "0000:db:00",
        31,
        None,
        None,
        13641,
        None,
        "Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_10 faulted @ 0x7fd7_90743000. "
        "Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
    ),
    (
        "[Wed Jan 27 23:04:35 2021] NVRM: Xid (PCI:0000:3d:00): 43, pid=35521, Ch 00000008",
        "0000:3d:00",
        43,
        None,
        None,
        35521,
        None,
        "Ch 00000008",
    ),
    (
        "[14370.687545] NVRM: Xid (PCI:0000:0a:00): 62, pid='<unknown>', name=<unknown>, 2023b230 20238a3a "
        "2023e8b6 "
        "2023eac4 2023ec3c 2023ea86 00000000 00000000",
        "0000:0a:00",
        62,
        None,
        None,
        None,
        None,
        "2023b230 20238a3a 2023e8b6 2023eac4 2023ec3c 2023ea86 00000000 00000000",
    ),
    (
        "[14370.688139] NVRM: Xid (PCI:0000:0a:00): 45, pid='<unknown>', name=<unknown>, Ch 00000008",
        "0000:0a:00",
        45,
        None,
        None,
        None,
        None,
        "Ch 00000008",
    ),
    (
        "Dec 23 23:30:56 rescue kernel: [ 179.437933] NVRM: Xid (PCI:0000:01:00): 32, Channel ID 00000005 "
        "intr 00008000",
        "0000:01:00",
        32,
        None,
        None,
        None,
        None,
        "Channel ID 00000005 intr 00008000",
    ),
    (
        "Dec 23 23:30:56 rescue kernel: [ 179.438803] NVRM: Xid (PCI:0000:01:00): 69, Class Error: ChId "
        "0005, "
        "Class 0000a097, Offset 00000d9c, Data ffffffff, ErrorCode 0000000c",
        "0000:01:00",
        69,
        None,
        None,
        None,
        None,
        "Class Error: ChId 0005, Class 0000a097, Offset 00000d9c, Data ffffffff, ErrorCode 0000000c",
    ),
    (
        "Dec  2 11:38:47 worker4 kernel: [  219.470994] NVRM: Xid (PCI:0000:07:00): 48, pid='<unknown>', "
        "name=<unknown>, An uncorrectable double bit error (DBE) has been detected on GPU in the "
        "framebuffer at "
        "physAddr 0x7fffa8860 partition 7, subpartition 1.",
        "0000:07:00",
        48,
        None,
        None,
        None,
        None,
        "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at physAddr "
        "0x7fffa8860 "
        "partition 7, subpartition 1.",
    ),
    (
        "Dec  2 11:38:47 worker4 kernel: [  219.471050] NVRM: Xid (PCI:0000:07:00): 64, pid='<unknown>', "
        "name=<unknown>, Dynamic Page Retirement: Blacklisting failed.  Page should have been blacklisted on "
        "boot(0x00000000007fffa8).",
        "0000:07:00",
        64,
        None,
        None,
        None,
        None,
        "Dynamic Page Retirement: Blacklisting failed.  Page should have been blacklisted on "
        "boot(0x00000000007fffa8).",
    ),
    (
        "NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to "
        "activate.",
        "0000:10:1c",
        63,
        None,
        None,
        1896,
        None,
        "Row Remapper: New row marked for remapping, reset gpu to activate.",
    ),
    (
        "[449410.332316] NVRM: Xid (PCI:0003:00:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal "
        "error "
        "detected on link 14(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
        "0003:00:00",
        74,
        None,
        None,
        None,
        None,
        "NVLink: fatal error detected on link 14(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
    ),
    (
        "[74889.644138] NVRM: Xid (PCI:0000:02:00): 79, GPU has fallen off the bus.",
        "0000:02:00",
        79,
        None,
        None,
        None,
        None,
        "GPU has fallen off the bus.",
    ),
    (
        "[Sun Feb 23 16:24:18 2025] NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout "
        "after 6s of "
        "waiting for RPC response from GPU4 GSP! Expected function 103 (GSP_RM_ALLOC) (0x2081 0x4).",
        "0000:9b:00",
        119,
        None,
        None,
        2024380,
        "nvidia-smi",
        "Timeout after 6s of waiting for RPC response from GPU4 GSP! Expected function 103 (GSP_RM_ALLOC) "
        "(0x2081 0x4).",
    ),
    (
        "[Sun Feb 23 16:27:12 2025] NVRM: Xid (PCI:0000:9b:00): 119, pid=1263500, name=cache_mgr_main, "
        "Timeout after "
        "6s of waiting for RPC response from GPU4 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20801813 "
        "0x4c).",
        "0000:9b:00",
        119,
        None,
        None,
        1263500,
        "cache_mgr_main",
        "Timeout after 6s of waiting for RPC response from GPU4 GSP! Expected function 76 (GSP_RM_CONTROL) "
        "(0x20801813 0x4c).",
    ),
    (
        "[Sun Apr 26 23:12:26 2026] NVRM: Xid (PCI:0001:6c:00): 119, pid=10200, name=NvmlTaskRunner, "
        "Timeout after 45s "
        "of waiting for RPC response from GPU5 GSP! Expected function 76 (GSP_RM_CONTROL) sequence 24174 "
        "(0x20801322 0x808).",
        "0001:6c:00",
        119,
        None,
        None,
        10200,
        "NvmlTaskRunner",
        "Timeout after 45s of waiting for RPC response from GPU5 GSP! Expected function 76 (GSP_RM_CONTROL) "
        "sequence "
        "24174 (0x20801322 0x808).",
    ),
    # names with ':' and '[]' (NVSentinel / GPUd tests)
    (
        "NVRM: Xid (PCI:0000:9b:00): 119, pid=91234, name=nvc:[driver], Timeout after 6s of waiting for RPC "
        "response "
        "from GPU4 GSP!",
        "0000:9b:00",
        119,
        None,
        None,
        91234,
        "nvc:[driver]",
        "Timeout after 6s of waiting for RPC response from GPU4 GSP!",
    ),
    # NVLink-5 (GPUd PRs #1160 / #1174)
    (
        "NVRM: Xid (PCI:0000:01:00): 144, SAW_MVB Nonfatal XC0 i0 Link 0 (0x00000001 0x00000008 0x00000000 "
        "0x00000000 0x00000000 0x00000000)",
        "0000:01:00",
        144,
        None,
        None,
        None,
        None,
        "SAW_MVB Nonfatal XC0 i0 Link 0 (0x00000001 0x00000008 0x00000000 0x00000000 0x00000000 0x00000000)",
    ),
    (
        "NVRM: Xid (PCI:0000:00:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x025001c6 0x00000000 "
        "0x00000000 "
        "0x00000000 0x00000000 0x00000000)",
        "0000:00:00",
        149,
        None,
        None,
        None,
        None,
        "NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x025001c6 0x00000000 0x00000000 0x00000000 0x00000000 "
        "0x00000000)",
    ),
    (
        "NVRM: Xid (PCI:0019:01:00): 149, NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x00000000 0x00000000 "
        "0x00000000 "
        "0x00000000 0x00000000)",
        "0019:01:00",
        149,
        None,
        None,
        None,
        None,
        "NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
    ),
    (
        "NVRM: Xid (PCI:0018:01:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 "
        "0x00000001 "
        "0x00000000 0x00100000 0x00000004)",
        "0018:01:00",
        145,
        None,
        None,
        None,
        None,
        "RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 0x00000001 0x00000000 0x00100000 "
        "0x00000004)",
    ),
    (
        "kernel: NVRM: Xid (PCI:0000:1b:00): 137, RLW_RXPIPE interrupt hit on link 11 on GPU0: PRIV Error",
        "0000:1b:00",
        137,
        None,
        None,
        None,
        None,
        "RLW_RXPIPE interrupt hit on link 11 on GPU0: PRIV Error",
    ),
    # C.3 XID 154 (NVSentinel parser test)
    (
        "NVRM: Xid (PCI:0008:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset "
        "Required)",
        "0008:01:00",
        154,
        None,
        None,
        None,
        None,
        "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)",
    ),
    # MIG compute instance, upper-case hex, trailing comma-free message
    (
        "NVRM: Xid (PCI:0000:3B:00 GPU-I:05 GPU-CI:01): 43, pid=4242, name=python3, Ch 00000010",
        "0000:3b:00",
        43,
        5,
        1,
        4242,
        "python3",
        "Ch 00000010",
    ),
    (
        "NVRM: Xid (PCI:0000:3b:00 GPU-I:13): 31, pid='<unknown>', name=<unknown>, Ch 00000002",
        "0000:3b:00",
        31,
        13,
        None,
        None,
        None,
        "Ch 00000002",
    ),
    # bare code
    ("NVRM: Xid (PCI:0000:3b:00): 79", "0000:3b:00", 79, None, None, None, None, ""),
    # pid without quotes and a name only
    (
        "NVRM: Xid (PCI:0000:3b:00): 13, pid=<unknown>, name=torchrun, Graphics Exception",
        "0000:3b:00",
        13,
        None,
        None,
        None,
        "torchrun",
        "Graphics Exception",
    ),
]


@pytest.mark.parametrize(
    ("line", "pci", "code", "gpu_instance", "compute_instance", "pid", "process", "message"), XID_LINES
)
def test_parse_xid(
    line: str,
    pci: str,
    code: int,
    gpu_instance: int | None,
    compute_instance: int | None,
    pid: int | None,
    process: str | None,
    message: str,
) -> None:
    assert parse_xid(line) == XidEvent(pci, code, gpu_instance, compute_instance, pid, process, message)


GARBAGE = [
    "",
    " ",
    "NVRM: Xid",
    "NVRM: Xid (PCI:0000:3b:00):",
    "NVRM: Xid (PCI:zzzz:3b:00): 13, foo",
    "NVRM: Xid (PCI:0000:3b): 13, foo",
    "NVRM: Xid (PCI:0000:3b:00): abc, foo",
    "NVRM: Xid (PCI:0000:3b:00): 13abc, foo",
    "NVRM: Xid (43, pid: 5678): software fault",  # a format the driver never prints
    "NVRM: GPU at PCI:0000:01:00: GPU-bc0fa0b9-cac2-f507-b715-9bebdb69c71e",
    "nvidia-nvswitch0: SXid (PCI:0000:06:00.0): 20009, Non-fatal, Link 04 RX Short Error Rate",
    "\x00\xff\ufffd" * 50,
    "(((((((((((((((((((((((((((((((((((((((",
    "0x" * 5000,
    "Xid " * 5000,
]


@pytest.mark.parametrize("text", GARBAGE)
def test_garbage_returns_none(text: str) -> None:
    assert parse_xid(text) is None
    assert decode_xid74(text) is None
    assert decode_nvlink5(149, text, None) is None
    assert decode_xid154(text) is None
    assert decode_containment(text) is None
    assert caused_by_previous(text) is None
    if "SXid" not in text:
        assert parse_sxid(text) is None
    if "GPU at PCI" not in text:
        assert parse_gpu_uuid(text) is None
    assert parse_fallen_off_bus(text) is None


def test_long_hostile_input_is_fast() -> None:
    hostile = [
        "NVRM: Xid (PCI:0000:3b:00): 13, pid=1, name=" + "a, " * 20000,
        "Contained: " + " " * 20000 + "x",
        "Contained: " + "(" * 20000,
        "link 1(" + "0x0, " * 20000,
        "A Fatal XC0 i0 Link 1 (" + "0x0 " * 20000,
        "NVRM: The NVIDIA GPU 0000:b3:00.0" + " NVRM:" * 20000,
    ]
    start = time.perf_counter()
    for text in hostile:
        parse_xid(text)
        decode_containment(text)
        decode_xid74(text)
        decode_nvlink5(149, text, None)
        parse_fallen_off_bus(text)
    assert time.perf_counter() - start < 2.0


# --------------------------------------------------------------------------------------------------
# GPU UUID, SXid, fallen off the bus, PCI normalisation


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "Dec 23 23:30:56 rescue kernel: [ 179.437927] NVRM: GPU at PCI:0000:01:00: "
            "GPU-bc0fa0b9-cac2-f507-b715-9bebdb69c71e",
            ("0000:01:00", "GPU-bc0fa0b9-cac2-f507-b715-9bebdb69c71e"),
        ),
        (
            "[74889.644112] NVRM: GPU at PCI:0000:02:00: GPU-660d987e-5b28-3bf6-2a2d-1d5ecae7f6df",
            ("0000:02:00", "GPU-660d987e-5b28-3bf6-2a2d-1d5ecae7f6df"),
        ),
        (
            "[Sun Feb 23 16:24:18 2025] NVRM: GPU at PCI:0000:9b:00: "
            "GPU-509665ad-b600-ac93-3616-d754b23d636d",
            ("0000:9b:00", "GPU-509665ad-b600-ac93-3616-d754b23d636d"),
        ),
        (
            "NVRM: GPU at PCI:0000:9B:00: GPU-509665ad-b600-ac93-3616-d754b23d636d",
            ("0000:9b:00", "GPU-509665ad-b600-ac93-3616-d754b23d636d"),
        ),
        ("[Sun Feb 23 16:24:18 2025] NVRM: GPU Board Serial Number: 1650124014249", None),
        ("NVRM: GPU at PCI:garbage: GPU-1234", None),
    ],
)
def test_parse_gpu_uuid(line: str, expected: tuple[str, str] | None) -> None:
    assert parse_gpu_uuid(line) == expected


SXID_LINES: list[tuple[str, SxidEvent]] = [
    (
        "[73309.599396] nvidia-nvswitch0: SXid (PCI:0000:06:00.0): 20009, Non-fatal, Link 04 RX Short Error "
        "Rate",
        SxidEvent(0, "0000:06:00.0", 20009, False, 4, "RX Short Error Rate"),
    ),
    (
        "[ 1108.858286] nvidia-nvswitch0: SXid (PCI:0000:c3:00.0): 24007, Fatal, Link 28 sourcetrack "
        "timeout error "
        "(First)",
        SxidEvent(0, "0000:c3:00.0", 24007, True, 28, "sourcetrack timeout error (First)"),
    ),
    (
        "[123] nvidia-nvswitch3: SXid (PCI:0000:c1:00.0): 28006, Non-fatal, Link 46 MC TS crumbstore MCTO "
        "(First)",
        SxidEvent(3, "0000:c1:00.0", 28006, False, 46, "MC TS crumbstore MCTO (First)"),
    ),
    (
        "nvidia-nvswitch0: SXid (PCI:0004:00:00.0): 26008, SOE Watchdog error",
        SxidEvent(0, "0004:00:00.0", 26008, None, None, "SOE Watchdog error"),
    ),
    (
        "nvidia-nvswitch0: SXid (PCI:0004:00:00.0): 26006, SOE HALTED",
        SxidEvent(0, "0004:00:00.0", 26006, None, None, "SOE HALTED"),
    ),
    (
        "[38889.018130] nvidia-nvswitch0: SXid (PCI:0000:c3:00.0): 12033, Severity 1 Engine instance 00 "
        "Sub-engine "
        "instance 00",
        SxidEvent(
            0, "0000:c3:00.0", 12033, None, None, "Severity 1 Engine instance 00 Sub-engine instance 00"
        ),
    ),
    (
        "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error "
        "(First)",
        SxidEvent(3, "0000:05:00.0", 12028, False, 32, "egress non-posted PRIV error (First)"),
    ),
    (
        "[131453.740743] nvidia-nvswitch0: SXid (PCI:0000:00:00.0): 20034, Fatal, Link 30 LTSSM Fault Up",
        SxidEvent(0, "0000:00:00.0", 20034, True, 30, "LTSSM Fault Up"),
    ),
    ("nvidia-nvswitch1: SXid (PCI:0000:C3:00.1): 22011", SxidEvent(1, "0000:c3:00.1", 22011, None, None, "")),
]


@pytest.mark.parametrize(("line", "expected"), SXID_LINES)
def test_parse_sxid(line: str, expected: SxidEvent) -> None:
    assert parse_sxid(line) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("NVRM: GPU 0000:18:00.0: GPU has fallen off the bus.", "0000:18:00"),
        ("[ 99.1] NVRM: GPU 0000:AB:00.0: GPU has fallen off the bus.", "0000:ab:00"),
        ("[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0", "0000:b3:00"),
        (
            "NVRM: The NVIDIA GPU 0000:b3:00.0\n               NVRM: (PCI ID: 10de:26b5) installed in this "
            "system has\n"
            "               NVRM: fallen off the bus and is not responding to commands.",
            "0000:b3:00",
        ),
        (
            "NVRM: The NVIDIA GPU 0000:b3:00.0 NVRM: (PCI ID: 10de:26b5) installed in this system has NVRM: "
            "fallen off "
            "the bus and is not responding to commands.",
            "0000:b3:00",
        ),
        ("[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s).", None),
        (
            "NVRM: The NVIDIA GPU 0000:01:00.0 (PCI ID: 10de:1234) installed in this system is not supported",
            None,
        ),
        ("NVRM: Xid (PCI:0000:02:00): 79, GPU has fallen off the bus.", None),  # parse_xid's business
        ("GPU has fallen off the bus", None),
    ],
)
def test_parse_fallen_off_bus(text: str, expected: str | None) -> None:
    assert parse_fallen_off_bus(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("00000000:0C:00.0", "0000:0c:00"),
        ("0000:0c:00", "0000:0c:00"),
        ("PCI:0000:0C:00", "0000:0c:00"),
        ("0000:c3:00.0", "0000:c3:00"),
        ("0019:01:00", "0019:01:00"),
        (" 0C:00.0 ", "0000:0c:00"),
        ("00000001:6C:00.0", "0001:6c:00"),
    ],
)
def test_normalise_pci(text: str, expected: str) -> None:
    assert normalise_pci(text) == expected


@pytest.mark.parametrize("text", ["", "garbage", "0000:zz:00", "0000:0c:00.9", "PCI:"])
def test_normalise_pci_rejects_garbage(text: str) -> None:
    with pytest.raises(ValueError):
        normalise_pci(text)


# --------------------------------------------------------------------------------------------------
# XID 74


def test_decode_xid74_worked_example() -> None:
    decoded = decode_xid74("NVLink: fatal error detected on link 14(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)")
    assert decoded is not None
    assert decoded.link == 14
    assert decoded.registers == (0, 0, 0x10000, 0, 0, 0, 0)
    assert [(b.register, b.bit, b.bit_class) for b in decoded.bits] == [(3, 16, "report_if_repeated")]
    assert decoded.bits[0].guidance == "if repeated, run field diags and report"
    assert decoded.worst_class == "report_if_repeated"


@pytest.mark.parametrize(
    ("registers", "bits", "worst"),
    [
        ("0x1, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0", [(1, 0, "ignore")], "ignore"),
        (
            "0x100002, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0",
            [(1, 1, "sympathetic"), (1, 20, "sympathetic")],
            "sympathetic",
        ),
        (
            "0x0, 0x0, 0x0, 0x40000, 0x0, 0x0, 0x0",
            [(4, 18, "sympathetic_fabric_reset")],
            "sympathetic_fabric_reset",
        ),
        (
            "0x200001, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0",
            [(1, 0, "ignore"), (1, 21, "marginal_signal_integrity")],
            "marginal_signal_integrity",
        ),
        ("0x4, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0", [(1, 2, "unlisted")], "unlisted"),
        ("0x0, 0x1, 0x0, 0x0, 0x0, 0x0, 0x80000000", [(2, 0, "unlisted"), (7, 31, "unlisted")], "unlisted"),
        (
            "0x0, 0x0, 0x0, 0x0, 0x100000, 0x0, 0x0",
            [(5, 20, "ecc_threshold_no_uncorrectable")],
            "ecc_threshold_no_uncorrectable",
        ),
        ("0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0", [], "none"),
    ],
)
def test_decode_xid74_bits(registers: str, bits: list[tuple[int, int, str]], worst: str) -> None:
    decoded = decode_xid74(f"NVLink: fatal error detected on link 3({registers})")
    assert decoded is not None
    assert [(b.register, b.bit, b.bit_class) for b in decoded.bits] == bits
    assert decoded.worst_class == worst
    unlisted = [b for b in decoded.bits if b.bit_class == "unlisted"]
    assert all("report a bug" in b.guidance for b in unlisted)


# --------------------------------------------------------------------------------------------------
# XID 144-150


def _nvl5(intrinfo: str, status: str, unit: str = "NETIR_LINK_EVT", sev: str = "Fatal") -> str:
    return f"{unit} {sev} XC0 i0 Link 3 ({intrinfo} {status} 0x00000000 0x00000000 0x00000000 0x00000000)"


@pytest.mark.parametrize(
    ("code", "payload", "driver", "branch", "reason", "subcode", "action", "investigatory", "link_down"),
    [
        # C.2 worked examples, driver unknown
        (
            149,
            _nvl5("0x025001c6", "0x00000000"),
            None,
            "v1",
            "only v1 matched",
            "NETIR_LINK_EVT/NETIR_LINK_DOWN",
            "RESET_GPU",
            "INVESTIGATE_PEER_DEVICE",
            37,
        ),
        (
            149,
            _nvl5("0x026001c6", "0x00000000"),
            None,
            "v1",
            "only v1 matched",
            "NETIR_LINK_EVT/NETIR_LINK_DOWN",
            "IGNORE",
            "INVESTIGATE_SW/USER",
            38,
        ),
        (
            149,
            _nvl5("0x000fe406", "0x00000000", "NETIR"),
            None,
            "v1",
            "only v1 matched",
            "NETIR/NETIR_INT",
            "RESET_GPU",
            "SYMPATHETIC_REPORT_SOLO",
            None,
        ),
        (
            145,
            _nvl5("0x0409a0c2", "0x00000008", "RLW_RXPIPE", "Nonfatal"),
            None,
            "v1",
            "only v1 matched",
            "RLW_RXPIPE",
            "IGNORE",
            "CONTACT_SUPPORT",
            None,
        ),
        (
            145,
            _nvl5("0x04082907", "0x00000008", "RLW_SRC_TRACK", "Nonfatal"),
            None,
            "v2",
            "only v2 matched",
            "RLW_SRC_TRACK",
            "XID_154_EVAL",
            "IGNORE",
            None,
        ),
        (
            149,
            _nvl5("0x002001c6", "0x00000000"),
            None,
            "v1",
            "only v1 matched",
            "NETIR_LINK_EVT/NETIR_LINK_DOWN",
            "RESET_GPU",
            "INVESTIGATE_LINK_SI",
            2,
        ),
        (
            144,
            _nvl5("0x00000001", "0x00000008", "SAW_MVB", "Nonfatal"),
            None,
            "v2",
            "only v2 matched",
            "SAW_MVB",
            "IGNORE",
            "CONTACT_SUPPORT",
            None,
        ),
        # known driver
        (
            149,
            _nvl5("0x025001c6", "0x00000000"),
            "570.86.15",
            "v1",
            "driver 570.86.15",
            "NETIR_LINK_EVT/NETIR_LINK_DOWN",
            "RESET_GPU",
            "INVESTIGATE_PEER_DEVICE",
            37,
        ),
        (
            149,
            _nvl5("0x002001c6", "0x00000000"),
            "R570",
            "v1",
            "driver R570",
            "NETIR_LINK_EVT/NETIR_LINK_DOWN",
            "RESET_GPU",
            "INVESTIGATE_LINK_SI",
            2,
        ),
        (
            149,
            _nvl5("0x02500011", "0x00000000", "NETIR_LINK_DOWN"),
            "575.51.03",
            "v2",
            "driver 575.51.03",
            "NETIR_LINK_EVT/NETIR_LINK_DOWN",
            "RESET_GPU",
            "INVESTIGATE_PEER_DEVICE",
            37,
        ),
        (
            145,
            _nvl5("0x04082907", "0x00000008", "RLW_SRC_TRACK", "Nonfatal"),
            "580.65.06",
            "v2",
            "driver 580.65.06",
            "RLW_SRC_TRACK",
            "XID_154_EVAL",
            "IGNORE",
            None,
        ),
        (
            149,
            _nvl5("0x02a001c6", "0x00000000"),
            "560.35.03",
            "v1",
            "driver 560.35.03",
            "NETIR_LINK_EVT/NETIR_LINK_DOWN",
            "RESET_GPU",
            "INVESTIGATE_LINK_SI_AND_CABLES",
            42,
        ),
        (
            149,
            _nvl5("0x00000226", "0x00000002", "NETIR_BER_EVENT", "Nonfatal"),
            "570.1",
            "v1",
            "driver 570.1",
            "NETIR_BER_EVENT",
            "IGNORE",
            "INVESTIGATE_LINK_SI_AND_CABLES",
            None,
        ),
        # slash in the printed unit
        (
            146,
            _nvl5("0x00000009", "0x00000004", "TLW_CTRL/TLW_X", "Fatal"),
            "575",
            "v2",
            "driver 575",
            "TLW_CTRL",
            "RESET_GPU",
            "CONTACT_SUPPORT",
            None,
        ),
    ],
)
def test_decode_nvlink5_rows(
    code: int,
    payload: str,
    driver: str | None,
    branch: str,
    reason: str,
    subcode: str,
    action: str,
    investigatory: str,
    link_down: int | None,
) -> None:
    decoded = decode_nvlink5(code, payload, driver)
    assert decoded is not None
    assert decoded.note is None
    assert (decoded.branch, decoded.branch_reason) == (branch, reason)
    row = decoded.row
    assert row is not None
    assert (row.subcode, row.action, row.investigatory) == (subcode, action, investigatory)
    assert decoded.link_down_reason == link_down
    assert row.branch == branch


def test_decode_nvlink5_fields() -> None:
    line = XID_LINES[[line[2] for line in XID_LINES].index(145)][0]
    event = parse_xid(line)
    assert event is not None
    decoded = decode_nvlink5(event.code, event.message, None)
    assert decoded is not None
    assert decoded.unit == "RLW_RXPIPE"
    assert decoded.fatal is False
    assert (decoded.cross_contain, decoded.injected, decoded.link) == (0, 0, 13)
    assert (decoded.intrinfo, decoded.error_status) == (0x0409A0C2, 0x8)
    assert decoded.debug_data == (0x1, 0x0, 0x00100000, 0x4)
    assert decoded.row is not None
    assert (decoded.row.severity, decoded.row.hw_sw, decoded.row.impact) == (
        "Non-fatal",
        "HW/SW",
        "Local: none; / Remote: none",
    )
    assert decoded.row.name == "RLW_RXPIPE"


def test_decode_nvlink5_link_minus_one_and_fatal_flag() -> None:
    payload = _nvl5("0x000fe406", "0x00000000", "NETIR", "Fatal").replace("Link 3", "Link -1")
    decoded = decode_nvlink5(149, payload, None)
    assert decoded is not None
    assert decoded.link == -1 and decoded.fatal is True


def test_decode_nvlink5_branch_names() -> None:
    v1 = decode_nvlink5(149, _nvl5("0x025001c6", "0x0"), "570.86.15")
    v2 = decode_nvlink5(149, _nvl5("0x02500011", "0x0"), "575.51.03")
    assert v1 is not None and v1.row is not None and v1.row.name == "NETIR_LINK_EVT"
    assert v2 is not None and v2.row is not None and v2.row.name == "NETIR_LINK_DOWN"


def test_decode_nvlink5_promoted_row() -> None:
    # RLW_RXPIPE status 0x1 is 'Non-fatal*': bit 10 set selects Action 2 (RESET_GPU)
    plain = decode_nvlink5(145, _nvl5("0x000000c2", "0x00000001", "RLW_RXPIPE", "Nonfatal"), "570.1")
    promoted = decode_nvlink5(145, _nvl5("0x000004c2", "0x00000001", "RLW_RXPIPE", "Nonfatal"), "570.1")
    assert plain is not None and plain.row is not None
    assert (plain.row.action, plain.row.promoted) == ("IGNORE", False)
    assert promoted is not None and promoted.row is not None
    assert (promoted.row.action, promoted.row.promoted) == ("RESET_GPU", True)


def test_decode_nvlink5_v1_duplicates_collapse() -> None:
    # v1 cannot tell TLW_RX_PIPE0 from TLW_RX_PIPE1 (same v1 mask); both decode to the same outcome
    decoded = decode_nvlink5(146, _nvl5("0x00000143", "0x00000004", "TLW_RX", "Fatal"), "570.1")
    assert decoded is not None and decoded.row is not None
    assert decoded.row.name == "TLW_RX"
    assert decoded.row.action == "RESET_GPU"


@pytest.mark.parametrize(
    ("code", "payload", "driver", "branch", "note_part"),
    [
        (149, _nvl5("0x025001c6", "0x00000000"), "575.51.03", "v2", "no v2 row"),  # v1 value, v2 driver
        (149, _nvl5("0x00000000", "0x00000000"), None, None, "in v1 or v2"),
        (
            145,
            _nvl5("0x04082907", "0x00000003", "RLW_SRC_TRACK"),
            None,
            None,
            "in v1 or v2",
        ),  # unlisted status
        (150, _nvl5("0x00000000", "0x00000000", "MSE"), "570.1", "v1", "ambiguous"),  # two MSE rows
        (150, _nvl5("0x00000000", "0x00000000", "MSE"), None, None, "ambiguous"),
    ],
)
def test_decode_nvlink5_no_single_row(
    code: int, payload: str, driver: str | None, branch: str | None, note_part: str
) -> None:
    decoded = decode_nvlink5(code, payload, driver)
    assert decoded is not None
    assert decoded.row is None
    assert decoded.branch == branch
    assert decoded.note is not None and note_part in decoded.note
    assert decoded.link_down_reason is None


def test_decode_nvlink5_same_row_in_both_branches() -> None:
    decoded = decode_nvlink5(150, _nvl5("0x00000000", "0xffffffff", "MSE"), None)
    assert decoded is not None and decoded.row is not None
    assert decoded.branch is None
    assert decoded.branch_reason == "v1 and v2 matched the same row"
    assert decoded.row.subcode == "MSE Degraded"


def _ambiguous_catalog() -> Catalog:
    doc: dict[str, Any] = {
        "source": ["x"],
        "retrieved": "2026-07",
        "built": "2026-12-02",
        "xids": [],
        "nvlink5_decode_rules": [
            {
                "xid": 149,
                "subcode": "A",
                "intrinfo_mask_v1": "0110",
                "intrinfo_mask_v2": "1111",
                "error_status": [],
                "action": "RESET_GPU",
                "investigatory": "CONTACT_SUPPORT",
                "severity": "Fatal",
            },
            {
                "xid": 149,
                "subcode": "B",
                "intrinfo_mask_v1": "1111",
                "intrinfo_mask_v2": "0110",
                "error_status": [],
                "action": "IGNORE",
                "investigatory": "IGNORE",
                "severity": "Non-fatal",
            },
        ],
        "xid74_register_bits": [],
        "xid154_actions": [],
        "nvml_gpu_recovery_action": {},
    }
    return parse_catalog(copy.deepcopy(doc))


def test_decode_nvlink5_ambiguous_between_branches() -> None:
    catalog = _ambiguous_catalog()
    decoded = decode_nvlink5(149, _nvl5("0x00000006", "0x0"), None, catalog)
    assert decoded is not None
    assert decoded.row is None and decoded.branch is None
    assert {m.subcode for m in decoded.candidates} == {"A", "B"}
    assert decoded.note is not None and "driver version" in decoded.note
    known = decode_nvlink5(149, _nvl5("0x00000006", "0x0"), "570.1", catalog)
    assert known is not None and known.row is not None and known.row.subcode == "A"


@pytest.mark.parametrize("code", [74, 143, 151, 0])
def test_decode_nvlink5_other_codes(code: int) -> None:
    assert decode_nvlink5(code, _nvl5("0x025001c6", "0x0"), None) is None


@pytest.mark.parametrize(
    "payload",
    [
        "NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x025001c6)",  # one word only
        "NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x1025001c6 0x0)",  # wider than 32 bits
        "NETIR_LINK_EVT Sometimes XC0 i0 Link 00 (0x025001c6 0x0)",
        "NETIR_LINK_EVT Fatal XC0 Link 00 (0x025001c6 0x0)",
    ],
)
def test_decode_nvlink5_bad_payload(payload: str) -> None:
    assert decode_nvlink5(149, payload, None) is None


@pytest.mark.parametrize("driver", ["", "unknown", "n/a"])
def test_decode_nvlink5_unparseable_driver_is_unknown(driver: str) -> None:
    decoded = decode_nvlink5(149, _nvl5("0x025001c6", "0x0"), driver)
    assert decoded is not None and decoded.branch_reason == "only v1 matched"


# --------------------------------------------------------------------------------------------------
# XID 154, 94/95, 45


@pytest.mark.parametrize(
    ("text", "from_code", "from_text", "to_code", "to_text", "to_nvml", "known"),
    [
        (
            "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)",
            0,
            "None",
            1,
            "GPU Reset Required",
            "GPU_RECOVERY_ACTION_GPU_RESET",
            True,
        ),
        (
            "Xid 154 GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)",
            0,
            "None",
            2,
            "Node Reboot Required",
            "GPU_RECOVERY_ACTION_NODE_REBOOT",
            True,
        ),
        (
            "GPU recovery action changed from 0x1 (GPU Reset Required) to 0x4 (Drain and Reset)",
            1,
            "GPU Reset Required",
            4,
            "Drain and Reset",
            "GPU_RECOVERY_ACTION_DRAIN_AND_RESET",
            True,
        ),
        (
            "GPU recovery action changed from 0x0 (None) to 0x2 (OS Reboot)",
            0,
            "None",
            2,
            "OS Reboot",
            "GPU_RECOVERY_ACTION_NODE_REBOOT",
            False,
        ),
        (
            "GPU recovery action changed from 0x0 (None) to 0x10 (PF FLR)",
            0,
            "None",
            16,
            "PF FLR",
            None,
            False,
        ),
    ],
)
def test_decode_xid154(
    text: str, from_code: int, from_text: str, to_code: int, to_text: str, to_nvml: str | None, known: bool
) -> None:
    decoded = decode_xid154(text)
    assert decoded is not None
    assert (decoded.from_code, decoded.from_text, decoded.to_code, decoded.to_text) == (
        from_code,
        from_text,
        to_code,
        to_text,
    )
    assert decoded.from_nvml == load_catalog().nvml_recovery_actions.get(from_code)
    assert decoded.to_nvml == to_nvml
    assert decoded.to_known_text is known


@pytest.mark.parametrize(
    ("text", "contained", "unit", "ids", "addr", "rst", "drst"),
    [
        (
            "Contained: CE User Channel (0x9). RST: No, D-RST: No",
            True,
            "CE User Channel",
            (9,),
            None,
            False,
            False,
        ),
        ("Uncontained: LTC TAG (0x2, 0x1). RST: Yes, D-RST: No", False, "LTC TAG", (2, 1), None, True, False),
        (
            "Uncontained: FBHUB DRAM (0x3, 0x0). physAddr: 0x7fffa886 RST: Yes, D-RST: Yes",
            False,
            "FBHUB DRAM",
            (3, 0),
            0x7FFFA886,
            True,
            True,
        ),
        ("Contained: SM (0x1). RST: No, D-RST: Yes", True, "SM", (1,), None, False, True),
        ("Uncontained: GSP. RST: Yes, D-RST: No", False, "GSP", (), None, True, False),
        (
            "pid=7194, Contained: CE User Channel (0x9). RST: No, D-RST: No",
            True,
            "CE User Channel",
            (9,),
            None,
            False,
            False,
        ),
    ],
)
def test_decode_containment(
    text: str, contained: bool, unit: str, ids: tuple[int, ...], addr: int | None, rst: bool, drst: bool
) -> None:
    decoded = decode_containment(text)
    assert decoded is not None
    assert (decoded.contained, decoded.unit, decoded.ids, decoded.phys_addr) == (contained, unit, ids, addr)
    assert (decoded.reset_required, decoded.drain_and_reset_required) == (rst, drst)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Ch 00000001 caused by previous Xid 149", 149),
        ("Ch 00000001 caused by previous Xid 145", 145),
        ("Ch 00000008", None),
    ],
)
def test_caused_by_previous(text: str, expected: int | None) -> None:
    assert caused_by_previous(text) == expected


# --------------------------------------------------------------------------------------------------
# assessment


def _event(code: int, message: str = "", pci: str = "0000:3b:00") -> XidEvent:
    return XidEvent(pci, code, None, None, None, None, message)


@pytest.mark.parametrize(
    ("line", "driver", "role", "category", "responsible", "strength", "summary_part"),
    [
        (
            XID_LINES[0][0],
            None,
            "candidate",
            "gpu_memory",
            "infrastructure",
            80,
            "contained error in ce user channel",
        ),
        (XID_LINES[2][0], None, "candidate", "gpu_memory", "infrastructure", 85, "gpu reset required"),
        (XID_LINES[4][0], None, "teardown", "application", "workload", 10, "caused by previous xid 149"),
        (XID_LINES[5][0], None, "candidate", "application", "workload", 40, "xid 13"),
        (
            "NVRM: Xid (PCI:0000:3d:00): 43, pid=35521, Ch 00000008",
            None,
            "teardown",
            "application",
            "workload",
            10,
            "gpu healthy",
        ),
        (
            "NVRM: Xid (PCI:0000:0a:00): 62, pid=1, 2023b230",
            None,
            "candidate",
            "gpu_hardware",
            "infrastructure",
            80,
            "xid 62",
        ),
        (
            "NVRM: Xid (PCI:0000:07:00): 48, pid=1, DBE",
            None,
            "candidate",
            "gpu_memory",
            "infrastructure",
            80,
            "xid 48",
        ),
        (
            "NVRM: Xid (PCI:0000:07:00): 64, pid=1, x",
            None,
            "candidate",
            "gpu_memory",
            "infrastructure",
            80,
            "xid 64",
        ),
        (
            "NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row",
            None,
            "context",
            "gpu_memory",
            "infrastructure",
            0,
            "xid 63",
        ),
        ("NVRM: Xid (PCI:0000:10:1c): 92, x", None, "context", "gpu_memory", "infrastructure", 0, "xid 92"),
        (
            "NVRM: Xid (PCI:0000:10:1c): 106, x",
            None,
            "context",
            "gpu_hardware",
            "infrastructure",
            0,
            "xid 106",
        ),
        (
            "NVRM: Xid (PCI:0000:02:00): 79, GPU has fallen off the bus.",
            None,
            "candidate",
            "gpu_hardware",
            "infrastructure",
            90,
            "fallen off the bus",
        ),
        (
            "NVRM: Xid (PCI:0000:9b:00): 119, pid=1, name=nvc:[driver], Timeout",
            None,
            "candidate",
            "gpu_hardware",
            "infrastructure",
            80,
            "gsp_rpc_timeout",
        ),
        (
            "NVRM: Xid (PCI:0000:9b:00): 137, RLW_RXPIPE interrupt hit",
            None,
            "candidate",
            "application",
            "workload",
            40,
            "xid 137",
        ),
        ("NVRM: Xid (PCI:0000:9b:00): 8, x", None, "candidate", "unknown", "unknown", 50, "xid 8"),
        ("NVRM: Xid (PCI:0000:9b:00): 1, x", None, "candidate", "unknown", "unknown", 60, "xid 1"),
        (
            "NVRM: Xid (PCI:0000:9b:00): 54, x",
            None,
            "candidate",
            "gpu_hardware",
            "infrastructure",
            50,
            "xid 54",
        ),
        (
            "NVRM: Xid (PCI:0000:9b:00): 162, x",
            None,
            "candidate",
            "gpu_hardware",
            "infrastructure",
            60,
            "xid 162",
        ),
        ("NVRM: Xid (PCI:0000:9b:00): 121, x", None, "candidate", "nvlink", "infrastructure", 20, "xid 121"),
        (
            "NVRM: Xid (PCI:0000:9b:00): 999, x",
            None,
            "candidate",
            "unknown",
            "unknown",
            60,
            "not in the catalog",
        ),
        (
            "NVRM: Xid (PCI:0008:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node "
            "Reboot Required)",
            None,
            "context",
            "gpu_hardware",
            "infrastructure",
            0,
            "none -> node reboot required",
        ),
        # XID 74
        (XID_LINES[17][0], None, "candidate", "nvlink", "infrastructure", 80, "report_if_repeated"),
        (
            "NVRM: Xid (PCI:0003:00:00): 74, NVLink: fatal error detected on link 2(0x800001, 0x0, 0x0, "
            "0x0, 0x0, "
            "0x0, 0x0)",
            None,
            "context",
            "nvlink",
            "infrastructure",
            0,
            "ignore",
        ),
        (
            "NVRM: Xid (PCI:0003:00:00): 74, NVLink: fatal error detected on link 2(0x2, 0x0, 0x0, 0x0, "
            "0x0, 0x0, 0x0)",
            None,
            "candidate",
            "nvlink",
            "infrastructure",
            40,
            "sympathetic",
        ),
        (
            "NVRM: Xid (PCI:0003:00:00): 74, NVLink: fatal error detected on link 2(0x0, 0x0, 0x0, 0x40000, "
            "0x0, 0x0, "
            "0x0)",
            None,
            "candidate",
            "nvlink",
            "infrastructure",
            40,
            "sympathetic_fabric_reset",
        ),
        (
            "NVRM: Xid (PCI:0003:00:00): 74, NVLink: fatal error detected on link 2(0x4, 0x0, 0x0, 0x0, "
            "0x0, 0x0, 0x0)",
            None,
            "candidate",
            "nvlink",
            "infrastructure",
            80,
            "unlisted",
        ),
        (
            "NVRM: Xid (PCI:0003:00:00): 74, NVLink: something else",
            None,
            "candidate",
            "nvlink",
            "infrastructure",
            80,
            "decode failed",
        ),
        # XID 144-150
        (
            XID_LINES[24][0],
            None,
            "candidate",
            "nvlink",
            "infrastructure",
            60,
            "peer device is the likely source",
        ),
        (XID_LINES[25][0], None, "candidate", "nvlink", "infrastructure", 85, "netir_int"),
        (XID_LINES[26][0], None, "context", "nvlink", "infrastructure", 5, "rlw_rxpipe"),
        (
            "NVRM: Xid (PCI:0000:3b:00): 149, " + _nvl5("0x002001c6", "0x00000000"),
            None,
            "candidate",
            "nvlink",
            "infrastructure",
            85,
            "xid 149 nvlink netir_link_down reason 2: link signal integrity (reset the gpu)",
        ),
        (
            "NVRM: Xid (PCI:0000:3b:00): 145, "
            + _nvl5("0x04082907", "0x00000008", "RLW_SRC_TRACK", "Nonfatal"),
            None,
            "candidate",
            "nvlink",
            "infrastructure",
            60,
            "rlw_src_track",
        ),
        (
            "NVRM: Xid (PCI:0000:3b:00): 145, " + _nvl5("0x000000e2", "0x00000001", "RLW_SRC_TRACK", "Fatal"),
            "570.1",
            "candidate",
            "nvlink",
            "infrastructure",
            85,
            "rlw_src_track",
        ),
        (
            "NVRM: Xid (PCI:0000:3b:00): 149, " + _nvl5("0x025001c6", "0x00000000"),
            "575.51.03",
            "candidate",
            "nvlink",
            "infrastructure",
            70,
            "decode failed",
        ),
        (
            "NVRM: Xid (PCI:0000:3b:00): 150, " + _nvl5("0x00000000", "0x00000000", "MSE"),
            None,
            "candidate",
            "nvlink",
            "infrastructure",
            70,
            "decode failed",
        ),
        (
            "NVRM: Xid (PCI:0000:3b:00): 149, garbage",
            None,
            "candidate",
            "nvlink",
            "infrastructure",
            70,
            "decode failed",
        ),
        (
            "NVRM: Xid (PCI:0000:3b:00): 149, " + _nvl5("0x028001c6", "0x00000000"),
            None,
            "context",
            "nvlink",
            "infrastructure",
            5,
            "reason 40",
        ),
    ],
)
def test_assess_xid(
    line: str,
    driver: str | None,
    role: str,
    category: str,
    responsible: str,
    strength: int,
    summary_part: str,
) -> None:
    event = parse_xid(line)
    assert event is not None
    assessment = assess_xid(event, driver)
    assert (assessment.role, assessment.category, assessment.responsible, assessment.strength) == (
        role,
        category,
        responsible,
        strength,
    )
    assert summary_part in assessment.summary
    assert assessment.summary == assessment.summary.lower()
    assert not any(action.startswith("IGNORE") or "(IGNORE" in action for action in assessment.actions)
    assert len(set(assessment.actions)) == len(assessment.actions)


@pytest.mark.parametrize(
    ("code", "message", "actions"),
    [
        (
            149,
            _nvl5("0x002001c6", "0x00000000"),
            ("reset the GPU (RESET_GPU)", "investigate link signal integrity (INVESTIGATE_LINK_SI)"),
        ),
        (
            149,
            _nvl5("0x025001c6", "0x00000000"),
            (
                "reset the GPU (RESET_GPU)",
                "investigate the device at the other end of the link (INVESTIGATE_PEER_DEVICE)",
            ),
        ),
        (
            79,
            "GPU has fallen off the bus.",
            ("reboot the node (RESTART_BM)", "contact NVIDIA support (CONTACT_SUPPORT)"),
        ),
        (95, "Uncontained: LTC TAG (0x2, 0x1). RST: Yes, D-RST: No", ("reset the GPU (RESET_GPU)",)),
        (
            94,
            "Contained: SM (0x1). RST: No, D-RST: Yes",
            ("restart the application (RESTART_APP)", "drain the jobs, then reset the GPU (DRAIN_AND_RESET)"),
        ),
        (63, "Row Remapper: New row marked for remapping", ()),
        (
            145,
            _nvl5("0x0409a0c2", "0x00000008", "RLW_RXPIPE", "Nonfatal"),
            ("contact NVIDIA support (CONTACT_SUPPORT)",),
        ),
        (
            149,
            _nvl5("0x026001c6", "0x00000000"),
            ("investigate software or user actions (INVESTIGATE_SW/USER)",),
        ),
        (
            45,
            "Ch 00000008",
            ("if alone restart Fabric Manager, else follow the other XID (WORKFLOW_XID_45)",),
        ),
        (
            154,
            "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)",
            ("do what the accompanying XID 154 says (XID_154)",),
        ),
    ],
)
def test_assess_actions(code: int, message: str, actions: tuple[str, ...]) -> None:
    assert assess_xid(_event(code, message)).actions == actions


def test_every_catalog_bucket_has_words() -> None:
    catalog = load_catalog()
    buckets = {e.immediate_action for e in catalog.xids.values()} | {
        e.investigatory_action for e in catalog.xids.values()
    }
    buckets |= {r.action for r in catalog.nvlink5_rules} | {r.investigatory for r in catalog.nvlink5_rules}
    buckets |= {r.action2 for r in catalog.nvlink5_rules}
    missing = {b for b in buckets if b is not None and b not in BUCKET_WORDS}
    assert missing == set()


@pytest.mark.parametrize("code", range(1, 176))
def test_assess_every_code_is_well_formed(code: int) -> None:
    assessment = assess_xid(_event(code))
    assert assessment.role in ("candidate", "teardown", "context")
    assert assessment.category in ("gpu_hardware", "gpu_memory", "nvlink", "application", "unknown")
    assert assessment.responsible in ("infrastructure", "workload", "unknown")
    assert 0 <= assessment.strength <= 100
    assert assessment.summary.startswith(f"xid {code}")
    if assessment.role != "candidate":
        assert assessment.strength <= 10


@pytest.mark.parametrize(
    ("line", "role", "strength", "summary_part"),
    [
        (SXID_LINES[1][0], "candidate", 85, "sxid 24007 fatal on nvswitch0 (0000:c3:00.0) link 28"),
        (SXID_LINES[7][0], "candidate", 85, "ltssm fault up"),
        (SXID_LINES[0][0], "context", 0, "sxid 20009 non-fatal"),
        (SXID_LINES[3][0], "candidate", 50, "severity not stated"),
    ],
)
def test_assess_sxid(line: str, role: str, strength: int, summary_part: str) -> None:
    event = parse_sxid(line)
    assert event is not None
    assessment = assess_sxid(event)
    assert (assessment.role, assessment.category, assessment.responsible, assessment.strength) == (
        role,
        "nvlink",
        "infrastructure",
        strength,
    )
    assert summary_part in assessment.summary


def test_fallen_off_bus_is_xid_79() -> None:
    pci = parse_fallen_off_bus("NVRM: The NVIDIA GPU 0000:b3:00.0")
    assert pci == "0000:b3:00"
    event = fallen_off_bus_event(pci)
    assert (event.pci, event.code) == ("0000:b3:00", 79)
    assessment = assess_fallen_off_bus(pci)
    assert assessment == assess_xid(_event(79, "GPU has fallen off the bus.", "0000:b3:00"))
    assert (assessment.role, assessment.category, assessment.strength) == ("candidate", "gpu_hardware", 90)
    assert "reboot the node (RESTART_BM)" in assessment.actions
