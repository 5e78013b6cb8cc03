"""Store commands (show, query, nodes, stats, replay, sweep, import-spool): option parsing and output
formatting only; every command is a call into :mod:`slurm_attrib.store`. The clock is read only
through ``--now`` or :func:`.common.now_of`; the library never reads it."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Optional

from .. import canonical
from ..config import Config
from ..errors import ConfigError
from ..store import db as store_db
from ..store import history, reports, spool
from ..store.errors import StoreError
from ..store.progress import ProgressBar
from ..store.rows import JobKey
from ..store.tables import FORMATS, format_rows
from ..store.timespec import parse_when
from ..termsafe import for_terminal
from .common import add_config_option, add_history_option, add_rule_options, command, config_of, engine_of, history_text
from .common import now_of as _now

if TYPE_CHECKING:
    from ..store.sweep import Gather


def _window(args: argparse.Namespace, now: datetime) -> reports.Window:
    return reports.Window(since=parse_when(args.since, now) if args.since else None,
                          until=parse_when(args.until, now) if args.until else None)


def _open(args: argparse.Namespace, create: bool = False) -> store_db.Store:
    """The store of ``--store``, else ``$SLURM_ATTRIB_STORE``, else the configuration's ``store.path``."""
    config = config_of(args)
    return store_db.Store.open(store_db.resolve_store_path(args.store, configured=config.store.path), create=create)


# -- show ------------------------------------------------------------------------------------------


def cmd_show(args: argparse.Namespace) -> int:
    from ..render import render_text
    from ..store.rebuild import diagnosis_from_dict

    with _open(args) as st:
        row = _one_verdict(st, args.job, args.cluster)
        previous = st.previous_verdicts(row)
        bundle = st.bundle_info(row["id"])
        diag = json.loads(row["json"])
        anchor = parse_when(row["job_time"], _now(args))
        evidence = history.offender_evidence(st, list(diag.get("culprit_nodes") or []), anchor, args.history_days,
                                             JobKey.of(diag))
    if args.format == "table":
        text = render_text(diagnosis_from_dict(diag))
        extra = _stored_text(row, bundle) + history_text(evidence, diag.get("culprit_nodes") or [],
                                                         args.history_days) + _previous_text(previous)
        sys.stdout.write(text + for_terminal(extra, keep="\n"))
    elif args.format == "json":
        sys.stdout.write(canonical.dumps({"diagnosis": diag, "verdict_id": row["verdict_id"],
                                          "verdict_time": row["verdict_time"], "gpu_hours": row["gpu_hours"],
                                          "bundle": _bundle_info(bundle), "culprit_history": evidence,
                                          "previous_verdicts": previous}))
    else:
        current = {**row, "replaced_time": None, "which": "current"}
        sys.stdout.write(format_rows([current, *({**p, "which": "previous"} for p in previous)], PREVIOUS_COLUMNS,
                                     "csv"))
    return 0


PREVIOUS_COLUMNS = ("which", "restart_count", "verdict_id", "verdict_time", "replaced_time", "status", "category",
                    "responsible", "culprit_nodes", "ruleset_hash")


def _one_verdict(st: store_db.Store, job: str, cluster: Optional[str]) -> dict[str, Any]:
    rows = st.find(job, cluster)
    if not rows:
        raise StoreError(f"no verdict for job {job}" + (f" on cluster {cluster}" if cluster else ""))
    clusters = sorted({r["cluster"] for r in rows})
    if len(clusters) > 1:
        raise ConfigError(f"job {job} is known on several clusters ({', '.join(clusters)}): pass --cluster")
    return rows[0]


