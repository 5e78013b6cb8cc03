"""The domain objects: job facts, evidence references, symptoms, coverage and the Diagnosis.

Everything here is plain data. ``to_dict`` methods give the canonical JSON shape of DESIGN.md §5;
ordering is decided by the engine, never by dict or set iteration order.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any, Optional

SCHEMA_VERSION = 1

CATEGORIES = (
    "gpu_hardware",
    "gpu_memory",
    "nvlink",
    "network",
    "node_failure",
    "storage",
    "host_oom",
    "gpu_oom",
    "application",
    "job_limit",
    "preempted",
    "cancelled",
    "unknown",
)
RESPONSIBLE = ("infrastructure", "workload", "scheduler", "unknown")
STATUSES = ("attributed", "ambiguous", "unattributed")
ROLES = ("candidate", "cascade", "teardown", "context")
COVERAGE_STATES = ("ok", "empty", "error", "timeout", "skipped", "missing")

# Evidence sources: which part of the bundle a line came from.
SOURCE_KERNEL = "kernel"
SOURCE_APP = "app"
SOURCE_SCHEDULER = "scheduler"
SOURCE_METRICS = "metrics"
SOURCE_DIAG = "diag"  # tool output pasted or captured as text: nvidia-smi, dcgmi diag, nvidia-bug-report


def connector_of(source: str) -> str:
    """The coverage report's name for the connector that brings evidence of ``source``."""
    return {SOURCE_KERNEL: "kernel_log", SOURCE_APP: "app_log", SOURCE_METRICS: "gpu_metrics",
            SOURCE_SCHEDULER: "sacct", SOURCE_DIAG: "gpu_diag"}.get(source, source)

SCOPES = ("gpu", "link", "node", "filesystem", "rank", "workload")
RAW_LINE_CAP = 2048  # characters of a raw line kept as evidence; the offset points at the rest


def iso(dt: Optional[datetime]) -> Optional[str]:
    """The project's canonical time string (UTC, microseconds, 'Z'), or None."""
    if dt is None:
        return None
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class Step:
    """One job step as sacct reports it."""

    id: str
    state: str
    exit_code: str
    nodes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "state": self.state, "exit_code": self.exit_code, "nodes": list(self.nodes)}


