"""Real driver lines shared by the Xid parser, decoder and assessment tests (tests/nvidia/test_*.py).

Log lines are the real ones quoted in the research notes (xid-dcgm.md §A.1-A.4 and §C), with the
source given next to each group.
"""

from __future__ import annotations

from slurm_attrib.nvidia.parse import SxidEvent

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


# Lines that are no driver message (or a different one): every parser and decoder returns None.
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
        SxidEvent(  # _nvswitch_dump_error_entry's detail line: severity 1 is NVSWITCH_ERROR_SEVERITY_FATAL
            0, "0000:c3:00.0", 12033, True, None, "Severity 1 Engine instance 00 Sub-engine instance 00"
        ),
    ),
    (
        "nvidia-nvswitch1: SXid (PCI:0000:aa:00.0): 24007, Severity 0 Engine instance 12 Sub-engine instance 00",
        SxidEvent(1, "0000:aa:00.0", 24007, False, None, "Severity 0 Engine instance 12 Sub-engine instance 00"),
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

# Inputs that would make a careless regex backtrack for minutes: every parser and decoder must be fast.
HOSTILE = [
    "NVRM: Xid (PCI:0000:3b:00): 13, pid=1, name=" + "a, " * 20000,
    "Contained: " + " " * 20000 + "x",
    "Contained: " + "(" * 20000,
    "link 1(" + "0x0, " * 20000,
    "A Fatal XC0 i0 Link 1 (" + "0x0 " * 20000,
    "NVRM: The NVIDIA GPU 0000:b3:00.0" + " NVRM:" * 20000,
]


def nvl5(intrinfo: str, status: str, unit: str = "NETIR_LINK_EVT", sev: str = "Fatal") -> str:
    """An XID 144-150 payload with the given IntrInfo and ErrorStatus words."""
    return f"{unit} {sev} XC0 i0 Link 3 ({intrinfo} {status} 0x00000000 0x00000000 0x00000000 0x00000000)"
