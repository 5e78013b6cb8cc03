"""Opt-in remediation: drain the culprit node of an ``attributed`` infrastructure verdict.

Only evidence a user cannot have written drains: the root cause must rest on a kernel line the kernel
wrote (``trust: kernel``) or on the collector's GPU telemetry. An application's own report of a hardware
error, or a kernel-looking line from a mixed syslog file (``trust: unverified``), may explain a verdict
but never drains. Nor does an event that one of our drains of that node already answered: after an
admin resumes the node, only a new event drains it again.

Off by default (``remediation.drain: false``) and dry-run by default when on. Caps: at most
``max_nodes_per_hour`` drains in any hour and at most ``max_partition_percent`` of a partition's nodes
drained by us at once (rounded down, so a small partition may allow none). Every drain is recorded in a
small JSON state file; a node is only ever resumed if that file says we drained it and its current
Slurm reason still carries our ``slurm-attrib:`` prefix. Time is a parameter everywhere.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Optional

from .config import RemediationConfig
from .errors import AttribError
from .model import SOURCE_KERNEL, TRUST_KERNEL, TRUSTED_SOURCES
from .slurm.base import SlurmAccess
from .slurm.errors import SlurmError

REASON_PREFIX = "slurm-attrib:"


class RemediationError(AttribError):
    """A remediation request was refused (e.g. resuming a node slurm-attrib did not drain)."""

    exit_code = 1


@dataclass(frozen=True)
class Decision:
    node: str
    action: str  # drained | dry-run | skipped | failed
    why: str
    reason: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"node": self.node, "action": self.action, "why": self.why, "reason": self.reason}


class DrainLedger:
    """The persistent record of our drains: ``[{node, partition, time, job, reason, resumed}]``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> list[dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        return [d for d in data.get("drains", []) if isinstance(d, dict)] if isinstance(data, dict) else []

    def save(self, drains: list[dict[str, Any]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".tmp-{os.getpid()}-{self.path.name}")
        tmp.write_text(json.dumps({"drains": drains}, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, self.path)

    def active(self) -> list[dict[str, Any]]:
        return [d for d in self.load() if not d.get("resumed")]


def drain_reason(diag: dict[str, Any], job_ref: str) -> str:
    root = diag.get("root_cause") or {}
    kind = str(root.get("kind") or diag.get("category") or "fault")
    code = (root.get("fields") or {}).get("code")
    what = f"{kind} {code}" if code not in (None, "") else kind
    return f"{REASON_PREFIX} {diag.get('category')} {what} job {job_ref}"[:120]


class Remediator:
    def __init__(self, config: RemediationConfig, slurm: SlurmAccess, ledger: DrainLedger) -> None:
        self.config = config
        self.slurm = slurm
        self.ledger = ledger

    def consider(self, diag: dict[str, Any], partition: str, job_ref: str, now: datetime) -> list[Decision]:
        """Decide (and, unless dry-run, do) a drain for each culprit node of ``diag``."""
        nodes = list(diag.get("culprit_nodes") or [])
        why_not = self._verdict_gate(diag)
        if why_not:
            return [Decision(n, "skipped", why_not) for n in nodes]
        return [self._one(node, diag, partition, job_ref, now) for node in nodes]

    def _verdict_gate(self, diag: dict[str, Any]) -> str:
        if not self.config.drain:
            return "remediation is off (remediation.drain: false)"
        if diag.get("status") != "attributed" or diag.get("responsible") != "infrastructure":
            return f"verdict is {diag.get('status')}/{diag.get('responsible')}, not attributed/infrastructure"
        if diag.get("category") not in self.config.categories:
            return f"category {diag.get('category')} is not in remediation.categories"
        return _evidence_gate(diag)

    def _one(self, node: str, diag: dict[str, Any], partition: str, job_ref: str, now: datetime) -> Decision:
        reason = drain_reason(diag, job_ref)
        notes = " ".join(str(a) for a in diag.get("annotations") or [])
        if self.config.require_repeat_offender and f"repeat offender: {node}" not in notes:
            return Decision(node, "skipped", "not a repeat offender (remediation.require_repeat_offender)", reason)
        answered = self._answered(node, diag)
        if answered:
            return Decision(node, "skipped", answered, reason)
        capped = self._cap(partition, now)
        if capped:
            return Decision(node, "skipped", capped, reason)
        info = self.slurm.show_node(node)
        if info is not None and info.drained:
            return Decision(node, "skipped", f"already drained ({info.reason or 'no reason'})", reason)
        if self.config.dry_run:
            return Decision(node, "dry-run", "would drain (remediation.dry_run: true)", reason)
        try:
            self.slurm.drain_node(node, reason)
        except SlurmError as exc:
            return Decision(node, "failed", str(exc), reason)
        drains = self.ledger.load()
        drains.append({"node": node, "partition": partition, "time": now.isoformat(), "job": job_ref,
                       "reason": reason, "resumed": False})
        self.ledger.save(drains)
        return Decision(node, "drained", "attributed infrastructure fault", reason)

    def _answered(self, node: str, diag: dict[str, Any]) -> str:
        """Why this event needs no drain: one of our drains of ``node`` came at or after it (the admin
        who resumed the node since has dealt with it); "" when none did or the event has no time."""
        event = _time((diag.get("root_cause") or {}).get("time"))
        if event is None:
            return ""
        for drain in sorted(self.ledger.load(), key=lambda d: str(d.get("time"))):
            drained = _time(drain.get("time"))
            if drain.get("node") == node and drained is not None and _comparable(drained, event) >= event:
                return (f"the event ({event.isoformat()}) predates our drain of {node} at {drained.isoformat()} "
                        f"(job {drain.get('job')}): already remediated; only a new event drains it again")
        return ""

    def _cap(self, partition: str, now: datetime) -> str:
        drains = self.ledger.load()
        hour_ago = now - timedelta(hours=1)
        recent = [d for d in drains if _time(d.get("time")) and _time(d.get("time")) >= hour_ago]  # type: ignore[operator]
        if len(recent) >= self.config.max_nodes_per_hour:
            return f"cap: {len(recent)} node(s) drained in the last hour (max_nodes_per_hour)"
        members = self.slurm.partition_nodes(partition) if partition else []
        allowed = math.floor(len(members) * self.config.max_partition_percent / 100.0)
        ours = {d["node"] for d in drains if not d.get("resumed") and d.get("node") in members}
        still = [n for n in ours if (info := self.slurm.show_node(n)) is not None and info.drained]
        if len(still) + 1 > allowed:
            return (f"cap: {len(still)} of {len(members)} node(s) of partition {partition or '?'} drained by us; "
                    f"max_partition_percent {self.config.max_partition_percent:g}% allows {allowed}")
        return ""

    def resume(self, node: str, now: datetime) -> Decision:
        """Resume ``node`` only if we drained it and its reason is still ours."""
        drains = self.ledger.load()
        ours = [d for d in drains if d.get("node") == node and not d.get("resumed")]
        if not ours:
            raise RemediationError(f"{node}: not drained by slurm-attrib; refusing to resume it")
        info = self.slurm.show_node(node)
        if info is None or not info.reason.startswith(REASON_PREFIX):
            raise RemediationError(f"{node}: its reason is no longer ours ({info.reason if info else 'unknown'}); "
                                   "someone else owns this drain now")
        self.slurm.resume_node(node)
        for d in ours:
            d["resumed"] = now.isoformat()
        self.ledger.save(drains)
        return Decision(node, "resumed", "drained by slurm-attrib", info.reason)


def _evidence_gate(diag: dict[str, Any]) -> str:
    """"" when the root cause rests on at least one line a user cannot have written, else why not."""
    evidence = (diag.get("root_cause") or {}).get("evidence") or []
    for item in evidence:
        source = item.get("source") if isinstance(item, dict) else None
        if source in TRUSTED_SOURCES or (source == SOURCE_KERNEL and item.get("trust") == TRUST_KERNEL):
            return ""
    kinds = sorted({f"{i.get('source')}{'/' + str(i.get('trust')) if i.get('trust') else ''}"
                    for i in evidence if isinstance(i, dict)}) or ["none"]
    return (f"the root cause rests on evidence a user could have written ({', '.join(kinds)}): it may explain "
            "the verdict, but only kernel lines the kernel wrote or the collector's GPU telemetry drain a node")


def _comparable(value: datetime, like: datetime) -> datetime:
    """``value`` with ``like``'s awareness (ledgers written before times carried a zone hold naive UTC)."""
    if (value.tzinfo is None) == (like.tzinfo is None):
        return value
    return value.replace(tzinfo=like.tzinfo) if value.tzinfo is None else value.replace(tzinfo=None)


def _time(value: Any) -> Optional[datetime]:
    if value in (None, ""):
        return None
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None
