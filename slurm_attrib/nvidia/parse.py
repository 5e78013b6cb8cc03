"""Parse NVIDIA driver kernel messages: Xid, SXid, fallen-off-bus and GPU UUID lines, and PCI addresses.

Every function here is pure.  Parsers take the kernel message with the timestamp and host already
stripped, but they *search* the text, so leading text is tolerated.  They return ``None`` for input
they do not recognise and never raise on garbage.

Line forms handled (research notes, xid-dcgm.md §A and §C):

* ``NVRM: Xid (PCI:0000:3b:00): 149, pid=..., name=..., <msg>`` and the MIG forms
  ``(PCI:0000:01:00 GPU-I:05)`` / ``(PCI:... GPU-I:05 GPU-CI:01)``; old drivers without ``PCI:``;
  lines without pid/name; ``pid='<unknown>'`` / ``name=<unknown>``; names with ``:`` and ``[]``.
* ``NVRM: GPU at PCI:0000:01:00: GPU-<uuid>`` (PCI → UUID).
* ``nvidia-nvswitchN: SXid (PCI:0000:c3:00.0): 24007, Fatal, Link 28 <msg>`` and SXids without
  the ``Fatal|Non-fatal, Link N`` part.
* ``NVRM: GPU 0000:18:00.0: GPU has fallen off the bus.`` and the multi-line
  ``NVRM: The NVIDIA GPU 0000:b3:00.0 ... fallen off the bus ...`` form (treated as XID 79).
* XID 45's ``caused by previous Xid N``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "SxidEvent",
    "XidEvent",
    "caused_by_previous",
    "fallen_off_bus_event",
    "normalise_pci",
    "parse_fallen_off_bus",
    "parse_gpu_uuid",
    "parse_sxid",
    "parse_xid",
]


@dataclass(frozen=True)
class XidEvent:
    """One ``NVRM: Xid`` line."""

    pci: str  # normalised lower-case 'dddd:bb:dd' (GPU Xids carry no function number)
    code: int
    gpu_instance: int | None  # MIG GPU-I
    compute_instance: int | None  # MIG GPU-CI
    pid: int | None  # None for pid='<unknown>'
    process: str | None  # name=..., None for <unknown>
    message: str  # free text after pid/name (or after the code when there is no pid/name)


@dataclass(frozen=True)
class SxidEvent:
    """One ``nvidia-nvswitchN: SXid`` line."""

    nvswitch: int
    pci: str  # normalised 'dddd:bb:dd.f' (SXids carry the function number)
    code: int
    fatal: bool | None  # None when the line states neither Fatal nor Non-fatal
    link: int | None
    message: str


# --------------------------------------------------------------------------------------------------
# regexes (compiled once)

_HEX = r"[0-9a-fA-F]"
_GPU_PCI = rf"{_HEX}{{4,8}}:{_HEX}{{2}}:{_HEX}{{2}}"

_XID_RE = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<pci>" + _GPU_PCI + r")(?:\.[0-7])?"
    r"(?:\s+GPU-I:(?P<gi>\d+))?(?:\s+GPU-CI:(?P<ci>\d+))?\s*\):\s*(?P<code>\d+)\b(?P<rest>.*)"
)
_XID_REST_RE = re.compile(
    r"^(?:pid=(?P<pid>'<unknown>'|<unknown>|\d+)(?:,\s*|\s*$))?"
    r"(?:name=(?P<name>.*?)(?:,\s+|,?\s*$))?"
    r"(?P<msg>.*)$"
)
_UUID_RE = re.compile(r"NVRM: GPU at PCI:(?P<pci>[0-9a-fA-F:.]+?):\s*(?P<uuid>GPU-[0-9a-fA-F-]+)")
_SXID_RE = re.compile(
    r"nvidia-nvswitch(?P<idx>\d+):\s*SXid \((?:PCI:)?(?P<pci>[0-9a-fA-F:.]+)\):\s*(?P<code>\d+)"
    # the severity in words, or as the number _nvswitch_dump_error_entry prints ("Severity %d Engine instance
    # %02d ..."; NVSWITCH_ERROR_SEVERITY_TYPE: 0 non-fatal, 1 fatal)
    r"(?:,\s*(?:(?P<sev>Fatal|Non-fatal|Nonfatal)|(?=Severity (?P<sevnum>\d+) )))?(?:,\s*Link\s+(?P<link>\d+))?"
    r"(?:,?\s*(?P<msg>.*))?"
)
# 'NVRM: GPU 0000:01:00.0: GPU has fallen off the bus.' (NV_DEV_PRINTF, osinit.c), and older drivers' 'NVRM: GPU
# at 0000:01:00.0 has fallen off the bus.'
_FOB_SINGLE_RE = re.compile(
    r"NVRM: GPU (?:PCI:)?(?P<pci>" + _GPU_PCI + r"(?:\.[0-7])?):\s*GPU has fallen off the bus|"
    r"NVRM: GPU at (?:PCI:)?(?P<pci_at>" + _GPU_PCI + r"(?:\.[0-7])?) has fallen off the bus"
)
_FOB_MULTI_RE = re.compile(
    r"NVRM: The NVIDIA GPU (?P<pci>" + _GPU_PCI + r"(?:\.[0-7])?)(?P<tail>.*)", re.DOTALL
)
_FOB_TAIL_RE = re.compile(r"fallen\s+off\s+the\s+bus", re.IGNORECASE)
_PCI_RE = re.compile(
    r"(?:PCI:)?(?:(?P<dom>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):(?P<dev>[0-9a-fA-F]{1,2})"
    r"(?:\.(?P<fn>[0-7]))?"
)
_CAUSED_BY_RE = re.compile(r"caused by previous Xid\s+(?P<code>\d+)", re.IGNORECASE)


# --------------------------------------------------------------------------------------------------
# PCI addresses


def _pci_parts(text: str) -> tuple[int, int, int, int | None] | None:
    match = _PCI_RE.fullmatch(text.strip())
    if match is None:
        return None
    domain = int(match["dom"], 16) if match["dom"] else 0
    function = int(match["fn"]) if match["fn"] is not None else None
    return domain, int(match["bus"], 16), int(match["dev"], 16), function


def normalise_pci(text: str) -> str:
    """'00000000:0C:00.0', '0000:0c:00', 'PCI:0000:0C:00' → '0000:0c:00' (raises ValueError on garbage)."""
    parts = _pci_parts(text)
    if parts is None:
        raise ValueError(f"not a PCI address: {text!r}")
    domain, bus, device, _ = parts
    return f"{domain:04x}:{bus:02x}:{device:02x}"


def _normalise_pci_function(text: str) -> str | None:
    parts = _pci_parts(text)
    if parts is None:
        return None
    domain, bus, device, function = parts
    return f"{domain:04x}:{bus:02x}:{device:02x}.{function or 0:x}"


# --------------------------------------------------------------------------------------------------
# line parsers


def parse_xid(message: str) -> XidEvent | None:
    """Parse an ``NVRM: Xid (...)`` kernel message; None when the text holds none."""
    match = _XID_RE.search(message)
    if match is None:
        return None
    rest = match["rest"].strip()
    if rest.startswith(","):
        rest = rest[1:].lstrip()
    elif rest:  # the code must be followed by a comma or end the message
        return None
    fields = _XID_REST_RE.match(rest)
    pid: int | None = None
    process: str | None = None
    text = rest
    if fields is not None:
        pid_text = fields["pid"]
        pid = int(pid_text) if pid_text is not None and pid_text.isdigit() else None
        name = fields["name"]
        process = name.strip() if name is not None and name.strip() not in ("", "<unknown>") else None
        text = fields["msg"]
    return XidEvent(
        pci=normalise_pci(match["pci"]),
        code=int(match["code"]),
        gpu_instance=int(match["gi"]) if match["gi"] is not None else None,
        compute_instance=int(match["ci"]) if match["ci"] is not None else None,
        pid=pid,
        process=process,
        message=text.strip(),
    )


def parse_gpu_uuid(message: str) -> tuple[str, str] | None:
    """``NVRM: GPU at PCI:0000:01:00: GPU-bc0f...`` → (normalised pci, uuid as printed)."""
    match = _UUID_RE.search(message)
    if match is None:
        return None
    parts = _pci_parts(match["pci"])
    if parts is None:
        return None
    return normalise_pci(match["pci"]), match["uuid"]


def parse_sxid(message: str) -> SxidEvent | None:
    """Parse an ``nvidia-nvswitchN: SXid (PCI:...)`` kernel message; None when the text holds none."""
    match = _SXID_RE.search(message)
    if match is None:
        return None
    pci = _normalise_pci_function(match["pci"])
    if pci is None:
        return None
    severity = match["sev"]
    fatal = None if severity is None else severity == "Fatal"
    if match["sevnum"] in ("0", "1"):
        fatal = match["sevnum"] == "1"
    return SxidEvent(
        nvswitch=int(match["idx"]),
        pci=pci,
        code=int(match["code"]),
        fatal=fatal,
        link=int(match["link"]) if match["link"] is not None else None,
        message=(match["msg"] or "").strip(),
    )


def parse_fallen_off_bus(message: str) -> str | None:
    """The GPU of a fallen-off-the-bus message without an Xid line, as 'dddd:bb:dd'; else None.

    Accepts the single-line form, the first line of the multi-line form on its own, and the
    multi-line form joined with spaces or newlines.  ``NVRM: The NVIDIA GPU <pci>`` followed by
    some other text (e.g. '... is not supported') is not a fallen-off-bus message.
    """
    single = _FOB_SINGLE_RE.search(message)
    if single is not None:
        return normalise_pci(single["pci"] or single["pci_at"])
    multi = _FOB_MULTI_RE.search(message)
    if multi is None:
        return None
    tail = multi["tail"]
    if tail.strip() and _FOB_TAIL_RE.search(tail) is None:
        return None
    return normalise_pci(multi["pci"])


def caused_by_previous(message: str) -> int | None:
    """XID 45 ``... caused by previous Xid 149`` → 149."""
    match = _CAUSED_BY_RE.search(message)
    return int(match["code"]) if match is not None else None


def fallen_off_bus_event(pci: str) -> XidEvent:
    """The XID 79 event equivalent to a fallen-off-bus message without an Xid line."""
    return XidEvent(
        pci=normalise_pci(pci),
        code=79,
        gpu_instance=None,
        compute_instance=None,
        pid=None,
        process=None,
        message="GPU has fallen off the bus.",
    )
