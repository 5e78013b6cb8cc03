"""The node collector run by the Epilog wrapper: one node bundle per failed job and node.

``python -m slurm_attrib.collect`` (or :func:`run`) reads the Epilog environment, gathers the
kernel log window, a GPU snapshot and node facts through the evidence-source interface
(:mod:`slurm_attrib.connectors.base`), each source bounded by its own timeout and by what is left
of the budget, and hands the bundle to the finalizer (see
:mod:`slurm_attrib.connectors.spool` for the layout). It never runs a Slurm command, never opens
the store, never raises to the wrapper and always exits 0: a failure is a line in the log and an
entry in ``collection.yaml``.

Bundle (one node): ``syslog/NODE.log``, ``facts/NODE.yaml``, ``metrics/NODE.xml`` (nvidia-smi -q -x),
``metrics/NODE.dcgm.txt``, ``metrics/NODE.prom``, ``collection.yaml`` (the job facts the node saw,
top level, and ``sources``: one ``{source, state, reason, bytes, seconds}`` entry per source).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Optional

import yaml

from .config import CollectorConfig, Config, SpoolConfig, load_config
from .connectors.base import (
    DisabledSource,
    EvidenceSource,
    Limits,
    MemoryBundle,
    SourceCoverage,
    Window,
    Workload,
    collect_all,
    collect_bounded,
)
from .connectors.gpu import DcgmExporterSource, DcgmiSource, NvidiaSmiSource, UrllibFetcher
from .connectors.kernel_log import KernelLogSource
from .connectors.node_facts import NodeFactsSource
from .connectors.runner import SubprocessRunner, stop_running
from .connectors.spool import (
    BundlePoster,
    Delivery,
    NodeBundle,
    deliver,
    job_key,
    safe_name,
    stage,
)
from .errors import ConfigError
from .tokenfile import read_token_file

__all__ = ["CollectionReport", "EpilogJob", "NodeSources", "collect_node", "main", "run"]

SCHEMA = 1
ENV_SPOOL = "SLURM_ATTRIB_SPOOL"
ENV_KERNEL_LOG = "SLURM_ATTRIB_KERNEL_LOG"  # test/emulation knob: a per-node file, "{node}" filled in
_FACTS_RESERVE = 64 * 1024


def _env_time(value: Optional[str]) -> Optional[datetime]:
    try:
        return datetime.fromtimestamp(int(value), tz=timezone.utc) if value else None
    except (ValueError, OverflowError, OSError):
        return None


def _iso(dt: Optional[datetime]) -> Optional[str]:
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ") if dt else None


@dataclass(frozen=True)
class EpilogJob:
    """What the node Epilog's environment says about the job (Slurm 22.05-25.11 names)."""

    job_id: str
    cluster: str
    node: str
    restart_count: int = 0
    user: str = ""
    uid: str = ""
    exit_code2: str = ""
    derived_ec: str = ""
    start: Optional[datetime] = None
    end: Optional[datetime] = None
    stdout: str = ""
    stderr: str = ""
    partition: str = ""
    nodelist: str = ""
    gpus: str = ""
    array_job_id: str = ""
    array_task_id: str = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str], hostname: str = "") -> EpilogJob:
        get = env.get
        try:
            restarts = int(get("SLURM_JOB_RESTART_COUNT") or 0)
        except ValueError:
            restarts = 0
        return cls(
            job_id=get("SLURM_JOB_ID") or get("SLURM_JOBID") or "unknown",
            cluster=get("SLURM_CLUSTER_NAME") or "",
            node=get("SLURMD_NODENAME") or hostname.split(".")[0] or "localhost",
            restart_count=restarts,
            user=get("SLURM_JOB_USER") or "",
            uid=get("SLURM_JOB_UID") or "",
            exit_code2=get("SLURM_JOB_EXIT_CODE2") or "",
            derived_ec=get("SLURM_JOB_DERIVED_EC") or "",
            start=_env_time(get("SLURM_JOB_START_TIME")),
            end=_env_time(get("SLURM_JOB_END_TIME")),
            stdout=get("SLURM_JOB_STDOUT") or "",
            stderr=get("SLURM_JOB_STDERR") or "",
            partition=get("SLURM_JOB_PARTITION") or "",
            nodelist=get("SLURM_JOB_NODELIST") or get("SLURM_NODELIST") or "",
            gpus=get("SLURM_JOB_GPUS") or get("CUDA_VISIBLE_DEVICES") or "",
            array_job_id=get("SLURM_ARRAY_JOB_ID") or "",
            array_task_id=get("SLURM_ARRAY_TASK_ID") or "",
        )

    @property
    def spool_job_id(self) -> str:
        """``<array id>_<task id>`` when the Epilog knows the array (not in 22.05), else the raw id."""
        if self.array_job_id and self.array_task_id:
            return f"{self.array_job_id}_{self.array_task_id}"
        return self.job_id

    @property
    def key(self) -> str:
        """The spool key, by the raw job id whatever the array ids: EpilogSlurmctld's queue entry (and so
        the finalizer) names an array task by its raw id, and a bundle filed under ``<array>_<task>`` was
        never found (the Epilog has the array ids from 23.02 on)."""
        return str(job_key(self.cluster, self.job_id, self.restart_count))

    def succeeded(self) -> bool:
        """Exit 0:0 and derived 0: what the wrapper's fast path skips (TIMEOUT/CANCELLED look the same)."""
        return self.exit_code2 == "0:0" and self.derived_ec == "0"

    def facts(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "job_id": self.spool_job_id, "cluster": self.cluster, "node": self.node,
            "restart_count": self.restart_count, "user": self.user, "uid": self.uid,
            "exit_code2": self.exit_code2, "derived_ec": self.derived_ec, "start": _iso(self.start),
            "end": _iso(self.end), "stdout": self.stdout, "stderr": self.stderr, "partition": self.partition,
            "nodelist": self.nodelist, "gpus": self.gpus,
        }
        if self.array_job_id:
            out.update(array_job_id=self.array_job_id, array_task_id=self.array_task_id, raw_job_id=self.job_id)
        return {k: v for k, v in out.items() if v not in ("", None)}

    def workload(self) -> Workload:
        """The job as the evidence sources see it from this node: its nodes are this node (expanding
        the hostlist would import the Slurm access layer into the collector's start for nothing)."""
        return Workload(cluster=self.cluster, job_id=self.spool_job_id, nodes=(self.node,),
                        node=self.node, user=self.user, uid=int(self.uid) if self.uid.isdigit() else None,
                        partition=self.partition, std_out=self.stdout, std_err=self.stderr,
                        array_job_id=self.array_job_id, array_task_id=self.array_task_id,
                        restart_count=self.restart_count)


