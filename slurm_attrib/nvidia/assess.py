"""Assess what one NVIDIA driver event (Xid, SXid, fallen-off-bus) says about a job failure.

Assessment policy (:func:`assess_xid`, :func:`assess_sxid`, :func:`assess_fallen_off_bus`)
------------------------------------------------------------------------------------------
``role`` is ``candidate`` (can be the root cause of a job failure), ``teardown`` (a consequence of an
abort) or ``context`` (informational).  ``strength`` (0-100) says how strongly the event alone
explains a job failure.  The tables are data in the policy overlay ``slurm_attrib/data/xid_policy.yaml``
(:mod:`slurm_attrib.nvidia.policy`); the values below are the shipped ones.  Rules, first match wins:

1. Category map (overlay ``categories``): catalog category memory → ``gpu_memory``, nvlink →
   ``nvlink``, hardware / thermal_power / driver → ``gpu_hardware``, application → ``application``,
   unknown → ``unknown``.  Responsible: application → ``workload``, unknown → ``unknown``, everything
   else → ``infrastructure``.
2. Teardown codes (overlay ``teardown_codes``: XID 45 channel teardown, 43 software-induced fault with
   a healthy GPU): role ``teardown``, category ``application``, responsible ``workload``, strength 10.
3. Context codes (overlay ``context_codes``: XID 154, 63, 92), and every XID whose immediate action is
   IGNORE and whose investigatory action is IGNORE or blank: role ``context``, strength 0.
4. XID 74: decode the registers; the worst bit class (overlay ``xid74_classes`` orders them)
   ``ignore`` → context (0); a sympathetic class (``sympathetic``, ``sympathetic_fabric_reset``) →
   candidate 40; anything else, including an undecodable payload → candidate 80.  Category ``nvlink``.
5. XID 144-150: decode (see :func:`decode_nvlink5`); matched row whose effective action is IGNORE →
   context, strength 5; investigatory INVESTIGATE_PEER_DEVICE → candidate 60 and the summary says
   the peer device is the likely source; action RESET_GPU / XID_154_EVAL → candidate 85 for
   ``Fatal`` / ``Link Fatal`` rows (with their ``*``/``?`` marks), else 60; no single row matched
   (no match, ambiguous, or unparseable payload) → candidate 70 and the summary says the decode
   failed.  Category ``nvlink``.
6. XID 94 / 95: candidate, ``gpu_memory``, strength 80 / 85.
7. Catalog category application → candidate 40.
8. Any other XID: candidate with strength from the catalog severity (overlay ``severity_strength``):
   critical 90, high 80, medium 50, low 20, unknown / payload_dependent 60.  An XID missing from the
   catalog is treated as category and severity unknown.

SXids: ``Fatal`` → candidate, ``nvlink``, ``infrastructure``, 85; ``Non-fatal`` → context, 0; an SXid
that states neither (SOE / engine forms) → candidate 50 (not covered by the brief; chosen here).
A fallen-off-bus message without an Xid line is assessed exactly as XID 79.

``actions`` lists the catalog resolution buckets in plain words (overlay ``bucket_words``) with the
bucket name in parentheses, immediate first then investigatory, without duplicates and without
IGNORE entries.
"""

from __future__ import annotations

from dataclasses import dataclass

from slurm_attrib.nvidia.catalog import Catalog, XidEntry, load_catalog
from slurm_attrib.nvidia.decode import decode_containment, decode_nvlink5, decode_xid74, decode_xid154
from slurm_attrib.nvidia.parse import SxidEvent, XidEvent, caused_by_previous, fallen_off_bus_event
from slurm_attrib.nvidia.policy import XidPolicy, load_policy

