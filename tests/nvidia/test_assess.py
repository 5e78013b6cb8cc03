"""Tests for the assessment of Xid, SXid and fallen-off-bus events (slurm_attrib.nvidia.assess)."""

from __future__ import annotations

import pytest

from slurm_attrib.nvidia.assess import assess_fallen_off_bus, assess_sxid, assess_xid
from slurm_attrib.nvidia.catalog import load_catalog
from slurm_attrib.nvidia.parse import XidEvent, parse_fallen_off_bus, parse_sxid, parse_xid
from slurm_attrib.nvidia.policy import load_policy

from .conftest import SXID_LINES, XID_LINES, nvl5


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
        # legacy causes driver, system memory, bus, frame buffer: all the GPU's side
        ("NVRM: Xid (PCI:0000:9b:00): 1, x", None, "candidate", "gpu_hardware", "infrastructure", 60, "xid 1"),
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
            "NVRM: Xid (PCI:0000:3b:00): 149, " + nvl5("0x002001c6", "0x00000000"),
            None,
            "candidate",
            "nvlink",
            "infrastructure",
            85,
            "xid 149 nvlink netir_link_down reason 2: link signal integrity (reset the gpu)",
        ),
        (
            "NVRM: Xid (PCI:0000:3b:00): 145, "
            + nvl5("0x04082907", "0x00000008", "RLW_SRC_TRACK", "Nonfatal"),
            None,
            "candidate",
            "nvlink",
            "infrastructure",
            60,
            "rlw_src_track",
        ),
        (
            "NVRM: Xid (PCI:0000:3b:00): 145, " + nvl5("0x000000e2", "0x00000001", "RLW_SRC_TRACK", "Fatal"),
            "570.1",
            "candidate",
            "nvlink",
            "infrastructure",
            85,
            "rlw_src_track",
        ),
        (
            "NVRM: Xid (PCI:0000:3b:00): 149, " + nvl5("0x025001c6", "0x00000000"),
            "575.51.03",
            "candidate",
            "nvlink",
            "infrastructure",
            70,
            "decode failed",
        ),
        (
            "NVRM: Xid (PCI:0000:3b:00): 150, " + nvl5("0x00000000", "0x00000000", "MSE"),
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
            "NVRM: Xid (PCI:0000:3b:00): 149, " + nvl5("0x028001c6", "0x00000000"),
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
            nvl5("0x002001c6", "0x00000000"),
            ("reset the GPU (RESET_GPU)", "investigate link signal integrity (INVESTIGATE_LINK_SI)"),
        ),
        (
            149,
            nvl5("0x025001c6", "0x00000000"),
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
            nvl5("0x0409a0c2", "0x00000008", "RLW_RXPIPE", "Nonfatal"),
            ("contact NVIDIA support (CONTACT_SUPPORT)",),
        ),
        (
            149,
            nvl5("0x026001c6", "0x00000000"),
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
    missing = {b for b in buckets if b is not None and b not in load_policy().bucket_words}
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
    # an open category carries its readings (two or more) or none; a known one never needs them
    assert len(assessment.readings) != 1
    assert not assessment.readings or assessment.category == "unknown"


@pytest.mark.parametrize(("code", "readings"), [(8, ("application", "gpu_hardware")),
                                                (109, ("application", "gpu_hardware")),
                                                (24, ("application", "gpu_hardware")), (5, ()), (138, ())])
def test_an_xid_of_open_category_carries_the_readings_of_its_legacy_causes(code: int,
                                                                           readings: tuple[str, ...]) -> None:
    """Xid 8's legacy causes are driver, user app, bus, thermal: a GPU-side and an application reading;
    alone it makes the verdict ambiguous, never "attributed, category unknown"."""
    assessment = assess_xid(_event(code))
    assert (assessment.category, assessment.readings) == ("unknown", readings)


@pytest.mark.parametrize(
    ("line", "role", "strength", "summary_part"),
    [
        (SXID_LINES[1][0], "candidate", 85, "sxid 24007 fatal on nvswitch0 (0000:c3:00.0) link 28"),
        (SXID_LINES[8][0], "candidate", 85, "ltssm fault up"),
        (SXID_LINES[0][0], "context", 0, "sxid 20009 non-fatal"),
        (SXID_LINES[3][0], "candidate", 50, "severity not stated"),
        (SXID_LINES[5][0], "candidate", 85, "sxid 12033 fatal on nvswitch0 (0000:c3:00.0): severity 1 engine"),
        (SXID_LINES[6][0], "context", 0, "sxid 24007 non-fatal"),

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
    assessment = assess_fallen_off_bus(pci)
    assert assessment == assess_xid(_event(79, "GPU has fallen off the bus.", "0000:b3:00"))
    assert (assessment.role, assessment.category, assessment.strength) == ("candidate", "gpu_hardware", 90)
    assert "reboot the node (RESTART_BM)" in assessment.actions