@dataclass
class NodeSources:
    """The gatherers of one collection run; tests pass fakes in (real ones: :func:`default_sources`).
    A GPU tool turned off in the configuration is None."""

    kernel: KernelLogSource
    nvidia_smi: Optional[NvidiaSmiSource]
    dcgmi: Optional[DcgmiSource]
    exporter: DcgmExporterSource
    facts: NodeFactsSource

    def plan(self, kernel_cap: int, metric_cap: int) -> list[tuple[EvidenceSource, int]]:
        """The sources after the node facts, in collection.yaml order, each with its byte cap."""
        return [(self.kernel, kernel_cap), (self.nvidia_smi or DisabledSource("nvidia_smi"), metric_cap),
                (self.dcgmi or DisabledSource("dcgmi"), metric_cap), (self.exporter, metric_cap)]


def default_sources(config: CollectorConfig, node: str, env: Mapping[str, str]) -> NodeSources:
    runner = SubprocessRunner()
    template = env.get(ENV_KERNEL_LOG) or config.kernel_log_path
    path = template.replace("{node}", safe_name(node)) if template else ""
    return NodeSources(
        kernel=KernelLogSource(runner, config.kernel_log_files, path=path, use_journald=config.journald),
        nvidia_smi=NvidiaSmiSource(runner, config.nvidia_smi) if config.nvidia_smi else None,
        dcgmi=DcgmiSource(runner, config.dcgmi) if config.dcgmi else None,
        exporter=DcgmExporterSource(UrllibFetcher(), config.dcgm_exporter_url),
        facts=NodeFactsSource(),
    )