__all__ = [
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
    # the categories an Xid of unknown catalog category fits alike (from NVIDIA's legacy cause table):
    # alone it makes the verdict ambiguous with one candidate each rather than attributed to "unknown"
    readings: tuple[str, ...] = ()


_NVLINK5_CODES = range(144, 151)  # the codes whose payload decode_nvlink5 reads


def _words(bucket: str, policy: XidPolicy) -> str | None:
    """A bucket in plain words with its name in parentheses; None for a bucket that asks for nothing."""
    bucket = bucket.strip()
    if bucket in policy.bucket_words:
        entry = policy.bucket_words[bucket]
        return None if entry is None else f"{entry[0]} ({entry[1]})"
    if bucket.upper().startswith("IGNORE"):
        return None
    return f"follow NVIDIA resolution bucket ({bucket})"


def _actions(policy: XidPolicy, *buckets: str | None) -> tuple[str, ...]:
    out: list[str] = []
    for bucket in buckets:
        if not bucket:
            continue
        words = _words(bucket, policy)
        if words is not None and words not in out:
            out.append(words)
    return tuple(out)


def _entry_actions(entry: XidEntry | None, policy: XidPolicy) -> tuple[str, ...]:
    """The catalog entry's immediate then investigatory bucket, in plain words."""
    if entry is None:
        return ()
    return _actions(policy, entry.immediate_action, entry.investigatory_action)


def _lower(text: str) -> str:
    return " ".join(text.lower().split())


def _entry_label(code: int, entry: XidEntry | None) -> str:
    if entry is None:
        return f"xid {code} (not in the catalog)"
    short = entry.nvidia_description_short.strip()
    if not short or short.lower() == "unused":
        return f"xid {code} {_lower(entry.name)}"
    return f"xid {code} {_lower(entry.name)}: {_lower(short)}"


def _assess_xid74(event: XidEvent, entry: XidEntry | None, catalog: Catalog, policy: XidPolicy) -> XidAssessment:
    actions = _entry_actions(entry, policy)
    decoded = decode_xid74(event.message, catalog, policy)
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


def _short_words(bucket: str, policy: XidPolicy) -> str:
    entry = policy.bucket_words.get(bucket.strip())
    return bucket.lower() if entry is None else entry[0].lower()


def _assess_nvlink5(
    event: XidEvent, entry: XidEntry | None, driver_version: str | None, catalog: Catalog, policy: XidPolicy
) -> XidAssessment:
    decoded = decode_nvlink5(event.code, event.message, driver_version, catalog)
    row = decoded.row if decoded is not None else None
    if decoded is None or row is None:
        why = "payload not recognised" if decoded is None else (decoded.note or "no row matched")
        unit = f" {_lower(decoded.unit)}" if decoded is not None else ""
        actions = _entry_actions(entry, policy)
        summary = f"xid {event.code} nvlink{unit}: decode failed ({_lower(why)})"
        return XidAssessment("candidate", "nvlink", "infrastructure", 70, summary, actions)

    name = _lower(row.subcode.split("/")[-1])
    if decoded.link_down_reason is not None:
        name = f"{name} reason {decoded.link_down_reason}"
    actions = _actions(policy, row.action, row.investigatory)
    base = f"xid {event.code} nvlink {name}"
    if row.action.strip().upper() == "IGNORE":
        summary = f"{base}: {_short_words(row.investigatory, policy)} (no immediate action)"
        return XidAssessment("context", "nvlink", "infrastructure", 5, summary, actions)
    if row.investigatory.strip() == "INVESTIGATE_PEER_DEVICE":
        summary = f"{base}: peer device is the likely source ({_short_words(row.action, policy)})"
        return XidAssessment("candidate", "nvlink", "infrastructure", 60, summary, actions)
    severity = row.severity.strip()
    fatal = severity.startswith("Fatal") or severity.startswith("Link Fatal")
    finding = _short_words(row.investigatory, policy)
    if finding.startswith("investigate "):
        finding = finding[len("investigate ") :]
    summary = f"{base}: {finding} ({_short_words(row.action, policy)})"
    return XidAssessment("candidate", "nvlink", "infrastructure", 85 if fatal else 60, summary, actions)


def _assess_containment(event: XidEvent, entry: XidEntry | None, policy: XidPolicy) -> XidAssessment:
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
        _actions(policy, *buckets),
    )


