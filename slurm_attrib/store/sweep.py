"""Backfill: every failed job sacct knows in a window that has no verdict in the store gets one, from
whatever evidence is reachable — the job facts sacct gives, plus the job's spooled bundle if one exists.
Slurm is asked through the Slurm access layer (:meth:`SlurmAccess.failed_jobs`), or captured sacct output
stands in for it (:class:`slurm_attrib.slurm.CapturedSacct`)."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Optional, Protocol, Union

import yaml

from ..engine import Engine
from ..errors import AttribError
from ..settings import DEFAULT_HISTORY_DAYS
from ..slurm.records import AcctRecord
from .db import Store
from .errors import StoreError
from .history import settings_with_history
from .progress import ProgressCallback
from .rows import JobKey

EVIDENCE_DIRS = ("applog", "syslog", "metrics", "facts", "sacct")
Gather = Callable[[AcctRecord, Path], str]  # fills a bundle folder for a job; says which sources brought evidence


class FailedJobSource(Protocol):
    """Where the sweep learns which jobs failed in a window: a Slurm backend, or captured output."""

    def failed_jobs(self, since: datetime, until: datetime) -> list[AcctRecord]: ...


def job_yaml(job: AcctRecord) -> dict[str, Any]:
    """The job.yaml facts (DESIGN.md §3) sacct knows; the raw id is the job id the hooks see."""
    facts: dict[str, Any] = {"job_id": job.job_id_raw or job.job_id, "cluster": job.cluster, "user": job.user,
                             "partition": job.partition, "nodes": list(job.nodes), "state": job.state,
                             "exit_code": job.exit_code or "0:0", "derived_exit_code": job.derived_exit_code or "0:0"}
    for key, when in (("start", job.start), ("end", job.end)):
        if when is not None:
            facts[key] = when.strftime("%Y-%m-%dT%H:%M:%SZ")
    array_job_id, array_task_id = job.array_ids
    if array_job_id:
        facts["array_job_id"], facts["array_task_id"] = array_job_id, array_task_id
    return facts


@dataclass(frozen=True)
class SweepResult:
    """One failed job: ``action`` is recorded | has-verdict | would-record | error."""

    cluster: str
    job_id: str
    state: str
    action: str
    status: str = ""
    category: str = ""
    culprit_nodes: str = ""
    evidence: str = ""  # sacct | sacct+spool
    detail: str = ""

    def to_row(self) -> dict[str, Any]:
        return dict(self.__dict__)


def find_spooled_bundle(spool: Optional[Path], job: AcctRecord) -> Optional[Path]:
    """``SPOOL/<cluster>/<job id>/`` or ``SPOOL/<job id>/`` (raw or printed id), if it is a directory."""
    if spool is None:
        return None
    for job_id in dict.fromkeys((job.job_id_raw, job.job_id)):
        for candidate in ([spool / job.cluster / job_id] if job.cluster else []) + [spool / job_id]:
            if candidate.is_dir() and not candidate.is_symlink():
                return candidate
    return None


def build_bundle(job: AcctRecord, dest: Path, spooled: Optional[Path]) -> None:
    """Write a bundle for ``job`` into ``dest``: the spooled evidence (if any), and a job.yaml whose
    facts come from sacct, keeping what only the spooled job.yaml knows (ranks, gpus_per_node ...)."""
    facts: dict[str, Any] = {}
    gathered = dest / "job.yaml"
    if spooled is None and gathered.is_file():  # what the connectors wrote (their coverage in `collection`)
        loaded = yaml.safe_load(gathered.read_text(encoding="utf-8"))
        facts = loaded if isinstance(loaded, dict) else {}
    if spooled is not None:
        for name in EVIDENCE_DIRS:
            if (spooled / name).is_dir() and not (spooled / name).is_symlink():
                shutil.copytree(spooled / name, dest / name, symlinks=True)
        old = spooled / "job.yaml"
        if old.is_file() and not old.is_symlink():
            loaded = yaml.safe_load(old.read_text(encoding="utf-8", errors="replace"))
            facts = loaded if isinstance(loaded, dict) else {}
    facts.update({k: v for k, v in job_yaml(job).items() if v not in ("", [], None)})
    (dest / "job.yaml").write_text(yaml.safe_dump(facts, sort_keys=True), encoding="utf-8")


def sweep(store: Store, engine: Engine, source: FailedJobSource, since: datetime, until: datetime,
          verdict_time: datetime, *, spool: Optional[Union[str, Path]] = None, dry_run: bool = False,
          history_days: float = DEFAULT_HISTORY_DAYS, progress: Optional[ProgressCallback] = None,
          gather: Optional[Gather] = None) -> list[SweepResult]:
    """Diagnose and record every failed job in [since, until) that has no verdict yet. A job without a
    spooled bundle gets what ``gather`` finds for it (``sweep --connectors``: Loki, Prometheus)."""
    jobs = sorted(source.failed_jobs(since, until), key=lambda j: (j.cluster, j.end or since, j.job_id))
    results = []
    for done, job in enumerate(jobs, start=1):
        results.append(_sweep_one(store, engine, job, verdict_time, Path(spool) if spool else None, dry_run,
                                  history_days, gather))
        if progress:
            progress(done, len(jobs))
    return results


def _sweep_one(store: Store, engine: Engine, job: AcctRecord, verdict_time: datetime, spool: Optional[Path],
               dry_run: bool, history_days: float, gather: Optional[Gather] = None) -> SweepResult:
    base = {"cluster": job.cluster, "job_id": job.job_id, "state": job.state}
    array_job_id, array_task_id = job.array_ids
    if store.has_verdict(job.cluster, (job.job_id_raw, job.job_id), array_job_id, array_task_id):
        return SweepResult(action="has-verdict", **base)
    spooled = find_spooled_bundle(spool, job)
    evidence = "sacct+spool" if spooled else "sacct"
    if dry_run:
        return SweepResult(action="would-record", evidence=evidence, **base)
    with tempfile.TemporaryDirectory(prefix="slurm-attrib-sweep-") as tmp:
        try:
            if spooled is None and gather is not None:
                found = gather(job, Path(tmp))
                evidence += f"+{found}" if found else ""
            build_bundle(job, Path(tmp), spooled)
            key = JobKey(job.cluster, job.job_id_raw or job.job_id, array_task_id, 0)
            settings = settings_with_history(engine.settings, store, list(job.nodes), job.end or verdict_time,
                                             history_days, key)
            diag = engine.diagnose(tmp, settings)
            store.record(diag, verdict_time, bundle_dir=tmp)
        except StoreError:
            raise  # the store is unusable: stop the sweep rather than fail every job
        except (AttribError, OSError, ValueError, yaml.YAMLError) as exc:
            return SweepResult(action="error", evidence=evidence, detail=str(exc), **base)
    return SweepResult(action="recorded", status=diag.status, category=diag.category,
                       culprit_nodes=",".join(diag.culprit_nodes), evidence=evidence, **base)
