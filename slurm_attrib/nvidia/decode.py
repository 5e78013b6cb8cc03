"""Decode the structured payloads of NVIDIA Xid messages against the packaged XID catalog
(:mod:`slurm_attrib.nvidia.catalog`).

XID 74 (seven NVLink registers), XID 144-150 (NVLink-5 IntrInfo/ErrorStatus against the catalog
masks, driver branch v1 < R575 <= v2), XID 154 (recovery action change) and XID 94/95 (error
containment).  Decoders are pure and return ``None`` for a payload they do not recognise; they
never raise on garbage.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from slurm_attrib.nvidia.catalog import Catalog, Nvlink5Rule, load_catalog
from slurm_attrib.nvidia.policy import XidPolicy, load_policy

__all__ = [
    "ContainmentDecode",
    "Nvlink5Decode",
    "Nvlink5Match",
    "Xid74Bit",
    "Xid74Decode",
    "Xid154Decode",
    "decode_containment",
    "decode_nvlink5",
    "decode_xid74",
    "decode_xid154",
]


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


# --------------------------------------------------------------------------------------------------
# regexes (compiled once)

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
_DRIVER_MAJOR_RE = re.compile(r"\s*[rR]?(?P<major>\d+)")


_UNLISTED_GUIDANCE = "bit not listed by NVIDIA: report a bug"


def decode_xid74(
    message: str, catalog: Catalog | None = None, policy: XidPolicy | None = None
) -> Xid74Decode | None:
    """Decode ``NVLink: fatal error detected on link 14(0x0, 0x0, 0x10000, ...)``; the worst class is the
    most serious by the policy's ``xid74_classes``."""
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
    rank = (policy if policy is not None else load_policy()).xid74_rank
    worst = max((b.bit_class for b in bits), key=rank, default="none")
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