@dataclass(frozen=True)
class JobFacts:
    """The facts of job.yaml (DESIGN.md §3), normalised."""

    job_id: str
    cluster: str = ""
    user: str = ""
    partition: str = ""
    nodes: tuple[str, ...] = ()
    start: Optional[datetime] = None
    end: Optional[datetime] = None
    state: str = ""
    exit_code: str = "0:0"
    derived_exit_code: str = "0:0"
    ranks: tuple[tuple[int, str], ...] = ()
    steps: tuple[Step, ...] = ()
    addresses: tuple[tuple[str, str], ...] = ()  # (address, node)
    node_bundles: tuple[tuple[str, str], ...] = ()  # (node, ok|missing|error)
    timezone: str = "UTC"
    timezone_source: str = "default"  # job.yaml timezone | the offset of the job's start time | default
    gpus_per_node: Optional[int] = None
    restart_count: int = 0
    array_job_id: str = ""
    array_task_id: str = ""
    # what `watch`'s connectors got (job.yaml collection.sources): (name, state, reason, bytes, query)
    collection_sources: tuple[tuple[str, str, str, int, str], ...] = ()

    @cached_property
    def _rank_map(self) -> dict[int, str]:
        return dict(self.ranks)

    def rank_node(self, rank: int) -> Optional[str]:
        return self._rank_map.get(rank)

    @cached_property
    def _node_ranks(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for rank, node in self.ranks:  # ranks are sorted
            out.setdefault(node, []).append(rank)
        return out

    def node_ranks(self, node: str) -> list[int]:
        """The global ranks on ``node``, ascending (local rank i is the i-th)."""
        return self._node_ranks.get(node, [])

    @cached_property
    def one_rank_per_node(self) -> bool:
        """Whether the rank map runs at most one rank on each of the job's nodes (a 512-node job's app files
        each ask it of every labelled line)."""
        return all(len(self.node_ranks(n)) <= 1 for n in self.nodes)

    @cached_property
    def missing_bundles(self) -> tuple[str, ...]:
        """The nodes whose node bundle never arrived (:attr:`node_bundles`), in its order."""
        return tuple(node for node, state in self.node_bundles if state == "missing")

    @cached_property
    def own_id_known(self) -> bool:
        """Whether the bundle names the job by its own id. An array task named only '<array>_<task>' has an id of its
        own that the bundle does not carry, and Slurm uses that one in the task's cgroup ('job_<id>') and step ids
        ('StepId=<id>.0'): another id there may still be this job's."""
        return "_" not in self.job_id.split("+", 1)[0]

    @cached_property
    def node_set(self) -> frozenset[str]:
        """:attr:`nodes` for membership tests: a line's host is looked up once per symptom."""
        return frozenset(self.nodes)

    @cached_property
    def _address_map(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for addr, node in self.addresses:
            out.setdefault(addr, node)  # the first listing of an address wins, as in the file
        return out

    def node_for_address(self, address: str) -> Optional[str]:
        return self._address_map.get(address)

    @cached_property
    def _short_names(self) -> dict[str, str]:
        """The job's fully qualified node names by their first label, where only one node has that label."""
        seen: dict[str, list[str]] = {}
        for node in self.nodes:
            short, dot, _ = node.partition(".")
            if dot and short:
                seen.setdefault(short, []).append(node)
        return {short: names[0] for short, names in seen.items() if len(names) == 1 and short not in self.node_set}

    def node_for_short_name(self, name: str) -> Optional[str]:
        """The node whose fully qualified name (a NodeName such as 'node48.cluster.local') starts with ``name`` as
        its first label: NCCL and most programs print the host name cut at its first dot."""
        return self._short_names.get(name) if "." not in name else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "cluster": self.cluster,
            "user": self.user,
            "partition": self.partition,
            "nodes": list(self.nodes),
            "start": iso(self.start),
            "end": iso(self.end),
            "state": self.state,
            "exit_code": self.exit_code,
            "derived_exit_code": self.derived_exit_code,
            "steps": [s.to_dict() for s in self.steps],
            "restart_count": self.restart_count,
            "gpus_per_node": self.gpus_per_node,
            "array_job_id": self.array_job_id,
            "array_task_id": self.array_task_id,
        }


TRUST_KERNEL = "kernel"  # a line only the kernel can have written (the journal's kernel transport, dmesg)
TRUST_UNVERIFIED = "unverified"  # reads like the kernel's, but a local program could have written it
# Evidence that may drain a node: kernel lines only the kernel wrote, and what the collector's GPU tools
# measured (metrics/). Application logs are the user's; diag/ holds tool output someone pasted.
TRUSTED_SOURCES = ("metrics",)


def _rebuilt(obj: Any) -> tuple[Any, tuple[Any, ...]]:
    """Pickle a dataclass as a call of its constructor with its fields, not as a bare instance whose
    ``__dict__`` is filled in afterwards: CPython's attribute lookups are specialised for instances
    built by ``__init__`` (a dictionary sharing its class's keys), and a forked helper's symptoms, unpickled
    the default way, slowed every later phase by a third (bench/README.md, round fourteen). The fields go
    positionally (keywords cost four times as much to unpickle); attributes that are no ``__init__`` field
    come back as they were, set after it."""
    cls: type = type(obj)
    names = _init_fields(cls)
    args = tuple(getattr(obj, name) for name in names)
    if len(obj.__dict__) == len(names):
        return cls, args
    return _rebuild, (cls, args, {k: v for k, v in obj.__dict__.items() if k not in names})


def _rebuild(cls: type, args: tuple[Any, ...], extra: dict[str, Any]) -> Any:
    obj = cls(*args)
    for name, value in extra.items():
        object.__setattr__(obj, name, value)  # a frozen EvidenceRef too
    return obj


@functools.cache
def _init_fields(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls) if f.init)


@dataclass(frozen=True)
class EvidenceRef:
    """Where a symptom's raw line is: file inside the bundle, 1-based line, byte offset."""

    source: str
    node: Optional[str]
    file: str
    line: int
    offset: int
    time: Optional[datetime]
    raw: str
    trust: str = ""  # kernel lines: TRUST_KERNEL or TRUST_UNVERIFIED; "" for sources whose name says it

    def sort_key(self) -> tuple[str, int]:
        return (self.file, self.line)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return _rebuilt(self)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "source": self.source,
            "node": self.node,
            "file": self.file,
            "line": self.line,
            "offset": self.offset,
            "time": iso(self.time),
            "raw": self.raw,
        }
        if self.trust:
            out["trust"] = self.trust
        return out


