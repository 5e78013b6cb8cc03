"""Failed Slurm jobs as sacct knows them: the discovery for ``watch --source slurm``.

The finalizer remains the way verdicts are made on a Slurm cluster with the Epilog installed; this
discovery serves sites that have no Epilog on some nodes, or whose node bundles were lost (a node that
rebooted before its Epilog ran): the job facts come from sacct, the evidence from the connectors
(Loki, Prometheus, files). ``annotate`` writes the verdict into the job's AdminComment the way the
finalizer does (merged with what is there, the array task's own record, never the whole array).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from ..connectors.base import Window, Workload
from ..finalizer import comment
from ..slurm.base import SlurmAccess
from ..slurm.records import AcctRecord
from ..store.sweep import job_yaml
from . import Found

__all__ = ["SlurmDiscovery"]


def found_of(job: AcctRecord, before: timedelta, after: timedelta) -> Found:
    """A job sacct knows (its allocation record, with an end) as the connectors see it."""
    assert job.end is not None
    facts = job_yaml(job)
    array_job_id, array_task_id = job.array_ids
    workload = Workload(cluster=job.cluster, job_id=str(facts["job_id"]), nodes=tuple(job.nodes), user=job.user,
                        partition=job.partition, array_job_id=array_job_id, array_task_id=array_task_id,
                        kind="slurm")
    start = job.start or job.end
    key = f"slurm:{job.cluster}:{facts['job_id']}:{start.isoformat()}"
    return Found(key, workload, Window(start, job.end, before, after), facts)


class SlurmDiscovery:
    name = "slurm"

    def __init__(self, slurm: SlurmAccess, window_before: timedelta = timedelta(minutes=5),
                 window_after: timedelta = timedelta(minutes=1)) -> None:
        self.slurm = slurm
        self.window_before, self.window_after = window_before, window_after

    def discover(self, since: datetime, until: datetime) -> list[Found]:
        found = [found_of(job, self.window_before, self.window_after) for job in self.slurm.failed_jobs(since, until)
                 if not job.is_step and job.end is not None]
        return sorted(found, key=lambda f: (f.window.end, f.key))

    def annotate(self, found: Found, segment: str) -> str:
        work = found.workload
        ref = comment.job_ref(work.job_id, work.array_job_id, work.array_task_id)
        rows = self.slurm.job_records(ref)
        existing = next((r.admin_comment for r in rows if not r.is_step
                         and (r.job_id == ref or r.job_id_raw == work.job_id)), None)
        if existing is None:
            return ""
        safe = comment.safe_ref(ref, work.job_id, rows)
        if safe is None:
            return ""
        text = comment.merge(existing, segment)
        return f"AdminComment of {safe}: {text}" if self.slurm.set_admin_comment(safe, text) else ""
