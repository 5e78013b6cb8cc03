"""Tests for the Xid / SXid / GPU UUID / fallen-off-bus line parsers (slurm_attrib.nvidia.parse)."""

from __future__ import annotations

import time

import pytest

from slurm_attrib.nvidia.parse import (
    SxidEvent,
    XidEvent,
    caused_by_previous,
    fallen_off_bus_event,
    normalise_pci,
    parse_fallen_off_bus,
    parse_gpu_uuid,
    parse_sxid,
    parse_xid,
)

from .conftest import GARBAGE, HOSTILE, SXID_LINES, XID_LINES


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


@pytest.mark.parametrize("text", GARBAGE)
def test_garbage_returns_none(text: str) -> None:
    assert parse_xid(text) is None
    assert caused_by_previous(text) is None
    if "SXid" not in text:
        assert parse_sxid(text) is None
    if "GPU at PCI" not in text:
        assert parse_gpu_uuid(text) is None
    assert parse_fallen_off_bus(text) is None


def test_long_hostile_input_is_fast() -> None:
    start = time.perf_counter()
    for text in HOSTILE:
        parse_xid(text)
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


def test_fallen_off_bus_event_is_xid_79() -> None:
    event = fallen_off_bus_event("0000:B3:00.0")
    assert (event.pci, event.code, event.message) == ("0000:b3:00", 79, "GPU has fallen off the bus.")
