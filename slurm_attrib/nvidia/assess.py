"""Assess what one NVIDIA driver event (Xid, SXid, fallen-off-bus) says about a job failure.

Assessment policy (:func:`assess_xid`, :func:`assess_sxid`, :func:`assess_fallen_off_bus`)
------------------------------------------------------------------------------------------
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

from dataclasses import dataclass

from slurm_attrib.nvidia.catalog import Catalog, XidEntry, load_catalog
from slurm_attrib.nvidia.decode import decode_containment, decode_nvlink5, decode_xid74, decode_xid154
from slurm_attrib.nvidia.parse import SxidEvent, XidEvent, caused_by_previous, fallen_off_bus_event

__all__ = [
    "BUCKET_WORDS",
    "XidAssessment",
    "assess_fallen_off_bus",
    "assess_sxid",
    "assess_xid",
]


@dataclass(frozen=True)
class XidAssessment:
    """What one event says about a job failure (policy in the module docstring)."""

    role: str  # 'candidate' | 'teardown' | 'context'
    category: str  # gpu_hardware | gpu_memory | nvlink | application | unknown
    responsible: str  # infrastructure | workload | unknown
    strength: int  # 0-100
    summary: str
    actions: tuple[str, ...]


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


def assess_fallen_off_bus(pci: str) -> XidAssessment:
    """Assess a fallen-off-bus message exactly as XID 79 (catalog entry of 79)."""
    return assess_xid(fallen_off_bus_event(pci))