def _bundle_info(bundle: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """What ``show --format json`` says of the stored bundle: :meth:`Store.bundle_info` but its file names
    (the service's answer adds them)."""
    return None if bundle is None else {k: v for k, v in bundle.items() if k != "names"}


def _stored_text(row: dict[str, Any], info: Optional[dict[str, Any]]) -> str:
    kept = "no bundle stored" if info is None else (
        f"bundle {info['files']} file(s), {info['stored_bytes']} bytes compressed"
        + (f", capped: left out {', '.join(info['omitted'])}" if info["capped"] else ""))
    hours = f"{row['gpu_hours']:.2f} GPU-hours" if row["gpu_hours"] is not None else "GPU-hours unknown"
    return f"\nstored: verdict {row['verdict_id']} at {row['verdict_time']}; {hours}; {kept}\n"


def _previous_text(previous: list[dict[str, Any]]) -> str:
    if not previous:
        return "\nprevious verdicts of this job: none\n"
    lines = [f"  {p['verdict_time']}  restart {p['restart_count']}  {p['status']} {p['category']} "
             f"{p['responsible']}  culprit {p['culprit_nodes'] or '-'}  ruleset {p['ruleset_hash']}"
             + (f"  (replaced {p['replaced_time']})" if p["replaced_time"] else "") for p in previous]
    return "\nprevious verdicts of this job:\n" + "\n".join(lines) + "\n"


# -- query, nodes, stats ---------------------------------------------------------------------------


def cmd_query(args: argparse.Namespace) -> int:
    flt = reports.VerdictFilter(window=_window(args, _now(args)), node=args.node, user=args.user,
                                partition=args.partition, category=args.category, status=args.status,
                                responsible=args.responsible, cluster=args.cluster, limit=args.limit)
    with _open(args) as st:
        rows = reports.query_verdicts(st, flt)
    sys.stdout.write(format_rows(rows, reports.LIST_COLUMNS, args.format))
    return 0


NODE_COLUMNS = ("cluster", "node", "gpus", "jobs", "categories", "first_seen", "last_seen", "gpu_hours")
NODE_GPU_COLUMNS = ("cluster", "node", "gpu", "jobs", "categories", "first_seen", "last_seen", "gpu_hours")


def cmd_nodes(args: argparse.Namespace) -> int:
    with _open(args) as st:
        rows = reports.node_offenders(st, _window(args, _now(args)), args.min_jobs, args.by_gpu, args.limit)
    sys.stdout.write(format_rows(rows, NODE_GPU_COLUMNS if args.by_gpu else NODE_COLUMNS, args.format))
    return 0


STATS_COLUMNS = ("bucket", "group", "key", "jobs", "gpu_hours", "share")


def cmd_stats(args: argparse.Namespace) -> int:
    with _open(args) as st:
        buckets = reports.verdict_stats(st, _window(args, _now(args)), args.by)
    if args.format == "json":
        sys.stdout.write(canonical.dumps([b.to_dict() for b in buckets]))
        return 0
    rows = [row for b in buckets for row in _stats_rows(b.to_dict())]
    sys.stdout.write(format_rows(rows, STATS_COLUMNS, args.format))
    return 0


def _stats_rows(bucket: dict[str, Any]) -> list[dict[str, Any]]:
    jobs = bucket["jobs"]
    rows = [{"bucket": bucket["bucket"], "group": "all", "key": "jobs", "jobs": jobs, "gpu_hours": bucket["gpu_hours"],
             "share": 1.0}]
    for status in ("unattributed", "ambiguous"):
        rows.append({"bucket": bucket["bucket"], "group": "rate", "key": status,
                     "jobs": bucket["by_status"].get(status, 0), "share": bucket[f"{status}_rate"]})
    for group in ("category", "responsible"):
        for key, value in bucket[f"by_{group}"].items():
            rows.append({"bucket": bucket["bucket"], "group": group, "key": key, "jobs": value["jobs"],
                         "gpu_hours": value["gpu_hours"], "share": round(value["jobs"] / jobs, 4) if jobs else 0.0})
    return rows


# -- replay, sweep, import-spool -------------------------------------------------------------------

REPLAY_COLUMNS = ("cluster", "job_id", "array_task", "restart_count", "outcome", "old_status", "new_status",
                  "old_category", "new_category", "old_culprit_nodes", "new_culprit_nodes", "capped", "applied")


def cmd_replay(args: argparse.Namespace) -> int:
    from ..store.replay import replay, select_for_replay

    now = _now(args)
    if args.job is None and args.since is None:
        raise ConfigError("replay needs a JOBID or --since")
    bar = ProgressBar("replay")
    with _open(args) as st:
        rows = select_for_replay(st, args.job, args.cluster, _window(args, now))
        results = replay(st, engine_of(args), rows, now, apply=args.apply, history_days=args.history_days,
                         progress=bar)
    bar.finish()
    shown = [r.to_row() for r in results if args.all or r.outcome != "same"]
    sys.stdout.write(format_rows(shown, REPLAY_COLUMNS, args.format))
    if args.format == "table":
        counts = {o: sum(1 for r in results if r.outcome == o) for o in ("same", "details", "changed", "no-bundle")}
        applied = sum(1 for r in results if r.applied)
        sys.stdout.write(f"{len(results)} verdict(s): " + ", ".join(f"{n} {o}" for o, n in counts.items())
                         + (f"; {applied} stored" if args.apply else "; nothing stored (use --apply)") + "\n")
    return 0


SWEEP_COLUMNS = ("cluster", "job_id", "state", "action", "status", "category", "culprit_nodes", "evidence", "detail")


def cmd_sweep(args: argparse.Namespace) -> int:
    from ..store.sweep import FailedJobSource, sweep

    now = _now(args)
    window = _window(args, now)
    source: FailedJobSource
    if args.sacct_file:
        from ..slurm import CapturedSacct

        source = CapturedSacct(args.sacct_file, cluster=args.cluster or "")
    else:  # the finalizer's backend (config finalizer.backend), with the sweep's own timeout

        from ..slurm import open_slurm

        source = open_slurm(config_of(args).finalizer.backend, args.sacct_timeout, cluster=args.cluster or "")
    gather = _gatherer(config_of(args)) if args.connectors else None
    bar = ProgressBar("sweep")
    with _open(args, create=True) as st:
        results = sweep(st, engine_of(args), source, window.since or now, window.until or now, now, spool=args.spool,
                        dry_run=args.dry_run, history_days=args.history_days, progress=bar, gather=gather)
    bar.finish()
    sys.stdout.write(format_rows([r.to_row() for r in results], SWEEP_COLUMNS, args.format))
    return 1 if any(r.action == "error" for r in results) else 0


def _gatherer(config: Config) -> Gather:
    """The configured watch connectors but ``files`` (a job sacct knows names no files)."""
    from ..watch.orchestrate import MAX_BYTES, gatherer
    from .watch import connector

    sources = [connector(name, config) for name in config.watch.connectors if name != "files"]
    return gatherer(sources, timedelta(seconds=config.watch.window_before_s),
                    timedelta(seconds=config.watch.window_after_s), config.watch.connector_budget_s, MAX_BYTES)


def cmd_import_spool(args: argparse.Namespace) -> int:
    folder = spool.resolve_spool_dir(args.dir, configured_root=config_of(args).spool.dir)
    with _open(args, create=True) as st:
        done = spool.import_spool(st, folder)
    rows = [{"file": str(p), "result": "imported", "error": ""} for p in done.imported]
    rows += [{"file": str(p), "result": "failed", "error": why} for p, why in done.failed]
    sys.stdout.write(format_rows(rows, ("file", "result", "error"), args.format))
    return 1 if done.failed else 0


# -- registration ----------------------------------------------------------------------------------


def _store_options(parser: argparse.ArgumentParser, window: bool = True, fmt: bool = True,
                   config: bool = True) -> None:
    """--store and friends; ``config`` adds --config (commands with the rule options have it already)."""
    parser.add_argument("--store", help=f"the store (default ${store_db.STORE_ENV}, else the configuration's "
                                        f"store.path, {store_db.DEFAULT_STORE_PATH})")
    if config:
        add_config_option(parser)
    parser.add_argument("--now", help="take this ISO time as now (durations count back from it); default: the clock")
    if window:
        parser.add_argument("--since", help="from this time: ISO date/time or a duration back from now (7d, 12h, 30m)")
        parser.add_argument("--until", help="before this time: ISO date/time or a duration back from now")
    if fmt:
        parser.add_argument("--format", choices=FORMATS, default="table", help="output format")


def register(sub: Any) -> None:
    """Add the store commands to the top-level subparsers."""
    show = command(sub, "show", cmd_show, "show the stored verdict of a job", "Show a stored verdict as a person "
                    "reads it: verdict line, root cause with its raw line, supporting symptoms, coverage, "
                    "recommended actions, culprit history and previous verdicts of the same job.")
    show.add_argument("job", metavar="JOBID", help="job id, or <array id>_<task id>")
    show.add_argument("--cluster", help="the cluster, when the job id is known on several")
    _store_options(show, window=False)
    add_history_option(show)

    query = command(sub, "query", cmd_query, "list stored verdicts", "List stored verdicts, newest first, "
                     "filtered by culprit node, user, partition, category, status, responsible party and time.")
    for option, text in (("--node", "jobs this node was the culprit of"), ("--user", "user"), ("--partition",
                         "partition"), ("--category", "category"), ("--status", "attributed, ambiguous or "
                         "unattributed"), ("--responsible", "infrastructure, workload, scheduler or unknown"),
                         ("--cluster", "cluster")):
        query.add_argument(option, help=text)
    query.add_argument("--limit", type=int, default=50, help="at most this many rows (default 50)")
    _store_options(query)

    nodes = command(sub, "nodes", cmd_nodes, "repeat offenders: culprit counts per node", "Per node (or per GPU "
                     "with --by-gpu): how many jobs it was the culprit of, in which categories, first and last "
                     "seen, and the GPU-hours of those jobs.")
    nodes.add_argument("--min-jobs", type=int, default=1, help="only nodes that were the culprit of N jobs or more")
    nodes.add_argument("--by-gpu", action="store_true", help="one row per (node, GPU)")
    nodes.add_argument("--limit", type=int, help="at most this many rows")
    _store_options(nodes)

    stats = command(sub, "stats", cmd_stats, "verdict counts and lost GPU-hours over time", "Counts and lost "
                     "GPU-hours per category and per responsible party in each day or week, with the "
                     "unattributed and ambiguous rates.")
    stats.add_argument("--by", choices=("day", "week"), default="week", help="bucket size (weeks start on Monday)")
    _store_options(stats)

    replay = command(sub, "replay", cmd_replay, "re-run stored bundles with the current rules", "Re-run the "
                      "stored evidence bundles with the current rules and show which verdicts would change; "
                      "--apply stores the new verdicts (the old ones stay in the history).")
    replay.add_argument("job", metavar="JOBID", nargs="?", help="one job (else every job in --since/--until)")
    replay.add_argument("--cluster", help="the cluster")
    replay.add_argument("--apply", action="store_true", help="store the verdicts that changed")
    replay.add_argument("--all", action="store_true", help="list unchanged verdicts too")
    _store_options(replay, config=False)
    add_history_option(replay)
    add_rule_options(replay)

    sweep = command(sub, "sweep", cmd_sweep, "backfill verdicts for failed jobs sacct knows", "Backfill: every "
                     "failed job sacct reports in the window that has no verdict gets one, from the job facts "
                     "and its spooled bundle (--spool DIR/<job id>/) when there is one.")
    sweep.add_argument("--spool", help="directory of node bundles: DIR/<cluster>/<job id>/ or DIR/<job id>/")
    sweep.add_argument("--cluster", help="the cluster (sacct --clusters; and the cluster name of --sacct-file output)")
    sweep.add_argument("--sacct-file", action="append", help="read this captured `sacct --parsable2` output "
                       "instead of running sacct (repeatable)")
    sweep.add_argument("--sacct-timeout", type=float, default=60.0, help="seconds sacct may take (default 60)")
    sweep.add_argument("--dry-run", action="store_true", help="list the jobs that would get a verdict")
    sweep.add_argument("--connectors", action="store_true",
                       help="a job without a spooled node bundle gets the evidence of the watch connectors "
                            "(watch.connectors: Loki, Prometheus, Kubernetes) over its window")
    _store_options(sweep, config=False)
    add_history_option(sweep)
    add_rule_options(sweep)

    imp = command(sub, "import-spool", cmd_import_spool, "load spooled verdicts into the store", "Load the "
                   "verdicts that were spooled while the store was locked or read-only, then remove them.")
    imp.add_argument("dir", metavar="DIR", nargs="?", help=f"spool directory (default ${spool.SPOOL_ENV}/verdicts, "
                     f"else verdicts/ under the configuration's spool.dir, {spool.DEFAULT_SPOOL_DIR})")
    _store_options(imp, window=False)