def _is_ignore_class(entry: XidEntry) -> bool:
    immediate = (entry.immediate_action or "").strip().upper()
    investigatory = (entry.investigatory_action or "").strip().upper()
    return immediate == "IGNORE" and investigatory in ("", "IGNORE")


def assess_xid(event: XidEvent, driver_version: str | None = None, policy: XidPolicy | None = None) -> XidAssessment:
    """Assess one Xid event by the rules in the module docstring and the tables of the policy overlay
    (the packaged one unless ``policy`` is given)."""
    policy = policy if policy is not None else load_policy()
    catalog = load_catalog()
    entry = catalog.get(event.code)
    code = event.code
    actions = _entry_actions(entry, policy)
    if code in policy.teardown_codes:
        return XidAssessment("teardown", "application", "workload", 10, _teardown_summary(event, entry), actions)
    category, responsible = policy.categories[entry.category if entry is not None else "unknown"]
    if code in policy.context_codes or (entry is not None and _is_ignore_class(entry)):
        return XidAssessment("context", category, responsible, 0, _context_summary(event, entry, catalog), actions)
    if code == 74:
        return _assess_xid74(event, entry, catalog, policy)
    if code in _NVLINK5_CODES:
        return _assess_nvlink5(event, entry, driver_version, catalog, policy)
    if code in (94, 95):
        return _assess_containment(event, entry, policy)
    label = _entry_label(code, entry)
    if entry is not None and entry.category == "application":
        return XidAssessment("candidate", category, responsible, 40, label, actions)
    strength = policy.severity_strength[entry.severity if entry is not None else "unknown"]
    readings = _legacy_readings(entry, policy) if category == "unknown" else ()
    if len(readings) == 1:  # every listed cause is of one kind (a driver fault): that is its category
        category, responsible = next((c, r) for c, r in policy.categories.values() if c == readings[0])
        readings = ()
    return XidAssessment("candidate", category, responsible, strength, label, actions, readings)


# NVIDIA's pre-Ampere cause table (catalog legacy_causes) in the catalog's own categories: hardware, bus,
# thermal, frame buffer corruption and driver are all the GPU's side; a host memory fault is the node's,
# not a reading of the GPU line
_LEGACY_CAUSES = {"hw": "hardware", "bus": "hardware", "thermal": "thermal_power", "fb_corruption": "hardware",
                  "driver": "driver", "user_app": "application"}


def _legacy_readings(entry: XidEntry | None, policy: XidPolicy) -> tuple[str, ...]:
    """The diagnosis categories of an Xid's legacy causes, sorted, without repeats."""
    causes = (entry.legacy_causes or ()) if entry is not None else ()
    return tuple(sorted({policy.categories[_LEGACY_CAUSES[c]][0] for c in causes if c in _LEGACY_CAUSES}))


def _teardown_summary(event: XidEvent, entry: XidEntry | None) -> str:
    if event.code == 45:
        cause = caused_by_previous(event.message)
        why = f"caused by previous xid {cause}" if cause is not None else "consequence of an abort"
        return f"xid 45 channel teardown ({why})"
    if event.code == 43:
        return "xid 43 software-induced fault; gpu healthy"
    return _entry_label(event.code, entry)


def _context_summary(event: XidEvent, entry: XidEntry | None, catalog: Catalog) -> str:
    decoded = decode_xid154(event.message, catalog) if event.code == 154 else None
    if decoded is None:
        return _entry_label(event.code, entry)
    return (f"xid 154 recovery action changed: {_lower(decoded.from_text) or 'unknown'} -> "
            f"{_lower(decoded.to_text) or 'unknown'}")


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
