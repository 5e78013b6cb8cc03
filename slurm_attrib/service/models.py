"""The API's documents as typed models, so the OpenAPI document is generated from them. They mirror
:meth:`slurm_attrib.model.Diagnosis.to_dict` key for key (``extra="forbid"``: a test validates every
golden case's diagnosis against them, so a new key in the Diagnosis fails until it is described here).
Responses are still written as canonical JSON by the service; the models describe, they do not reorder."""

from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Step(_Strict):
    id: str
    state: str
    exit_code: str
    nodes: list[str]


class Job(_Strict):
    job_id: str
    cluster: str
    user: str
    partition: str
    nodes: list[str]
    start: Optional[str]
    end: Optional[str]
    state: str
    exit_code: str
    derived_exit_code: str
    steps: list[Step]
    restart_count: int
    gpus_per_node: Optional[int]
    array_job_id: str
    array_task_id: str


class Evidence(_Strict):
    """A raw line: file inside the bundle, 1-based line number, byte offset."""

    source: str
    node: Optional[str]
    file: str
    line: int
    offset: int
    time: Optional[str]
    raw: str
    trust: Optional[str] = Field(None, description="kernel lines: kernel or unverified")


class Symptom(_Strict):
    id: str
    kind: str
    rule: str
    node: Optional[str]
    gpu: Optional[str]
    rank: Optional[int]
    time: Optional[str]
    role: str
    category: str
    responsible: str
    strength: int
    summary: str
    fields: dict[str, Any]
    evidence: list[Evidence]
    supports: Optional[str] = None
    dropped: Optional[str] = None
    notes: Optional[list[str]] = None


class RootCause(Symptom):
    line: str = Field(description="the root cause in one line")


class Coverage(_Strict):
    connector: str
    state: str
    reason: str
    files: int
    lines: int
    bytes: int
    symptoms: int
    notes: list[str]


class RuleFired(_Strict):
    id: str
    version: int
    phase: str
    count: int


class Diagnosis(_Strict):
    """The verdict on one job (DESIGN.md section 5), as ``slurm-attrib diagnose --format json`` prints it."""

    schema_version: int
    job: Job
    status: str = Field(description="attributed, ambiguous or unattributed")
    category: str
    responsible: str = Field(description="infrastructure, workload, scheduler or unknown")
    summary: str
    root_cause: Optional[RootCause]
    culprit_nodes: list[str]
    supporting_symptoms: list[Symptom]
    candidates: list[RootCause]
    evidence: list[Evidence]
    rules_fired: list[RuleFired]
    coverage: list[Coverage]
    recommended_actions: list[str]
    scope: str
    time_assumptions: list[str]
    annotations: list[str]
    ruleset: dict[str, Any]
    engine_version: str


class VerdictRow(BaseModel):
    """One row of ``slurm-attrib query`` (its columns)."""

    job_time: Optional[str]
    cluster: str
    job_id: str
    array_task: str
    restart_count: int
    user: Optional[str]
    partition: Optional[str]
    state: Optional[str]
    status: str
    category: str
    responsible: str
    culprit_nodes: Optional[str]
    gpu_hours: Optional[float]
    root_summary: Optional[str]


class VerdictPage(BaseModel):
    items: list[VerdictRow]
    next_cursor: Optional[str] = Field(None, description="pass as ?cursor= for the next page; null on the last")


class PreviousVerdict(BaseModel):
    restart_count: int
    verdict_id: str
    verdict_time: Optional[str]
    replaced_time: Optional[str]
    status: str
    category: str
    responsible: str
    culprit_nodes: Optional[str]
    ruleset_hash: Optional[str]


class StoredBundle(BaseModel):
    stored_bytes: int
    original_bytes: int
    files: int
    capped: bool
    omitted: list[str]
    names: list[str] = Field(description="the evidence files kept with the verdict")


class JobVerdict(BaseModel):
    """A stored verdict, as ``slurm-attrib show --format json``, with the evidence file names."""

    diagnosis: Diagnosis
    verdict_id: str
    verdict_time: Optional[str]
    gpu_hours: Optional[float]
    bundle: Optional[StoredBundle]
    culprit_history: dict[str, list[str]]
    previous_verdicts: list[PreviousVerdict]


class NodeRow(BaseModel):
    """One row of ``slurm-attrib nodes``."""

    cluster: str
    node: str
    gpus: str
    jobs: int
    categories: str
    first_seen: Optional[str]
    last_seen: Optional[str]
    gpu_hours: Optional[float]


class GroupCount(BaseModel):
    jobs: int
    gpu_hours: float


class StatsBucket(BaseModel):
    """One bucket of ``slurm-attrib stats --format json``."""

    bucket: str
    jobs: int
    gpu_hours: float
    unattributed_rate: float
    ambiguous_rate: float
    by_status: dict[str, int]
    by_category: dict[str, GroupCount]
    by_responsible: dict[str, GroupCount]


class RuleInfo(BaseModel):
    id: str
    version: int
    phase: str
    title: str
    origin: str
    status: str


class NodeBundleReceipt(BaseModel):
    job_key: str
    node: str
    files: int
    replaced: bool = Field(description="an earlier bundle of the same node was replaced (a retry)")


class Problem(BaseModel):
    """Every error: one line that says why."""

    detail: str


class Health(BaseModel):
    status: str
    version: str
    store: str