class Budget:
    """The collector's time: each source gets min(its timeout, what is left before the margin)."""

    def __init__(self, seconds: float, margin: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.deadline = clock() + max(0.0, seconds - margin)

    def left(self) -> float:
        return max(0.0, self.deadline - self.clock())

    def slot(self, per_source: float) -> float:
        return min(per_source, self.left())


@dataclass
class CollectionReport:
    """What one run did: the per-source entries, where the bundle went, problems met."""

    job: EpilogJob
    coverage: list[SourceCoverage] = field(default_factory=list)
    delivery: Optional[Delivery] = None
    problems: list[str] = field(default_factory=list)

    @property
    def entries(self) -> list[dict[str, Any]]:
        """collection.yaml ``sources``: one entry per source, in the order they ran."""
        return [c.entry() for c in self.coverage]

    def summary(self) -> str:
        states = " ".join(f"{e['source']}={e['state']}" for e in self.entries)
        where = f"{self.delivery.destination}:{self.delivery.path}" if self.delivery else "not delivered"
        return f"job={self.job.key} node={self.job.node} {states} -> {where}"


def _bearer(config: Config, report: CollectionReport) -> str:
    """The token for the node-bundle POST (spool.http_token_file's first line); a file that is missing,
    not root's alone or unreadable is a problem in the report, and the POST goes without one."""
    if not (config.spool.http_url and config.spool.http_token_file):
        return ""
    try:
        tokens = read_token_file(config.spool.http_token_file)
    except ConfigError as exc:
        report.problems.append(f"spool.http_token_file: {exc}")
        return ""
    if not tokens:
        report.problems.append(f"spool.http_token_file {config.spool.http_token_file}: missing or empty")
    return tokens[0] if tokens else ""


SKEW_SLACK_S = 5.0  # a node clock this far behind the controller's end stamp is skew, not rounding


def clock_skew(job: EpilogJob, now: datetime) -> Optional[float]:
    """Seconds this node's clock is behind the controller's (negative), when that is certain: the Epilog
    runs after the job's end, which slurmctld stamped on its own clock (``SLURM_JOB_END_TIME``, Slurm
    23.02+), so a node clock that reads earlier than that end is behind by at least the difference. A
    clock ahead cannot be told from a slow Epilog, so it is never reported. None: nothing certain."""
    if job.end is None:
        return None
    behind = (now - job.end).total_seconds()
    return round(behind, 1) if behind < -SKEW_SLACK_S else None


def _window(job: EpilogJob, config: CollectorConfig, now: datetime) -> tuple[Window, str]:
    end = job.end or now
    after = timedelta(seconds=config.window_after_s)
    skew = clock_skew(job, now)
    if job.start is not None and skew is not None:
        # the kernel log is stamped on this node's clock: read the job's window as this clock saw it
        shift = timedelta(seconds=skew)
        return (Window(job.start + shift, end + shift, timedelta(seconds=config.window_before_s), after),
                f"this node's clock is {-skew:g} s behind the controller's (job end {_iso(job.end)}, Epilog at "
                f"{_iso(now)}): the kernel log window was shifted by as much")
    if job.start is not None:
        return Window(job.start, end, timedelta(seconds=config.window_before_s), after), ""
    note = (f"job start unknown to the Epilog (Slurm < 23.02): window is the last "
            f"{config.unknown_start_window_s:.0f} s before the end")
    return Window(end - timedelta(seconds=config.unknown_start_window_s), end, after=after), note


def _caps(config: CollectorConfig) -> tuple[int, int]:
    """(kernel log cap, cap of each of the three metrics files) within max_bundle_bytes."""
    metric = max(0, config.max_bundle_bytes // 8)
    return max(0, config.max_bundle_bytes - 3 * metric - _FACTS_RESERVE), metric


def collect_node(env: Mapping[str, str], config: Config, sources: Optional[NodeSources] = None,
                 budget: Optional[Budget] = None, now: Optional[datetime] = None,
                 poster: Optional[BundlePoster] = None) -> CollectionReport:
    """Gather one node bundle for the job described by ``env`` and deliver it."""
    coll = config.collector
    job = EpilogJob.from_env(env, socket.gethostname())
    report = CollectionReport(job)
    budget = budget or Budget(coll.budget_s, coll.budget_margin_s)
    now = now or datetime.now(timezone.utc)
    sources = sources or default_sources(coll, job.node, env)
    window, note = _window(job, coll, now)
    spool, fallback = Path(config.spool.dir), Path(config.spool.fallback_dir)
    # staged before the first source runs: a SIGTERM while the node facts are still being read (a slow or loaded
    # node) still hands in a partial bundle that says so
    bundle, notes = stage(spool, fallback, job.key, job.node, bool(config.spool.http_url))
    staged = [*notes, note] if note else notes
    try:
        facts = _node_facts(sources, report, window, coll, budget)
        report.problems.extend(staged)
        staged = []
        _gather_into(bundle, sources, report, facts, window, coll, budget, now)
    except BaseException as exc:  # stopped (SIGTERM at the budget) or broken: hand in what there is
        stop_running()
        report.problems.extend(staged)
        _salvage(bundle, report, job, now, exc, spool, fallback)
        raise
    report.delivery = deliver(bundle, spool, fallback, job.key, job.node, config.spool.http_url,
                              min(config.spool.http_timeout_s, max(0.5, budget.left() + coll.budget_margin_s / 2)),
                              poster, _bearer(config, report))
    report.problems.extend(report.delivery.notes)
    return report


def _salvage(bundle: NodeBundle, report: CollectionReport, job: EpilogJob, now: datetime, exc: BaseException,
             spool: Path, fallback: Path) -> None:
    """Publish a partial bundle whose collection.yaml says why it is partial; if even that fails,
    leave the staging directory, which tells the finalizer that this node's collector began."""
    state = "timeout" if isinstance(exc, SystemExit) else "error"
    reason = "stopped at the Epilog budget" if state == "timeout" else f"{type(exc).__name__}: {exc}"
    report.coverage.append(SourceCoverage("collector", state, reason))
    document = {"schema": SCHEMA, **job.facts(), "collected_at": _iso(now), "state": state, "reason": reason,
                "problems": report.problems, "sources": report.entries}
    with contextlib.suppress(Exception):  # on failure the staging directory left behind is the evidence
        if (bundle.staging / "collection.yaml").exists():
            (bundle.staging / "collection.yaml").unlink()
        bundle.write("collection.yaml", _yaml(document))
        report.delivery = deliver(bundle, spool, fallback, job.key, job.node)


def _node_facts(sources: NodeSources, report: CollectionReport, window: Window, coll: CollectorConfig,
                budget: Budget) -> dict[str, Any]:
    """The node facts come first: the kernel log needs the boot time. They write no file of their own
    (facts/NODE.yaml is written once the GPU sources added theirs), hence the throw-away bundle."""
    coverage = collect_bounded(sources.facts, report.job.workload(), window, MemoryBundle(),
                               Limits(budget.slot(coll.source_timeout_s), _FACTS_RESERVE))
    report.coverage.append(coverage)
    report.problems.extend(coverage.notes or ([f"node facts: {coverage.reason}"] if coverage.state != "ok" else []))
    return dict(coverage.facts)


def _gather_into(bundle: NodeBundle, sources: NodeSources, report: CollectionReport, facts: dict[str, Any],
                 window: Window, coll: CollectorConfig, budget: Budget, now: datetime) -> None:
    boot = facts.get("boot_time")
    if boot and sources.kernel.boot_time is None:
        sources.kernel.boot_time = datetime.strptime(boot, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    for coverage in collect_all(sources.plan(*_caps(coll)), report.job.workload(), window, bundle,
                                lambda: budget.slot(coll.source_timeout_s)):
        report.coverage.append(coverage)
        facts.update({k: v for k, v in coverage.facts.items() if v})
    facts["collected_at"] = _iso(now)
    facts.setdefault("gpus", [])
    rel = f"facts/{safe_name(report.job.node)}.yaml"
    written = bundle.write(rel, _yaml(facts))
    report.coverage[0] = replace(report.coverage[0], files=(rel,), bytes=written)  # the node facts' line
    document = {"schema": SCHEMA, **report.job.facts(), "collected_at": _iso(now),
                "window": {"start": _iso(window.since), "end": _iso(window.until)}, "problems": report.problems,
                "sources": report.entries}
    skew = clock_skew(report.job, now)
    if skew is not None:
        document["clock_skew_s"] = skew
    bundle.write("collection.yaml", _yaml(document))


def _yaml(data: Any) -> bytes:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True).encode()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m slurm_attrib.collect",
                                     description="Collect this node's evidence for a finished job (run by the "
                                     "Epilog wrapper; reads the Epilog environment). Always exits 0.")
    add_collect_options(parser)
    return parser


def add_collect_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="configuration file (default /etc/slurm-attrib/slurm-attrib.yaml "
                        "or $SLURM_ATTRIB_CONFIG)")
    parser.add_argument("--spool", help="spool directory (default: spool.dir, or $SLURM_ATTRIB_SPOOL)")
    parser.add_argument("--budget", type=float, help="seconds for the whole collection (default: collector.budget_s)")
    parser.add_argument("--force", action="store_true", help="collect even when the job exited 0:0")


