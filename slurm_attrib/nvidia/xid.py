"""Parse NVIDIA driver kernel messages (Xid, SXid, fallen-off-bus, GPU UUID) and assess what they mean.

Every function here is pure: it reads nothing but its arguments and the packaged XID catalog
(:mod:`slurm_attrib.nvidia.catalog`).  Parsers take the kernel message with the timestamp and host
already stripped, but they *search* the text, so leading text is tolerated.  Parsers and decoders
return ``None`` for input they do not recognise and never raise on garbage.

Line forms handled (research notes, xid-dcgm.md §A and §C):

* ``NVRM: Xid (PCI:0000:3b:00): 149, pid=..., name=..., <msg>`` and the MIG forms
  ``(PCI:0000:01:00 GPU-I:05)`` / ``(PCI:... GPU-I:05 GPU-CI:01)``; old drivers without ``PCI:``;
  lines without pid/name; ``pid='<unknown>'`` / ``name=<unknown>``; names with ``:`` and ``[]``.
* ``NVRM: GPU at PCI:0000:01:00: GPU-<uuid>`` (PCI → UUID).
* ``nvidia-nvswitchN: SXid (PCI:0000:c3:00.0): 24007, Fatal, Link 28 <msg>`` and SXids without
  the ``Fatal|Non-fatal, Link N`` part.
* ``NVRM: GPU 0000:18:00.0: GPU has fallen off the bus.`` and the multi-line
  ``NVRM: The NVIDIA GPU 0000:b3:00.0 ... fallen off the bus ...`` form (treated as XID 79).

Payload decoders: XID 74 (seven NVLink registers), XID 144-150 (NVLink-5 IntrInfo/ErrorStatus
against the catalog masks, driver branch v1 < R575 <= v2), XID 154 (recovery action change),
XID 94/95 (error containment) and XID 45 (``caused by previous Xid N``).

Assessment policy (:func:`assess_xid`, :func:`assess_sxid`, :func:`assess_fallen_off_bus`)
------------------------------------------------------------------------------------------
``role`` is ``candidate`` (can be the root cause of a job failure), ``teardown`` (a consequence of an
abort) or ``context`` (informational).  ``strength`` (0-100) says how strongly the event alone
explains a job failure.  Rules, first match wins:

1. Category map: catalog category memory → ``gpu_memory``, nvlink → ``nvlink``, hardware /
   thermal_power / driver → ``gpu_hardware``, application → ``application``, unknown → ``unknown``.
   Responsible: application → ``workload``, unknown → ``unknown``, everything else →
   ``infrastructure``.
2. XID 45 (channel teardown) and 43 (software-induced fault, GPU healthy): role ``teardown``,
   category ``application``, responsible ``workload``, strength 10.
3. XID 154, 63, 92, and every XID whose immediate action is IGNORE and whose investigatory action
   is IGNORE or blank: role ``context``, strength 0.
4. XID 74: decode the registers; worst bit class ``ignore`` → context (0); a sympathetic class
   (``sympathetic``, ``sympathetic_fabric_reset``) → candidate 40; anything else, including an
   undecodable payload → candidate 80.  Category ``nvlink``.
5. XID 144-150: decode (see :func:`decode_nvlink5`); matched row whose effective action is IGNORE →
   context, strength 5; investigatory INVESTIGATE_PEER_DEVICE → candidate 60 and the summary says
   the peer device is the likely source; action RESET_GPU / XID_154_EVAL → candidate 85 for
   ``Fatal`` / ``Link Fatal`` rows (with their ``*``/``?`` marks), else 60; no single row matched
   (no match, ambiguous, or unparseable payload) → candidate 70 and the summary says the decode
   failed.  Category ``nvlink``.
6. XID 94 / 95: candidate, ``gpu_memory``, strength 80 / 85.
7. Catalog category application → candidate 40.
8. Any other XID: candidate with strength from the catalog severity: critical 90, high 80,
   medium 50, low 20, unknown / payload_dependent 60.  An XID missing from the catalog is treated
   as category and severity unknown.

SXids: ``Fatal`` → candidate, ``nvlink``, ``infrastructure``, 85; ``Non-fatal`` → context, 0; an SXid
that states neither (SOE / engine forms) → candidate 50 (not covered by the brief; chosen here).
A fallen-off-bus message without an Xid line is assessed exactly as XID 79.

``actions`` lists the catalog resolution buckets in plain words with the bucket name in
parentheses, immediate first then investigatory, without duplicates and without IGNORE entries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from slurm_attrib.nvidia.catalog import Catalog, Nvlink5Rule, XidEntry, load_catalog

__all__ = [
    "BUCKET_WORDS",
    "ContainmentDecode",
    "Nvlink5Decode",
    "Nvlink5Match",
    "SxidEvent",
    "Xid74Bit",
    "Xid74Decode",
    "Xid154Decode",
    "XidAssessment",
    "XidEvent",
    "assess_fallen_off_bus",
    "assess_sxid",
    "assess_xid",
    "caused_by_previous",
    "decode_containment",
    "decode_nvlink5",
    "decode_xid74",
    "decode_xid154",
    "fallen_off_bus_event",
    "normalise_pci",
    "parse_fallen_off_bus",
    "parse_gpu_uuid",
    "parse_sxid",
    "parse_xid",
]

# --------------------------------------------------------------------------------------------------
# records


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


@dataclass(frozen=True)
class Xid74Bit:
    """One set bit of an XID 74 register and the catalog guidance for it."""

    register: int  # 1-7
    bit: int  # from the LSB
    bit_class: str  # catalog class, or 'unlisted'
    guidance: str


@dataclass(frozen=True)
class Xid74Decode:
    """The decoded payload of an XID 74 message."""

    link: int
    registers: tuple[int, ...]  # as printed, normally seven
    bits: tuple[Xid74Bit, ...]  # every set bit, register then bit order
    worst_class: str  # the most serious class among ``bits``; 'none' when no bit is set


@dataclass(frozen=True)
class Nvlink5Match:
    """A decode-table row that matched an XID 144-150 payload."""

    rule: Nvlink5Rule
    branch: str  # 'v1' | 'v2'
    subcode: str  # as in the catalog ('V1name/V2name' when the name changed)
    name: str  # the name the branch uses
    action: str  # effective immediate action (action2 when the promotion mask matched)
    promoted: bool
    investigatory: str
    severity: str
    hw_sw: str
    impact: str

    @property
    def is_link_down(self) -> bool:
        return "NETIR_LINK_DOWN" in self.subcode


@dataclass(frozen=True)
class Nvlink5Decode:
    """The decoded payload of an XID 144-150 message."""

    code: int
    unit: str  # sub-component text as printed (may contain '/')
    fatal: bool  # from the printed 'Fatal' / 'Nonfatal'
    cross_contain: int  # XC<n>
    injected: int  # i<n>
    link: int  # -1 when not tied to one link
    intrinfo: int
    error_status: int
    debug_data: tuple[int, ...]
    branch: str | None  # 'v1' | 'v2' | None
    branch_reason: str  # 'driver 570.86.15', 'only v1 matched', ...
    row: Nvlink5Match | None  # exactly one matched row, else None
    candidates: tuple[Nvlink5Match, ...]  # every row that matched (several when ambiguous)
    link_down_reason: int | None  # IntrInfo[25:20] for NETIR_LINK_DOWN rows
    note: str | None  # why no row was chosen


@dataclass(frozen=True)
class Xid154Decode:
    """``GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)``."""

    from_code: int
    from_text: str
    to_code: int
    to_text: str
    from_nvml: str | None  # nvmlDeviceGpuRecoveryAction_t name, None when unknown
    to_nvml: str | None
    to_known_text: bool  # whether to_text is one of the catalog's XID 154 action texts


@dataclass(frozen=True)
class ContainmentDecode:
    """The payload of XID 94 (contained) / 95 (uncontained)."""

    contained: bool
    unit: str
    ids: tuple[int, ...]  # engine / partition(, subpartition|slice) / gfid
    phys_addr: int | None
    reset_required: bool  # RST: Yes
    drain_and_reset_required: bool  # D-RST: Yes


@dataclass(frozen=True)
class XidAssessment:
    """What one event says about a job failure (policy in the module docstring)."""

    role: str  # 'candidate' | 'teardown' | 'context'
    category: str  # gpu_hardware | gpu_memory | nvlink | application | unknown
    responsible: str  # infrastructure | workload | unknown
    strength: int  # 0-100
    summary: str
    actions: tuple[str, ...]


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
    r"(?:,\s*(?P<sev>Fatal|Non-fatal|Nonfatal))?(?:,\s*Link\s+(?P<link>\d+))?(?:,?\s*(?P<msg>.*))?"
)
_FOB_SINGLE_RE = re.compile(
    r"NVRM: GPU (?:PCI:)?(?P<pci>" + _GPU_PCI + r"(?:\.[0-7])?):\s*GPU has fallen off the bus"
)
_FOB_MULTI_RE = re.compile(
    r"NVRM: The NVIDIA GPU (?P<pci>" + _GPU_PCI + r"(?:\.[0-7])?)(?P<tail>.*)", re.DOTALL
)
_FOB_TAIL_RE = re.compile(r"fallen\s+off\s+the\s+bus", re.IGNORECASE)
_PCI_RE = re.compile(
    r"(?:PCI:)?(?:(?P<dom>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):(?P<dev>[0-9a-fA-F]{1,2})"
    r"(?:\.(?P<fn>[0-7]))?"
)
_XID74_RE = re.compile(
    r"link\s+(?P<link>\d+)\s*\(\s*(?P<regs>0x[0-9a-fA-F]+(?:\s*,\s*0x[0-9a-fA-F]+){0,6})\s*\)",
    re.IGNORECASE,
)
_NVL5_RE = re.compile(
    r"(?:^|(?<=[\s,]))(?P<unit>[^\s,()]+)\s+(?P<sev>Fatal|Nonfatal|Non-fatal)\s+XC(?P<xc>\d+)\s+"
    r"i(?P<inj>\d+)\s+Link\s+(?P<link>-?\d+)\s*\(\s*(?P<words>0x[0-9a-fA-F]+(?:\s+0x[0-9a-fA-F]+)+)\s*\)"
)
_XID154_RE = re.compile(
    r"recovery action changed from\s+0x(?P<from>[0-9a-fA-F]+)\s*\((?P<from_text>[^()]{0,80})\)\s*"
    r"to\s+0x(?P<to>[0-9a-fA-F]+)\s*\((?P<to_text>[^()]{0,80})\)",
    re.IGNORECASE,
)
# XID 94/95 payloads are taken apart in steps (no nested optional whitespace → no backtracking blow-up)
_CONTAIN_HEAD_RE = re.compile(r"\b(?P<kind>Contained|Uncontained):", re.IGNORECASE)
_CONTAIN_FLAGS_RE = re.compile(
    r"(?<!D-)RST:\s*(?P<rst>Yes|No)\s*,\s*D-RST:\s*(?P<drst>Yes|No)", re.IGNORECASE
)
_CONTAIN_ADDR_RE = re.compile(r"physAddr:\s*0x(?P<addr>[0-9a-fA-F]+)", re.IGNORECASE)
_CONTAIN_IDS_RE = re.compile(r"0x[0-9a-fA-F]+(?:\s*,\s*0x[0-9a-fA-F]+)*")
_CAUSED_BY_RE = re.compile(r"caused by previous Xid\s+(?P<code>\d+)", re.IGNORECASE)
_DRIVER_MAJOR_RE = re.compile(r"\s*[rR]?(?P<major>\d+)")


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
    return SxidEvent(
        nvswitch=int(match["idx"]),
        pci=pci,
        code=int(match["code"]),
        fatal=None if severity is None else severity == "Fatal",
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
        return normalise_pci(single["pci"])
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


# --------------------------------------------------------------------------------------------------
# payload decoders

#: XID 74 classes from least to most serious; the worst class of a message is the highest here.
_XID74_CLASS_RANK: dict[str, int] = {
    "none": 0,
    "ignore": 1,
    "ecc_threshold_no_uncorrectable": 2,
    "sympathetic": 3,
    "sympathetic_fabric_reset": 4,
    "report_if_repeated": 5,
    "unexpected": 6,
    "unlisted": 7,
    "hardware_ecc_parity": 8,
    "marginal_signal_integrity": 9,
    "possible_hardware": 10,
}
_UNLISTED_GUIDANCE = "bit not listed by NVIDIA: report a bug"


def decode_xid74(message: str, catalog: Catalog | None = None) -> Xid74Decode | None:
    """Decode ``NVLink: fatal error detected on link 14(0x0, 0x0, 0x10000, ...)``."""
    match = _XID74_RE.search(message)
    if match is None:
        return None
    cat = catalog if catalog is not None else load_catalog()
    registers = tuple(int(word, 16) for word in re.split(r"\s*,\s*", match["regs"].strip()))
    bits: list[Xid74Bit] = []
    for index, value in enumerate(registers, start=1):
        for bit in range(value.bit_length()):
            if not value >> bit & 1:
                continue
            rule = cat.xid74_rule(index, bit)
            if rule is None:
                bits.append(Xid74Bit(index, bit, "unlisted", _UNLISTED_GUIDANCE))
            else:
                bits.append(Xid74Bit(index, bit, rule.bit_class, rule.guidance))
    worst = max((b.bit_class for b in bits), key=lambda c: _XID74_CLASS_RANK.get(c, 7), default="none")
    return Xid74Decode(link=int(match["link"]), registers=registers, bits=tuple(bits), worst_class=worst)


def _driver_major(driver_version: str | None) -> int | None:
    if driver_version is None:
        return None
    match = _DRIVER_MAJOR_RE.match(driver_version)
    return int(match["major"]) if match is not None else None


def _nvlink5_matches(
    rules: tuple[Nvlink5Rule, ...], branch: str, intrinfo: int, status: int
) -> tuple[Nvlink5Match, ...]:
    found: list[Nvlink5Match] = []
    for rule in rules:
        if not rule.accepts_status(status):
            continue
        action: str | None = None
        promoted = False
        if rule.mask(branch).matches(intrinfo):
            action = rule.action
        else:
            mask2 = rule.action2_mask(branch)
            if mask2 is not None and rule.action2 is not None and mask2.matches(intrinfo):
                action, promoted = rule.action2, True
        if action is None:
            continue
        found.append(
            Nvlink5Match(
                rule=rule,
                branch=branch,
                subcode=rule.subcode,
                name=rule.name_for(branch),
                action=action,
                promoted=promoted,
                investigatory=rule.investigatory,
                severity=rule.severity,
                hw_sw=rule.hw_sw,
                impact=rule.impact,
            )
        )
    return _distinct(found)


def _outcome(match: Nvlink5Match) -> tuple[str, str, bool, str, str, str, str]:
    return (
        match.name,
        match.action,
        match.promoted,
        match.investigatory,
        match.severity,
        match.hw_sw,
        match.impact,
    )


def _distinct(matches: list[Nvlink5Match]) -> tuple[Nvlink5Match, ...]:
    # Rows that differ only in the other branch's name (v1 'TLW_RX' for v2 'TLW_RX_PIPE0' and
    # 'TLW_RX_PIPE1') decode to the same outcome in this branch: keep the first of them.
    seen: set[tuple[str, str, bool, str, str, str, str]] = set()
    out: list[Nvlink5Match] = []
    for match in matches:
        if _outcome(match) not in seen:
            seen.add(_outcome(match))
            out.append(match)
    return tuple(out)


def decode_nvlink5(
    code: int, message: str, driver_version: str | None, catalog: Catalog | None = None
) -> Nvlink5Decode | None:
    """Decode an XID 144-150 payload ``<unit> <Fatal|Nonfatal> XC<n> i<n> Link <n> (0x.. 0x.. ...)``.

    The branch is v1 for drivers < R575 and v2 for >= R575.  Without a driver version both are
    tried; the branch is used when it is the only one with a matching row (when both branches match
    the very same single row, that row is used and ``branch`` stays None).  Rows matching in both
    branches, or several rows in the chosen branch, leave ``row`` None with a ``note``.
    """
    if not 144 <= code <= 150:
        return None
    match = _NVL5_RE.search(message)
    if match is None:
        return None
    words = tuple(int(word, 16) for word in match["words"].split())
    if any(word > 0xFFFFFFFF for word in words[:2]):
        return None
    intrinfo, status = words[0], words[1]
    cat = catalog if catalog is not None else load_catalog()
    rules = cat.nvlink5_rules_for(code)

    branch: str | None
    decided = True  # False when rows of both branches matched and they differ
    major = _driver_major(driver_version)
    if major is not None:
        branch = "v1" if major < 575 else "v2"
        reason = f"driver {driver_version}"
        candidates = _nvlink5_matches(rules, branch, intrinfo, status)
    else:
        in_v1 = _nvlink5_matches(rules, "v1", intrinfo, status)
        in_v2 = _nvlink5_matches(rules, "v2", intrinfo, status)
        same_rows = [m.rule for m in in_v1] == [m.rule for m in in_v2]
        if in_v1 and same_rows and len(in_v1) == 1:
            # the same row matches in both branches: the outcome does not depend on the branch
            branch, reason, candidates = None, "v1 and v2 matched the same row", in_v1
        elif in_v1 and in_v2:
            branch, reason, candidates = None, "rows matched in v1 and v2", in_v1 + in_v2
            decided = False
        elif in_v1:
            branch, reason, candidates = "v1", "only v1 matched", in_v1
        elif in_v2:
            branch, reason, candidates = "v2", "only v2 matched", in_v2
        else:
            branch, reason, candidates = None, "no branch matched", ()

    row = candidates[0] if decided and len(candidates) == 1 else None
    note: str | None = None
    if row is None:
        words_text = f"intrinfo 0x{intrinfo:08x} errorstatus 0x{status:08x}"
        if not decided:
            note = f"ambiguous: {words_text} matches rows of both v1 and v2; the driver version is needed"
        elif candidates:
            note = f"ambiguous: {words_text} matches {len(candidates)} {branch} rows"
        elif branch is not None:
            note = f"no {branch} row of xid {code} matches {words_text}"
        else:
            note = f"no row of xid {code} matches {words_text} in v1 or v2"
    return Nvlink5Decode(
        code=code,
        unit=match["unit"],
        fatal=match["sev"] == "Fatal",
        cross_contain=int(match["xc"]),
        injected=int(match["inj"]),
        link=int(match["link"]),
        intrinfo=intrinfo,
        error_status=status,
        debug_data=words[2:],
        branch=branch,
        branch_reason=reason,
        row=row,
        candidates=candidates,
        link_down_reason=(intrinfo >> 20) & 0x3F if row is not None and row.is_link_down else None,
        note=note,
    )


def decode_xid154(message: str, catalog: Catalog | None = None) -> Xid154Decode | None:
    """Decode ``GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)``."""
    match = _XID154_RE.search(message)
    if match is None:
        return None
    cat = catalog if catalog is not None else load_catalog()
    from_code, to_code = int(match["from"], 16), int(match["to"], 16)
    to_text = match["to_text"].strip()
    return Xid154Decode(
        from_code=from_code,
        from_text=match["from_text"].strip(),
        to_code=to_code,
        to_text=to_text,
        from_nvml=cat.nvml_recovery_actions.get(from_code),
        to_nvml=cat.nvml_recovery_actions.get(to_code),
        to_known_text=cat.xid154_meaning(to_text) is not None,
    )


def decode_containment(message: str) -> ContainmentDecode | None:
    """Decode the XID 94/95 payload ``Contained: CE User Channel (0x9). RST: No, D-RST: No``."""
    head = _CONTAIN_HEAD_RE.search(message)
    if head is None:
        return None
    flags = _CONTAIN_FLAGS_RE.search(message, head.end())
    if flags is None:
        return None
    body = message[head.end() : flags.start()].strip()
    phys_addr: int | None = None
    addr = _CONTAIN_ADDR_RE.search(body)
    if addr is not None:
        phys_addr = int(addr["addr"], 16)
        body = body[: addr.start()].rstrip()
    body = body.rstrip(".,").rstrip()
    ids: tuple[int, ...] = ()
    if body.endswith(")"):
        opening = body.rfind("(")
        inner = body[opening + 1 : -1].strip() if opening >= 0 else ""
        if opening < 0 or _CONTAIN_IDS_RE.fullmatch(inner) is None:
            return None
        ids = tuple(int(word, 16) for word in inner.split(","))
        body = body[:opening].rstrip()
    if not body or "(" in body or ")" in body:
        return None
    return ContainmentDecode(
        contained=head["kind"].lower() == "contained",
        unit=body,
        ids=ids,
        phys_addr=phys_addr,
        reset_required=flags["rst"].lower() == "yes",
        drain_and_reset_required=flags["drst"].lower() == "yes",
    )


# --------------------------------------------------------------------------------------------------
# assessment

#: Catalog resolution buckets (verbatim strings) → (plain words, bucket name shown in parentheses).
#: None = no action (IGNORE-like); such buckets never appear in ``XidAssessment.actions``.
BUCKET_WORDS: dict[str, tuple[str, str] | None] = {
    "RESTART_APP": ("restart the application", "RESTART_APP"),
    "RESET_GPU": ("reset the GPU", "RESET_GPU"),
    "RESTART_BM": ("reboot the node", "RESTART_BM"),
    "RESTART_VM": ("restart the VM that owns the GPU", "RESTART_VM"),
    "RESTART_FM": ("restart Fabric Manager", "RESTART_FM"),
    "DRAIN_AND_RESET": ("drain the jobs, then reset the GPU", "DRAIN_AND_RESET"),
    "IGNORE": None,
    "IGNORE (sympathetic)": None,
    "N/A Informational only regarding another Xid": None,
    "CONTACT_SUPPORT": ("contact NVIDIA support", "CONTACT_SUPPORT"),
    "CHECK_MECHANICALS": ("check GPU seating and power connections", "CHECK_MECHANICALS"),
    "UPDATE_SWFW": ("update the driver/firmware (guest/host driver mismatch)", "UPDATE_SWFW"),
    "CHECK_UVM": ("reset the GPU if UVM/vGPU is in use, else nothing", "CHECK_UVM"),
    "WORKFLOW_XID_45": ("if alone restart Fabric Manager, else follow the other XID", "WORKFLOW_XID_45"),
    "Solo: RESTART_FM / Not Solo: IGNORE (follow other Xid)": (
        "if alone restart Fabric Manager, else follow the other XID",
        "WORKFLOW_XID_45",
    ),
    "WORKFLOW_XID_48": (
        "reset the GPU (drain and reset with XID 63/64) and check the ECC/SRAM counters",
        "WORKFLOW_XID_48",
    ),
    "WORKFLOW_XID_13": (
        "check the application; run DCGM diagnostics if it repeats on the same GPC/TPC",
        "WORKFLOW_XID_13",
    ),
    "WORKFLOW_XID_31": (
        "check the application; run DCGM diagnostics if MMU faults repeat on the same GPU",
        "WORKFLOW_XID_31",
    ),
    "WORKFLOW_NVLINK_ERR": ("decode the XID 74 NVLink registers", "WORKFLOW_NVLINK_ERR"),
    "WORKFLOW_NVLINK5_ERR": ("decode the NVLink-5 IntrInfo/ErrorStatus words", "WORKFLOW_NVLINK5_ERR"),
    "CHECK_APP/CUDA": ("check the application's CUDA usage", "CHECK_APP/CUDA"),
    "INVESTIGATE_SW": ("investigate user or NVIDIA software (trace the pid)", "INVESTIGATE_SW"),
    "INVESTIGATE_SW_USER": ("investigate software or user actions", "INVESTIGATE_SW_USER"),
    "INVESTIGATE_SW/USER": ("investigate software or user actions", "INVESTIGATE_SW/USER"),
    "INVESTIGATE_SW_USER_LINK_SI": (
        "investigate software/user actions or link signal integrity",
        "INVESTIGATE_SW_USER_LINK_SI",
    ),
    "INVESTIGATE_LINK_SI": ("investigate link signal integrity", "INVESTIGATE_LINK_SI"),
    "INVESTIGATE_LINK_SI_AND_CABLES": (
        "investigate link signal integrity and cables",
        "INVESTIGATE_LINK_SI_AND_CABLES",
    ),
    "INVESTIGATE_PEER_DEVICE": (
        "investigate the device at the other end of the link",
        "INVESTIGATE_PEER_DEVICE",
    ),
    "INVESTIGATE_HOST": ("investigate the host (likely secondary to another fault)", "INVESTIGATE_HOST"),
    "XID_154": ("do what the accompanying XID 154 says", "XID_154"),
    "XID_154_EVAL": ("do what an accompanying XID 154 says, else restart the application", "XID_154_EVAL"),
    "SYMPATHETIC_REPORT_SOLO": (
        "fix the accompanying errors first; report if seen alone",
        "SYMPATHETIC_REPORT_SOLO",
    ),
    "REPORT_ISSUE (if seen >1 per day)": ("report to NVIDIA if seen more than once a day", "REPORT_ISSUE"),
    "REPORT_ISSUE": ("report to NVIDIA", "REPORT_ISSUE"),
    "XID_137_FLOW": ("debug the application's NVLink peer access (compute-sanitizer)", "XID_137_FLOW"),
    "CHECK_NVLINK_FAILURE_FLOW": (
        "ignore if a link went down in the last 30 s, else report",
        "CHECK_NVLINK_FAILURE_FLOW",
    ),
}

_CATEGORY_MAP = {
    "memory": "gpu_memory",
    "nvlink": "nvlink",
    "hardware": "gpu_hardware",
    "thermal_power": "gpu_hardware",
    "driver": "gpu_hardware",
    "application": "application",
    "unknown": "unknown",
}
_SEVERITY_STRENGTH = {
    "critical": 90,
    "high": 80,
    "medium": 50,
    "low": 20,
    "unknown": 60,
    "payload_dependent": 60,
}
_CONTEXT_CODES = frozenset({154, 63, 92})
_TEARDOWN_CODES = frozenset({43, 45})
_NVLINK5_CODES = range(144, 151)


def _words(bucket: str) -> str | None:
    bucket = bucket.strip()
    if bucket in BUCKET_WORDS:
        entry = BUCKET_WORDS[bucket]
        return None if entry is None else f"{entry[0]} ({entry[1]})"
    if bucket.upper().startswith("IGNORE"):
        return None
    return f"follow NVIDIA resolution bucket ({bucket})"


def _actions(*buckets: str | None) -> tuple[str, ...]:
    out: list[str] = []
    for bucket in buckets:
        if not bucket:
            continue
        words = _words(bucket)
        if words is not None and words not in out:
            out.append(words)
    return tuple(out)


def _responsible(category: str) -> str:
    if category == "application":
        return "workload"
    if category == "unknown":
        return "unknown"
    return "infrastructure"


def _lower(text: str) -> str:
    return " ".join(text.lower().split())


def _entry_label(code: int, entry: XidEntry | None) -> str:
    if entry is None:
        return f"xid {code} (not in the catalog)"
    short = entry.nvidia_description_short.strip()
    if not short or short.lower() == "unused":
        return f"xid {code} {_lower(entry.name)}"
    return f"xid {code} {_lower(entry.name)}: {_lower(short)}"


def _assess_xid74(event: XidEvent, entry: XidEntry | None, catalog: Catalog) -> XidAssessment:
    actions = _actions(
        entry.immediate_action if entry else None, entry.investigatory_action if entry else None
    )
    decoded = decode_xid74(event.message, catalog)
    if decoded is None:
        return XidAssessment(
            "candidate",
            "nvlink",
            "infrastructure",
            80,
            "xid 74 nvlink error (register decode failed)",
            actions,
        )
    worst = next((b for b in decoded.bits if b.bit_class == decoded.worst_class), None)
    detail = f"{decoded.worst_class}" + (f": {_lower(worst.guidance)}" if worst is not None else "")
    summary = f"xid 74 nvlink link {decoded.link} {detail}"
    if decoded.worst_class == "ignore":
        return XidAssessment("context", "nvlink", "infrastructure", 0, summary, actions)
    if decoded.worst_class.startswith("sympathetic"):
        return XidAssessment("candidate", "nvlink", "infrastructure", 40, summary, actions)
    return XidAssessment("candidate", "nvlink", "infrastructure", 80, summary, actions)


def _short_words(bucket: str) -> str:
    entry = BUCKET_WORDS.get(bucket.strip())
    return bucket.lower() if entry is None else entry[0].lower()


def _assess_nvlink5(
    event: XidEvent, entry: XidEntry | None, driver_version: str | None, catalog: Catalog
) -> XidAssessment:
    decoded = decode_nvlink5(event.code, event.message, driver_version, catalog)
    row = decoded.row if decoded is not None else None
    if decoded is None or row is None:
        why = "payload not recognised" if decoded is None else (decoded.note or "no row matched")
        unit = f" {_lower(decoded.unit)}" if decoded is not None else ""
        actions = _actions(
            entry.immediate_action if entry else None, entry.investigatory_action if entry else None
        )
        summary = f"xid {event.code} nvlink{unit}: decode failed ({_lower(why)})"
        return XidAssessment("candidate", "nvlink", "infrastructure", 70, summary, actions)

    name = _lower(row.subcode.split("/")[-1])
    if decoded.link_down_reason is not None:
        name = f"{name} reason {decoded.link_down_reason}"
    actions = _actions(row.action, row.investigatory)
    base = f"xid {event.code} nvlink {name}"
    if row.action.strip().upper() == "IGNORE":
        summary = f"{base}: {_short_words(row.investigatory)} (no immediate action)"
        return XidAssessment("context", "nvlink", "infrastructure", 5, summary, actions)
    if row.investigatory.strip() == "INVESTIGATE_PEER_DEVICE":
        summary = f"{base}: peer device is the likely source ({_short_words(row.action)})"
        return XidAssessment("candidate", "nvlink", "infrastructure", 60, summary, actions)
    severity = row.severity.strip()
    fatal = severity.startswith("Fatal") or severity.startswith("Link Fatal")
    finding = _short_words(row.investigatory)
    if finding.startswith("investigate "):
        finding = finding[len("investigate ") :]
    summary = f"{base}: {finding} ({_short_words(row.action)})"
    return XidAssessment("candidate", "nvlink", "infrastructure", 85 if fatal else 60, summary, actions)


def _assess_containment(event: XidEvent, entry: XidEntry | None) -> XidAssessment:
    decoded = decode_containment(event.message)
    buckets: list[str | None] = [entry.immediate_action if entry else None]
    if decoded is not None and decoded.drain_and_reset_required:
        buckets.append("DRAIN_AND_RESET")
    if decoded is not None and decoded.reset_required:
        buckets.append("RESET_GPU")
    buckets.append(entry.investigatory_action if entry else None)
    if decoded is None:
        detail = "error containment event (payload not recognised)"
    else:
        kind = "contained" if decoded.contained else "uncontained"
        flags = []
        if decoded.reset_required:
            flags.append("gpu reset required")
        if decoded.drain_and_reset_required:
            flags.append("drain and reset required")
        detail = f"{kind} error in {_lower(decoded.unit)}" + (f" ({', '.join(flags)})" if flags else "")
    strength = 85 if event.code == 95 else 80
    return XidAssessment(
        "candidate",
        "gpu_memory",
        "infrastructure",
        strength,
        f"xid {event.code} {detail}",
        _actions(*buckets),
    )


def _is_ignore_class(entry: XidEntry) -> bool:
    immediate = (entry.immediate_action or "").strip().upper()
    investigatory = (entry.investigatory_action or "").strip().upper()
    return immediate == "IGNORE" and investigatory in ("", "IGNORE")


def assess_xid(event: XidEvent, driver_version: str | None = None) -> XidAssessment:
    """Assess one Xid event by the policy in the module docstring."""
    catalog = load_catalog()
    entry = catalog.get(event.code)
    code = event.code
    actions = _actions(
        entry.immediate_action if entry else None, entry.investigatory_action if entry else None
    )
    label = _entry_label(code, entry)

    if code in _TEARDOWN_CODES:
        if code == 45:
            cause = caused_by_previous(event.message)
            why = f"caused by previous xid {cause}" if cause is not None else "consequence of an abort"
            summary = f"xid 45 channel teardown ({why})"
        else:
            summary = "xid 43 software-induced fault; gpu healthy"
        return XidAssessment("teardown", "application", "workload", 10, summary, actions)

    category = _CATEGORY_MAP.get(entry.category, "unknown") if entry is not None else "unknown"
    responsible = _responsible(entry.category if entry is not None else "unknown")

    if code in _CONTEXT_CODES or (entry is not None and _is_ignore_class(entry)):
        summary = label
        if code == 154:
            decoded = decode_xid154(event.message, catalog)
            if decoded is not None:
                summary = (
                    f"xid 154 recovery action changed: {_lower(decoded.from_text) or 'unknown'} -> "
                    f"{_lower(decoded.to_text) or 'unknown'}"
                )
        return XidAssessment("context", category, responsible, 0, summary, actions)

    if code == 74:
        return _assess_xid74(event, entry, catalog)
    if code in _NVLINK5_CODES:
        return _assess_nvlink5(event, entry, driver_version, catalog)
    if code in (94, 95):
        return _assess_containment(event, entry)
    if entry is not None and entry.category == "application":
        return XidAssessment("candidate", category, responsible, 40, label, actions)
    severity = entry.severity if entry is not None else "unknown"
    return XidAssessment(
        "candidate", category, responsible, _SEVERITY_STRENGTH.get(severity, 60), label, actions
    )


def assess_sxid(event: SxidEvent) -> XidAssessment:
    """Assess one NVSwitch SXid: Fatal → candidate (85), Non-fatal → context, unstated → candidate (50)."""
    link = f" link {event.link}" if event.link is not None else ""
    text = f": {_lower(event.message)}" if event.message else ""
    where = f"nvswitch{event.nvswitch} ({event.pci})"
    if event.fatal is True:
        summary = f"sxid {event.code} fatal on {where}{link}{text}"
        actions = ("reboot the node (RESTART_BM)", "contact NVIDIA support (CONTACT_SUPPORT)")
        return XidAssessment("candidate", "nvlink", "infrastructure", 85, summary, actions)
    if event.fatal is False:
        summary = f"sxid {event.code} non-fatal on {where}{link}{text}"
        return XidAssessment("context", "nvlink", "infrastructure", 0, summary, ())
    summary = f"sxid {event.code} on {where}{link}{text} (severity not stated)"
    return XidAssessment(
        "candidate", "nvlink", "infrastructure", 50, summary, ("contact NVIDIA support (CONTACT_SUPPORT)",)
    )


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


def assess_fallen_off_bus(pci: str) -> XidAssessment:
    """Assess a fallen-off-bus message exactly as XID 79 (catalog entry of 79)."""
    return assess_xid(fallen_off_bus_event(pci))
