"""The finalizer: turns queued jobs into stored verdicts and AdminComments.

One writer per cluster, on the controller. :meth:`Finalizer.step` does everything that is ready at
``now`` and returns; it never sleeps and never reads the clock itself (the CLI loop sleeps, and passes
its clock in as ``clock`` so that each job's verdict carries the time it was made). A job waits in
the queue until its node bundles arrived or ``finalizer.node_bundle_deadline_s`` passed since its end,
and while sacct has not caught up (``sacct_retries`` times ``sacct_retry_delay_s``).
"""

from __future__ import annotations

import errno
import logging
import shutil
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from functools import partial
from pathlib import Path
from typing import Any, Callable, Optional

import yaml

from .. import quarantine
from ..attribution import VerdictStore
from ..bundle import shipped_kernel_record
from ..config import Config
from ..connectors import applog, sacct
from ..connectors.base import EvidenceSource, Limits, Window, collect_all, collect_bounded
from ..engine import Engine
from ..outage import Outage
from ..slurm.base import SlurmAccess
from ..slurm.errors import SlurmError, SlurmParseError
from ..slurm.ids import SlurmIdError
from . import assemble, budget, comment, jobinfo, nodebundles, queue

HOOK_TEMP_GRACE_S = 3600.0  # a hook writes its queue entry in milliseconds; an older temp file is an orphan
log = logging.getLogger("slurm_attrib.finalizer")
JOBCOMP_GRACE_S = 5.0  # a jobcomp-only entry waits this long for its EpilogSlurmctld twin
# A fault of the machine, not of the job's input: the job is retried, never quarantined for it.
TRANSIENT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.ENOMEM, errno.EAGAIN})
UNREADABLE_TRIES = 3  # a Slurm answer about a job that cannot be read (or a bad id): retried, then quarantined


@dataclass
class Result:
    key: str
    outcome: str  # success | diagnosed | duplicate | requeued | waiting | quarantined
    verdict_id: str = ""
    admin_comment: str = ""
    detail: str = ""


@dataclass
class _Work:
    """What the finalizer remembers between steps about a job still in the queue."""

    sacct_tries: int = 0
    state_tries: int = 0
    next_try: float = 0.0
    unreadable: int = 0  # Slurm answered, but about this job with what cannot be read, or its id is bad


@dataclass
class _PendingComment:
    key: str
    ref: str
    job_id: str
    segment: str
    first_try: float
    next_try: float