def run(args: argparse.Namespace, environ: Optional[Mapping[str, str]] = None) -> int:
    """Collect for the job in ``environ`` (default: this process's environment); prints one line; 0."""
    env = dict(os.environ if environ is None else environ)
    began = time.monotonic()
    try:
        config, problems = _config(args, env)
        job = EpilogJob.from_env(env, socket.gethostname())
        if job.succeeded() and not (args.force or config.collector.capture_always):
            sys.stdout.write(f"slurm-attrib collect: job={job.key} node={job.node} exited 0:0; nothing to do\n")
            return 0
        report = collect_node(env, config)
        report.problems[:0] = problems
        sys.stdout.write(f"slurm-attrib collect: {report.summary()} in {time.monotonic() - began:.2f} s\n")
        for problem in report.problems:
            sys.stdout.write(f"slurm-attrib collect: note: {problem}\n")
    except BaseException as exc:  # the collector never fails the epilog
        sys.stdout.write(f"slurm-attrib collect: failed: {type(exc).__name__}: {exc}\n")
    sys.stdout.flush()
    return 0


def _config(args: argparse.Namespace, env: Mapping[str, str]) -> tuple[Config, list[str]]:
    problems: list[str] = []
    try:
        config = load_config(getattr(args, "config", None))
    except Exception as exc:  # a broken config must not stop collection: defaults, and say so
        config = Config()
        problems.append(f"configuration not usable ({exc}); defaults used")
    spool_dir = getattr(args, "spool", None) or env.get(ENV_SPOOL)
    spool: SpoolConfig = replace(config.spool, dir=spool_dir) if spool_dir else config.spool
    collector = config.collector
    if getattr(args, "budget", None):
        collector = replace(collector, budget_s=float(args.budget))
    return replace(config, spool=spool, collector=collector), problems


def _terminated(signum: int, frame: Any) -> None:
    raise SystemExit(f"signal {signum}")  # unwinds through collect_node, which publishes a partial bundle


def main(argv: Optional[Sequence[str]] = None) -> int:
    signal.signal(signal.SIGTERM, _terminated)
    try:
        args = _parser().parse_args(argv)
    except SystemExit:
        return 0
    return run(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
