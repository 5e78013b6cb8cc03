"""Tests for the Xid payload decoders (slurm_attrib.nvidia.decode): XID 74 registers, XID 144-150
IntrInfo/ErrorStatus, XID 154 recovery actions and XID 94/95 containment."""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest

from slurm_attrib.nvidia.catalog import Catalog, load_catalog, parse_catalog
from slurm_attrib.nvidia.decode import decode_containment, decode_nvlink5, decode_xid74, decode_xid154
from slurm_attrib.nvidia.parse import parse_xid

from .conftest import GARBAGE, HOSTILE, XID_LINES, nvl5


@pytest.mark.parametrize("text", GARBAGE)
def test_garbage_returns_none(text: str) -> None:
    assert decode_xid74(text) is None
    assert decode_nvlink5(149, text, None) is None
    assert decode_xid154(text) is None
    assert decode_containment(text) is None


def test_long_hostile_input_is_fast() -> None:
    start = time.perf_counter()
    for text in HOSTILE:
        decode_containment(text)
        decode_xid74(text)
        decode_nvlink5(149, text, None)
    assert time.perf_counter() - start < 2.0


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


@pytest.mark.parametrize(
    ("code", "payload", "driver", "branch", "reason", "subcode", "action", "investigatory", "link_down"),
    [
        # C.2 worked examples, driver unknown
        (
            149,
            nvl5("0x025001c6", "0x00000000"),
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
            nvl5("0x026001c6", "0x00000000"),
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
            nvl5("0x000fe406", "0x00000000", "NETIR"),
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
            nvl5("0x0409a0c2", "0x00000008", "RLW_RXPIPE", "Nonfatal"),
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
            nvl5("0x04082907", "0x00000008", "RLW_SRC_TRACK", "Nonfatal"),
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
            nvl5("0x002001c6", "0x00000000"),
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
            nvl5("0x00000001", "0x00000008", "SAW_MVB", "Nonfatal"),
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
            nvl5("0x025001c6", "0x00000000"),
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
            nvl5("0x002001c6", "0x00000000"),
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
            nvl5("0x02500011", "0x00000000", "NETIR_LINK_DOWN"),
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
            nvl5("0x04082907", "0x00000008", "RLW_SRC_TRACK", "Nonfatal"),
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
            nvl5("0x02a001c6", "0x00000000"),
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
            nvl5("0x00000226", "0x00000002", "NETIR_BER_EVENT", "Nonfatal"),
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
            nvl5("0x00000009", "0x00000004", "TLW_CTRL/TLW_X", "Fatal"),
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
    payload = nvl5("0x000fe406", "0x00000000", "NETIR", "Fatal").replace("Link 3", "Link -1")
    decoded = decode_nvlink5(149, payload, None)
    assert decoded is not None
    assert decoded.link == -1 and decoded.fatal is True


def test_decode_nvlink5_branch_names() -> None:
    v1 = decode_nvlink5(149, nvl5("0x025001c6", "0x0"), "570.86.15")
    v2 = decode_nvlink5(149, nvl5("0x02500011", "0x0"), "575.51.03")
    assert v1 is not None and v1.row is not None and v1.row.name == "NETIR_LINK_EVT"
    assert v2 is not None and v2.row is not None and v2.row.name == "NETIR_LINK_DOWN"


def test_decode_nvlink5_promoted_row() -> None:
    # RLW_RXPIPE status 0x1 is 'Non-fatal*': bit 10 set selects Action 2 (RESET_GPU)
    plain = decode_nvlink5(145, nvl5("0x000000c2", "0x00000001", "RLW_RXPIPE", "Nonfatal"), "570.1")
    promoted = decode_nvlink5(145, nvl5("0x000004c2", "0x00000001", "RLW_RXPIPE", "Nonfatal"), "570.1")
    assert plain is not None and plain.row is not None
    assert (plain.row.action, plain.row.promoted) == ("IGNORE", False)
    assert promoted is not None and promoted.row is not None
    assert (promoted.row.action, promoted.row.promoted) == ("RESET_GPU", True)


def test_decode_nvlink5_v1_duplicates_collapse() -> None:
    # v1 cannot tell TLW_RX_PIPE0 from TLW_RX_PIPE1 (same v1 mask); both decode to the same outcome
    decoded = decode_nvlink5(146, nvl5("0x00000143", "0x00000004", "TLW_RX", "Fatal"), "570.1")
    assert decoded is not None and decoded.row is not None
    assert decoded.row.name == "TLW_RX"
    assert decoded.row.action == "RESET_GPU"


@pytest.mark.parametrize(
    ("code", "payload", "driver", "branch", "note_part"),
    [
        (149, nvl5("0x025001c6", "0x00000000"), "575.51.03", "v2", "no v2 row"),  # v1 value, v2 driver
        (149, nvl5("0x00000000", "0x00000000"), None, None, "in v1 or v2"),
        (
            145,
            nvl5("0x04082907", "0x00000003", "RLW_SRC_TRACK"),
            None,
            None,
            "in v1 or v2",
        ),  # unlisted status
        (150, nvl5("0x00000000", "0x00000000", "MSE"), "570.1", "v1", "ambiguous"),  # two MSE rows
        (150, nvl5("0x00000000", "0x00000000", "MSE"), None, None, "ambiguous"),
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
    decoded = decode_nvlink5(150, nvl5("0x00000000", "0xffffffff", "MSE"), None)
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
    decoded = decode_nvlink5(149, nvl5("0x00000006", "0x0"), None, catalog)
    assert decoded is not None
    assert decoded.row is None and decoded.branch is None
    assert {m.subcode for m in decoded.candidates} == {"A", "B"}
    assert decoded.note is not None and "driver version" in decoded.note
    known = decode_nvlink5(149, nvl5("0x00000006", "0x0"), "570.1", catalog)
    assert known is not None and known.row is not None and known.row.subcode == "A"


@pytest.mark.parametrize("code", [74, 143, 151, 0])
def test_decode_nvlink5_other_codes(code: int) -> None:
    assert decode_nvlink5(code, nvl5("0x025001c6", "0x0"), None) is None


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
    decoded = decode_nvlink5(149, nvl5("0x025001c6", "0x0"), driver)
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