@dataclass
class Finalizer:
    config: Config
    spool: Path
    slurm: SlurmAccess
    engine: Engine
    store: VerdictStore
    remediator: Optional[Any] = None
    # the watch connectors of finalizer.gap_connectors: asked for the nodes whose bundle is missing
    gap_sources: Sequence[EvidenceSource] = ()
    on_result: Optional[Callable[[Result], None]] = None
    stopping: Callable[[], bool] = field(default=lambda: False)  # SIGTERM: end the step after this job
    # the clock each job is processed at (its verdict_time); None: the step's ``now`` for every job (tests)
    clock: Optional[Callable[[], datetime]] = None
    _work: dict[str, _Work] = field(default_factory=dict)
    _comments: list[_PendingComment] = field(default_factory=list)
    _loaded: bool = False
    _slurm_outage: Outage = field(default_factory=lambda: Outage("Slurm commands", log))
    _disk_outage: Outage = field(default_factory=lambda: Outage("spool filesystem", log))

    # ---------------------------------------------------------------- the loop body
    def step(self, now: datetime) -> list[Result]:
        """Process everything that is ready at ``now``."""
        t = now.timestamp()
        if not self._loaded:
            self._guarded("reading pending AdminComments", lambda: self._load_pending_comments(t))
        self._guarded("importing spooled verdicts", self.store.flush_spool)
        results = [r for r in self._retry_comments(t)]
        jobs, bad = queue.scan_queue(self.spool, self.config.cluster)
        for path, reason in bad:
            self._guarded(f"quarantining {path}", partial(self._quarantine, "queue entry", path.name, [path], reason))
        for job in jobs:
            if self.stopping():
                break
            # a pass over a long queue takes minutes: each verdict is stamped when it is made, not when the
            # pass began
            result = self._process_isolated(job, self.clock() if self.clock is not None else now)
            if result.outcome != "waiting":
                self._work.pop(job.key, None)
            results.append(result)
            if self.on_result and result.outcome != "waiting":
                self.on_result(result)
        return results

    def idle(self) -> bool:
        """Nothing queued and no AdminComment waiting for the database."""
        jobs, _ = queue.scan_queue(self.spool, self.config.cluster)
        return not jobs and not self._comments

    # ---------------------------------------------------------------- one job
    def _process_isolated(self, job: queue.PendingJob, now: datetime) -> Result:
        """:meth:`process`, where no job's failure stops the others: a Slurm error or a full disk is
        retried later; anything else (poison input) moves the job's entries and node bundles into the
        quarantine with the reason."""
        retry_at = now.timestamp() + self.config.finalizer.sacct_retry_delay_s
        try:
            result = self.process(job, now)
        except (SlurmParseError, SlurmIdError) as exc:
            # the same answer comes back on every retry: a few tries for a torn read, then set it aside
            work = self._work.setdefault(job.key, _Work())
            work.unreadable += 1
            if work.unreadable > UNREADABLE_TRIES:
                return self._quarantine_job(job, exc)
            log.info("%s: %s (try %d of %d)", job.key, exc, work.unreadable, UNREADABLE_TRIES)
            work.next_try = retry_at
            return Result(job.key, "waiting", detail=str(exc))
        except SlurmError as exc:
            self._slurm_outage.failed(str(exc), "queued jobs wait")
            log.info("%s: Slurm error, will retry: %s", job.key, exc)
            self._work.setdefault(job.key, _Work()).next_try = retry_at
            return Result(job.key, "waiting", detail=str(exc))
        except OSError as exc:
            if exc.errno not in TRANSIENT_ERRNOS:
                return self._quarantine_job(job, exc)
            self._disk_outage.failed(str(exc), "jobs wait")
            log.info("%s: %s, will retry", job.key, exc)
            self._work.setdefault(job.key, _Work()).next_try = retry_at
            return Result(job.key, "waiting", detail=str(exc))
        except Exception as exc:  # poison input of any kind must not stop the others
            return self._quarantine_job(job, exc)
        if result.outcome != "waiting":
            self._slurm_outage.recovered()
            self._disk_outage.recovered()
        return result

    def _quarantine_job(self, job: queue.PendingJob, exc: BaseException) -> Result:
        reason = f"{type(exc).__name__}: {exc}"
        where = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-3))
        paths = [e.path for e in job.entries] + [self.spool / "nodes" / job.key, self.spool / "jobs" / job.key]
        try:
            self._quarantine("job", job.key, paths, f"{reason}\n{where}")
        except OSError as move:  # cannot even set it aside: leave it alone for the life of this process
            log.error("%s: %s, and it cannot be quarantined (%s): skipped until restart", job.key, reason, move)
            self._work.setdefault(job.key, _Work()).next_try = float("inf")
            return Result(job.key, "waiting", detail=reason)
        self._work.pop(job.key, None)
        return Result(job.key, "quarantined", detail=reason)

    def _guarded(self, what: str, action: Callable[[], Any]) -> None:
        """Housekeeping that must never stop the loop: a failure is logged, the step goes on."""
        try:
            action()
        except Exception as exc:  # housekeeping never stops the loop
            log.warning("%s failed: %s: %s", what, type(exc).__name__, exc)

    def process(self, job: queue.PendingJob, now: datetime) -> Result:
        t = now.timestamp()
        work = self._work.setdefault(job.key, _Work())
        if t < work.next_try:
            return Result(job.key, "waiting", detail="retry later")
        if job.restart_count is None:
            if t - job.first_enqueued < JOBCOMP_GRACE_S:
                return Result(job.key, "waiting", detail="jobcomp entry: waiting for EpilogSlurmctld")
            job = self._resolve_restart(job)
        done = queue.read_done(self.spool, job.key)
        if done is not None:
            queue.remove_entries(job)
            return Result(job.key, "duplicate", str(done.get("verdict_id", "")))
        info = self._job_info(job)
        if not info.state:
            return self._retry_state(job, info, work, t)
        if info.requeued:
            queue.remove_entries(job)
            return Result(job.key, "requeued", detail=f"state {info.state}: the job runs again")
        if info.succeeded:
            return self._finish_success(job, info, now)
        return self._diagnose_when_ready(job, info, work, now)

    def _resolve_restart(self, job: queue.PendingJob) -> queue.PendingJob:
        """The restart count of a jobcomp-only entry: the controller's, unless the job has started again
        since the run the record is about (its ``START`` is older than the controller's start time): then
        the run before. A requeued run's record (JOBSTATE PENDING or PREEMPTED) must not take the next
        run's key, or the next run's real failure is dropped as its duplicate."""
        ctl = self.slurm.show_job(job.job_id)
        if ctl is None:
            job.restart_count = 0
            return job
        starts = [e.run_start for e in job.entries if e.run_start is not None]
        earlier = bool(starts) and ctl.start is not None and max(starts) < ctl.start.timestamp() - 1
        job.restart_count = max(0, ctl.restart_count - 1) if earlier else ctl.restart_count
        return job

    def _job_info(self, job: queue.PendingJob) -> jobinfo.JobInfo:
        info = jobinfo.from_hooks(job)
        ctl = self.slurm.show_job(job.job_id)
        if ctl is not None:
            info = jobinfo.with_controller(info, ctl)
            if not jobinfo.settled(ctl.state):
                log.info("%s: scontrol says %s, not a final state: asking sacct", job.key, ctl.state or "nothing")
        if not info.state:
            alloc = jobinfo.allocation(self.slurm.job_records(job.job_id), job.job_id)
            if alloc is not None:
                info = jobinfo.with_accounting(info, alloc)
        return info

    def _retry_state(self, job: queue.PendingJob, info: jobinfo.JobInfo, work: _Work, t: float) -> Result:
        """No settled state yet (e.g. scontrol still says COMPLETING and sacct has not caught up): wait,
        at most ``sacct_retries`` times, then diagnose with what is known."""
        cfg = self.config.finalizer
        work.state_tries += 1
        if work.state_tries <= cfg.sacct_retries:
            work.next_try = t + cfg.sacct_retry_delay_s
            return Result(job.key, "waiting", detail="job state not known yet")
        log.warning("%s: no final job state from jobcomp, scontrol or sacct; diagnosing without it", job.key)
        return self._diagnose(job, info, datetime.fromtimestamp(t, tz=timezone.utc), [])

    def _finish_success(self, job: queue.PendingJob, info: jobinfo.JobInfo, now: datetime) -> Result:
        queue.write_done(self.spool, job.key, {"outcome": "success", "time": now.isoformat()})
        queue.remove_entries(job)
        nodebundles.remove(self.spool, job.key)
        return Result(job.key, "success", detail=f"{info.state} {info.exit_code}")

    def _diagnose_when_ready(self, job: queue.PendingJob, info: jobinfo.JobInfo, work: _Work,
                             now: datetime) -> Result:
        cfg = self.config.finalizer
        t = now.timestamp()
        end = info.end.timestamp() if info.end else job.first_enqueued
        expected = jobinfo.node_epilog_collects(job, self.config.collector.capture_always)
        present = nodebundles.arrived(self.spool, job.key)
        waiting_for = [n for n in info.nodes if n not in present] if expected else []
        if waiting_for and t < end + cfg.node_bundle_deadline_s:
            return Result(job.key, "waiting", detail=f"node bundles from {', '.join(waiting_for)}")
        records = self.slurm.job_records(job.job_id)
        alloc = jobinfo.allocation(records, job.job_id)
        if (alloc is None or len(alloc.nodes) < len(info.nodes)) and work.sacct_tries < cfg.sacct_retries:
            work.sacct_tries += 1
            work.next_try = t + cfg.sacct_retry_delay_s
            return Result(job.key, "waiting", detail="sacct has not caught up")
        if alloc is not None:
            info = jobinfo.with_accounting(info, alloc)
        return self._diagnose(job, info, now, records)

    # ---------------------------------------------------------------- diagnosis
    def _diagnose(self, job: queue.PendingJob, info: jobinfo.JobInfo, now: datetime,
                  records: list[Any]) -> Result:
        cfg = self.config.finalizer
        parts = self._gather(job, info, now, records)
        dest = assemble.write_bundle(parts, self.spool / "jobs" / job.key)
        done = budget.diagnose_within(self.engine, dest, self.store, now, cfg.history_days,
                                      cfg.diagnosis_budget_s, cfg.diagnosis_tail_bytes)
        diag_dict = done.diagnosis.to_dict()
        stored = self.store.record(diag_dict, dest, now)
        verdict_id, where = stored.verdict_id, stored.where
        ref = comment.job_ref(info.job_id, info.array_job_id, info.array_task_id)
        segment = comment.verdict_segment(diag_dict, verdict_id)
        written = ""
        if self.config.finalizer.write_admin_comment:
            written = self._write_comment(job.key, ref, info.job_id, segment, now.timestamp(), parts.sacct_rows)
        decisions = self._remediate(diag_dict, info.partition, ref, now)
        queue.write_done(self.spool, job.key, {
            "outcome": "diagnosed", "verdict_id": verdict_id, "stored": where, "time": now.isoformat(),
            "summary": diag_dict.get("summary"), "admin_comment": written or "pending",
            "comment_ref": ref, "job_id": info.job_id, "segment": segment, "remediation": decisions})
        queue.remove_entries(job)
        nodebundles.remove(self.spool, job.key)
        log.info("%s: %s (verdict %s, %s)", job.key, diag_dict.get("summary"), verdict_id, where)
        return Result(job.key, "diagnosed", verdict_id, written, str(diag_dict.get("summary")))

    def _gather(self, job: queue.PendingJob, info: jobinfo.JobInfo, now: datetime,
                records: list[Any]) -> assemble.BundleParts:
        parts = assemble.BundleParts(info=info, sacct_rows=records)
        parts.steps = [r for r in records if r.is_step and r.job_id_raw.split(".")[0] == info.job_id]
        present = nodebundles.arrived(self.spool, job.key)
        expected = jobinfo.node_epilog_collects(job, self.config.collector.capture_always)
        began = nodebundles.staged(self.spool, job.key)
        for node in info.nodes:
            if node in present:
                parts.node_states[node] = nodebundles.node_state(present[node])
                parts.node_dirs[node] = present[node]
            elif expected or node in began:
                parts.node_states[node] = nodebundles.node_state(None, began=node in began)
        if not expected:
            parts.notes.append("node epilogs skip jobs that ended 0:0 (collector.capture_always is off): "
                               "no node bundle expected")
        self._collect(parts, now, present)
        self._fill_gaps(parts, now)
        return parts

    def _fill_gaps(self, parts: assemble.BundleParts, now: datetime) -> None:
        """A node that sent no bundle (it died, or rebooted before its Epilog) is asked of the remote
        connectors (finalizer.gap_connectors: Loki, Prometheus) over the job's window; each is a coverage
        line in job.yaml, and a kernel log they bring is recorded as shipped (it never drains a node)."""
        lost = tuple(sorted(n for n, (state, _) in parts.node_states.items() if state != "ok"))
        if not self.gap_sources or not lost:
            return
        info = parts.info
        # the job's own output is the finalizer's already (StdOut): from Loki only the lost nodes' kernel logs
        workload = replace(assemble.workload(info), nodes=lost, args={"loki": {"app": False}})
        window = Window(start=info.start or info.end or now, end=info.end or now,
                        before=timedelta(seconds=self.config.watch.window_before_s),
                        after=timedelta(seconds=self.config.watch.window_after_s))
        cap, budget = self.config.store.max_bundle_bytes, self.config.watch.connector_budget_s
        for source in self.gap_sources:
            coverage = collect_bounded(source, workload, window, parts.files, Limits(budget, cap))
            parts.sources.append(coverage)
            for node in coverage.facts.get("kernel_nodes", ()):
                if node in lost and f"collection/{node}.yaml" not in parts.files.files:
                    record = yaml.safe_dump(shipped_kernel_record(node), sort_keys=True).encode()
                    parts.files.write(f"collection/{node}.yaml", record)

    def _collect(self, parts: assemble.BundleParts, now: datetime, present: dict[str, Path]) -> None:
        """Run the controller-side evidence sources into ``parts``: an accounting source's failure is a
        note, the output files' coverage goes to job.yaml, and in a NODE_FAIL a node that went down and
        sent nothing is missing for that reason."""
        cfg, info = self.config.finalizer, parts.info
        cap, workload = self.config.store.max_bundle_bytes, assemble.workload(info)
        outputs = applog.job_output_sources(workload)
        plan: list[tuple[EvidenceSource, int]] = [
            (sacct.NodeEventsSource(self.slurm), cap), (sacct.NodeHistorySource(self.slurm, cfg.history_days), cap),
            *((source, cfg.app_log_tail_bytes) for source in outputs), (sacct.SacctJobSource(parts.sacct_rows), cap)]
        window = Window(start=info.start or now, end=now, before=timedelta(minutes=5))
        coverage = list(collect_all(plan, workload, window, parts.files, lambda: cfg.command_timeout_s))
        names = {source.name for source in outputs}
        parts.app_logs = {c.source: c for c in coverage if c.source in names}
        parts.notes.extend(f"not collected: {c.reason}" for c in coverage if c.source not in names
                           and c.state == "error")
        down = next(c for c in coverage if c.source == sacct.NodeEventsSource.name).facts.get("down_nodes", [])
        for node in down if info.state == "NODE_FAIL" else []:
            if node not in present:
                parts.node_states[node] = ("missing", "node went down during the job (sacctmgr event)")

    def _remediate(self, diag: dict[str, Any], partition: str, ref: str, now: datetime) -> list[dict[str, str]]:
        if self.remediator is None:
            return []
        try:
            decisions = self.remediator.consider(diag, partition, ref, now)
        except SlurmError as exc:
            log.warning("remediation failed: %s", exc)
            return [{"action": "failed", "why": str(exc)}]
        for d in decisions:
            log.info("remediation %s %s: %s", d.action, d.node, d.why)
        return [d.to_dict() for d in decisions]

    # ---------------------------------------------------------------- AdminComment
    def _write_comment(self, key: str, ref: str, job_id: str, segment: str, t: float, records: list[Any]) -> str:
        pending = _PendingComment(key, ref, job_id, segment, first_try=t, next_try=t)
        text = self._try_comment(pending, records)
        if text:
            return text
        pending.next_try = t + self.config.finalizer.sacct_retry_delay_s
        self._comments.append(pending)
        return ""

    def _try_comment(self, pending: _PendingComment, records: Optional[list[Any]] = None) -> str:
        rows = records if records is not None else self.slurm.job_records(pending.ref)
        existing = next((r.admin_comment for r in rows if not r.is_step
                         and (r.job_id == pending.ref or r.job_id_raw == pending.job_id)), None)
        if existing is None:
            return ""  # not in the database yet: writing now could clobber text we have not read
        ref = comment.safe_ref(pending.ref, pending.job_id, rows)
        if ref is None:
            log.info("%s: %s is an array's id and this job's own task record is not in sacct yet: waiting",
                     pending.key, pending.ref)
            return ""  # ``where jobid=<array id>`` would modify every task of the array
        pending.ref = ref
        text = comment.merge(existing, pending.segment)
        return text if self.slurm.set_admin_comment(ref, text) else ""

    def _retry_comments(self, t: float) -> list[Result]:
        results = []
        for pending in list(self._comments):
            if t < pending.next_try:
                continue
            try:
                text = self._try_comment(pending)
            except SlurmError as exc:
                self._slurm_outage.failed(str(exc), "AdminComments wait")
                log.info("%s: AdminComment: %s", pending.key, exc)
                text = ""
            if text:
                self._comments.remove(pending)
                self._mark_comment(pending.key, text)
                results.append(Result(pending.key, "commented", admin_comment=text))
            elif t - pending.first_try > self.config.finalizer.admin_comment_retry_s:
                self._comments.remove(pending)
                self._mark_comment(pending.key, "failed: job not in the accounting database")
                log.warning("%s: gave up writing AdminComment for %s", pending.key, pending.ref)
            else:
                pending.next_try = t + self.config.finalizer.sacct_retry_delay_s
        return results

    def _mark_comment(self, key: str, value: str) -> None:
        done = queue.read_done(self.spool, key) or {}
        done["admin_comment"] = value
        queue.write_done(self.spool, key, done)

    def _load_pending_comments(self, t: float) -> None:
        """After a restart, AdminComments that never reached the database are retried."""
        self._loaded = True
        folder = self.spool / "done"
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            done = queue.read_done(self.spool, path.stem) or {}
            if done.get("admin_comment") == "pending" and done.get("segment"):
                self._comments.append(_PendingComment(path.stem, str(done.get("comment_ref", "")),
                                                      str(done.get("job_id", "")), str(done["segment"]),
                                                      first_try=t, next_try=t))

    # ---------------------------------------------------------------- housekeeping
    def _quarantine(self, kind: str, name: str, paths: list[Path], reason: str) -> None:
        entry = quarantine.quarantine(self.spool / quarantine.FOLDER, kind, name, paths, reason)
        log.warning("%s %s quarantined in %s: %s", kind, name, entry, reason.splitlines()[0] if reason else "")

    def prune(self, now: datetime) -> int:
        """Forget done markers and assembled bundles older than ``finalizer.done_retention_days``, and
        node bundles as old that no queued job will ever read (their job's queue entry never came). A
        link is removed as a link (never followed); an entry that cannot be removed does not stop the rest."""
        limit = now.timestamp() - self.config.finalizer.done_retention_days * 86400
        jobs, _ = queue.scan_queue(self.spool, self.config.cluster)
        pending = {job.key for job in jobs}
        old = [path for folder in (self.spool / "done", self.spool / "jobs", self.spool / "nodes")
               for path in (sorted(folder.iterdir()) if folder.is_dir() and not folder.is_symlink() else [])
               if not (folder.name == "nodes" and path.name in pending)]
        return _remove_older(old, limit, "prune: cannot remove") + self._prune_quarantine(now)

    def _prune_quarantine(self, now: datetime) -> int:
        """Quarantined entries older than ``finalizer.quarantine_retention_days`` (0: kept until an admin
        removes them): time enough to look, and a spool a stream of poison input cannot fill for ever."""
        days = self.config.finalizer.quarantine_retention_days
        if days <= 0:
            return 0
        limit = now.timestamp() - days * 86400
        removed = 0
        for folder in (self.spool / quarantine.FOLDER, self.spool / "verdicts" / quarantine.FOLDER):
            for held in quarantine.listing(folder) if not folder.is_symlink() else []:
                try:
                    if held.folder.lstat().st_mtime < limit:
                        _remove(held.folder)
                        removed += 1
                        log.info("removed the quarantined %s %s (older than %g days)", held.kind, held.name, days)
                except OSError as exc:
                    log.warning("prune: cannot remove %s: %s", held.folder, exc)
        return removed

    def clean_temp(self) -> int:
        """Remove the temporary copies an earlier finalizer left when it died or the disk filled
        (``.tmp-*`` in jobs/, done/, verdicts/; only this process writes there, it holds the spool lock),
        and those a controller hook killed mid-write left in queue/ more than an hour ago."""
        removed = 0
        for folder in (self.spool / "jobs", self.spool / "done", self.spool / "verdicts"):
            for path in sorted(folder.glob(".tmp-*")) if folder.is_dir() and not folder.is_symlink() else []:
                try:
                    _remove(path)
                    removed += 1
                except OSError as exc:
                    log.warning("cannot remove the temporary %s: %s", path, exc)
        queue_dir = self.spool / "queue"
        hooks_left = sorted(queue_dir.glob(".tmp-*")) if queue_dir.is_dir() and not queue_dir.is_symlink() else []
        # a hook may be writing one now: only those it left long ago
        removed += _remove_older(hooks_left, time.time() - HOOK_TEMP_GRACE_S, "cannot remove the temporary")
        if removed:
            log.info("removed %d temporary file(s) an earlier run left in %s", removed, self.spool)
        return removed


def _remove_older(paths: Sequence[Path], limit: float, problem: str) -> int:
    """Remove each of ``paths`` last changed before ``limit`` (a time stamp); one that cannot be removed is
    a warning and does not stop the rest. How many went."""
    removed = 0
    for path in paths:
        try:
            if path.lstat().st_mtime < limit:
                _remove(path)
                removed += 1
        except OSError as exc:
            log.warning("%s %s: %s", problem, path, exc)
    return removed


def _remove(path: Path) -> None:
    """Remove a file, a link (not what it points at) or a directory tree."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