@dataclass
class Symptom:
    """A fact extracted from evidence by one rule, with its role decided by later phases."""

    kind: str
    rule_id: str
    node: Optional[str]
    time: Optional[datetime]
    evidence: list[EvidenceRef]
    gpu: Optional[str] = None
    rank: Optional[int] = None
    fields: dict[str, Any] = field(default_factory=dict)
    role: str = "context"
    category: str = "unknown"
    responsible: str = "unknown"
    strength: int = 0
    summary: str = ""
    actions: tuple[str, ...] = ()
    id: str = ""
    dropped: Optional[str] = None  # why the filter phase ruled it out, or None
    supports: Optional[str] = None  # id of the root symptom this one is a consequence of
    notes: list[str] = field(default_factory=list)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return _rebuilt(self)

    def sort_key(self) -> tuple[Any, ...]:
        """Stable order: time (unknown last), node, evidence position, rule."""
        first = self.evidence[0] if self.evidence else None
        return (
            self.time is None,
            self.time.timestamp() if self.time else 0.0,
            self.node or "",
            first.file if first else "",
            first.line if first else 0,
            self.rule_id,
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind,
            "rule": self.rule_id,
            "node": self.node,
            "gpu": self.gpu,
            "rank": self.rank,
            "time": iso(self.time),
            "role": self.role,
            "category": self.category,
            "responsible": self.responsible,
            "strength": self.strength,
            "summary": self.summary,
            "fields": self.fields,
            "evidence": [e.to_dict() for e in self.evidence],
        }
        if self.supports:
            out["supports"] = self.supports
        if self.dropped:
            out["dropped"] = self.dropped
        if self.notes:
            out["notes"] = list(self.notes)
        return out


@dataclass
class Coverage:
    """What one connector (evidence source) contributed, for the coverage report."""

    connector: str
    state: str
    reason: str = ""
    files: int = 0
    lines: int = 0
    bytes: int = 0
    symptoms: int = 0
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "connector": self.connector,
            "state": self.state,
            "reason": self.reason,
            "files": self.files,
            "lines": self.lines,
            "bytes": self.bytes,
            "symptoms": self.symptoms,
            "notes": sorted(set(self.notes)),
        }


@dataclass(frozen=True)
class RuleFired:
    """A rule that changed the outcome: extracted, filtered or decided something."""

    id: str
    version: int
    phase: str
    count: int

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "version": self.version, "phase": self.phase, "count": self.count}


@dataclass
class Diagnosis:
    """The verdict on one job: DESIGN.md §5."""

    job: JobFacts
    status: str
    category: str
    responsible: str
    root_cause: Optional[Symptom]
    culprit_nodes: list[str]
    supporting: list[Symptom]
    candidates: list[Symptom]
    evidence: list[EvidenceRef]
    rules_fired: list[RuleFired]
    coverage: list[Coverage]
    recommended_actions: list[str]
    ruleset: dict[str, Any]
    engine_version: str
    summary: str
    time_assumptions: list[str] = field(default_factory=list)
    annotations: list[str] = field(default_factory=list)
    scope: str = "workload"  # what the verdict is about: gpu | link | node | filesystem | rank | workload

    def to_dict(self) -> dict[str, Any]:
        root = self.root_cause
        return {
            "schema_version": SCHEMA_VERSION,
            "job": self.job.to_dict(),
            "status": self.status,
            "category": self.category,
            "responsible": self.responsible,
            "summary": self.summary,
            "root_cause": _root_dict(root) if root else None,
            "culprit_nodes": list(self.culprit_nodes),
            "supporting_symptoms": [s.to_dict() for s in self.supporting],
            "candidates": [_root_dict(c) for c in self.candidates],
            "evidence": [e.to_dict() for e in self.evidence],
            "rules_fired": [r.to_dict() for r in self.rules_fired],
            "coverage": [c.to_dict() for c in self.coverage],
            "recommended_actions": list(self.recommended_actions),
            "scope": self.scope,
            "time_assumptions": list(self.time_assumptions),
            "annotations": list(self.annotations),
            "ruleset": dict(self.ruleset),
            "engine_version": self.engine_version,
        }


def _root_dict(sym: Symptom) -> dict[str, Any]:
    out = sym.to_dict()
    out["line"] = sym.summary
    return out
