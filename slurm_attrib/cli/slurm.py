"""Slurm commands: ``finalize`` (the controller daemon, or ``--once``) and ``remediate`` (the drain
ledger). Option parsing and the clock live here; the work is in :mod:`slurm_attrib.finalizer`,
:mod:`slurm_attrib.remediate` and :mod:`slurm_attrib.slurm`."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

from ..config import Config, load_config
from .common import add_config_option

SPOOL_ENV = "SLURM_ATTRIB_SPOOL"
STORE_ENV = "SLURM_ATTRIB_STORE"


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _config(args: argparse.Namespace) -> Config:
    return load_config(args.config)


def _spool(args: argparse.Namespace, config: Config) -> Path:
    return Path(args.spool or os.environ.get(SPOOL_ENV) or config.spool.dir)


def _setup_logging(config: Config, debug: bool) -> None:
    target = config.finalizer.log_file
    handler: logging.Handler = logging.FileHandler(target) if target else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("slurm_attrib")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if debug else logging.INFO)


def build_finalizer(config: Config, spool: Path, store_path: Optional[str] = None) -> Any:
    """A Finalizer wired to the real Slurm, engine, store and (when on) remediation."""
    from dataclasses import replace

    from ..attribution import SqliteVerdictStore
    from ..engine import Engine
    from ..finalizer import Finalizer
    from ..remediate import DrainLedger, Remediator
    from ..slurm import open_slurm

    slurm = open_slurm(config.finalizer.backend, config.finalizer.command_timeout_s)
    engine = Engine.from_config(config)
    store_config = replace(config.store, path=store_path or os.environ.get(STORE_ENV) or config.store.path)
    store = SqliteVerdictStore(store_config, spool / "verdicts", write_budget_s=config.finalizer.store_write_budget_s)
    remediator = Remediator(config.remediation, slurm, DrainLedger(Path(config.remediation.state_file))) \
        if config.remediation.drain else None
    from .watch import connector

    gaps = [connector(name, config) for name in config.finalizer.gap_connectors]
    return Finalizer(config=config, spool=spool, slurm=slurm, engine=engine, store=store, remediator=remediator,
                     clock=_now, gap_sources=gaps)


def cmd_finalize(args: argparse.Namespace) -> int:
    config = _config(args)
    if args.status:
        return _finalize_status(_spool(args, config), args.format)
    _setup_logging(config, args.debug)
    spool = _spool(args, config)
    for sub in ("queue", "nodes", "done", "jobs"):
        (spool / sub).mkdir(parents=True, exist_ok=True)
    from ..finalizer.lock import SpoolLock

    lock = SpoolLock.acquire(spool)  # held until this process ends
    finalizer = build_finalizer(config, spool, args.store)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    finalizer.stopping = stop.is_set  # a step ends after the job in hand; the sleep ends at once
    poll = args.poll if args.poll is not None else config.finalizer.poll_interval_s
    finalizer.clean_temp()
    last_prune = 0.0
    while not stop.is_set():
        if time.time() - last_prune > 3600:  # at start (what a crash left behind), then hourly
            finalizer.prune(_now())
            last_prune = time.time()
        for result in finalizer.step(_now()):
            if result.outcome != "waiting" and args.verbose:
                sys.stdout.write(json.dumps(result.__dict__, sort_keys=True) + "\n")
                sys.stdout.flush()
        if args.once and finalizer.idle():
            break
        stop.wait(poll)
    lock.release()
    return 0


def _finalize_status(spool: Path, fmt: str) -> int:
    """What waits in the spool, and one line per quarantined entry (job, queue entry, spooled verdict)."""
    from .. import quarantine

    queued = len([p for p in (spool / "queue").glob("*.json") if not p.name.startswith(".tmp-")]) \
        if (spool / "queue").is_dir() else 0
    spooled = len(list((spool / "verdicts").glob("verdict-*.json"))) if (spool / "verdicts").is_dir() else 0
    held = [q for folder in (spool / quarantine.FOLDER, spool / "verdicts" / quarantine.FOLDER)
            for q in quarantine.listing(folder)]
    from ..finalizer.lock import holder

    running, pid = holder(spool)
    if fmt == "json":
        sys.stdout.write(json.dumps({"spool": str(spool), "finalizer_running": running, "finalizer_pid": pid,
                                     "queued": queued, "spooled_verdicts": spooled,
                                     "quarantined": [{"path": str(q.folder), "kind": q.kind, "name": q.name,
                                                      "time": q.time, "reason": q.reason} for q in held]},
                                    indent=1, sort_keys=True) + "\n")
        return 0
    state = (f"a finalizer runs (pid {pid})" if pid else "a finalizer runs") if running else "no finalizer runs"
    sys.stdout.write(f"spool {spool}: {state}; {queued} queue entr{'y' if queued == 1 else 'ies'}, "
                     f"{spooled} spooled verdict(s), {len(held)} quarantined\n")
    for q in held:
        first = q.reason.splitlines()[0] if q.reason else ""
        sys.stdout.write(f"quarantined {q.time} {q.kind}: {q.name}: {first} ({q.folder})\n")
    return 0


def cmd_remediate_status(args: argparse.Namespace) -> int:
    from ..remediate import DrainLedger

    config = _config(args)
    drains = DrainLedger(Path(args.state or config.remediation.state_file)).load()
    if args.format == "json":
        sys.stdout.write(json.dumps(drains, indent=1, sort_keys=True) + "\n")
        return 0
    for d in drains:
        state = f"resumed {d['resumed']}" if d.get("resumed") else "drained"
        sys.stdout.write(f"{d.get('time', '')}  {d.get('node', ''):<16} {state:<10} {d.get('reason', '')}\n")
    sys.stdout.write(f"{len(drains)} drain(s) recorded\n")
    return 0


def cmd_remediate_resume(args: argparse.Namespace) -> int:
    from ..remediate import DrainLedger, Remediator
    from ..slurm import open_slurm

    config = _config(args)
    slurm = open_slurm(config.finalizer.backend, config.finalizer.command_timeout_s)
    remediator = Remediator(config.remediation, slurm, DrainLedger(Path(args.state or config.remediation.state_file)))
    decision = remediator.resume(args.node, _now())
    sys.stdout.write(f"{decision.node}: resumed (was: {decision.reason})\n")
    return 0


def register(sub: Any) -> None:
    """Add the Slurm-facing commands to the top-level subparsers."""
    fin = sub.add_parser("finalize", help="run the controller-side finalizer",
                         description="Turn queued jobs (from EpilogSlurmctld/jobcomp) into stored verdicts and "
                                     "AdminComments: a long-running service, or --once for what is queued now.")
    fin.add_argument("--once", action="store_true", help="process what is queued (waiting as needed) and exit")
    fin.add_argument("--spool", help=f"spool root (default: config spool.dir, or ${SPOOL_ENV})")
    fin.add_argument("--store", help=f"SQLite store (default: config store.path, or ${STORE_ENV})")
    add_config_option(fin)
    fin.add_argument("--poll", type=float, help="seconds between passes (default finalizer.poll_interval_s)")
    fin.add_argument("-v", "--verbose", action="store_true", help="print one JSON line per finished job")
    fin.add_argument("--status", action="store_true",
                     help="print what waits in the spool and one line per quarantined entry, then exit")
    fin.add_argument("--format", choices=("table", "json"), default="table", help="--status output format")
    fin.set_defaults(func=cmd_finalize)

    rem = sub.add_parser("remediate", help="inspect or undo slurm-attrib's drains",
                         description="The drain ledger of opt-in remediation: list drains, resume a node "
                                     "slurm-attrib drained (never one it did not drain).")
    rsub = rem.add_subparsers(dest="remediate_command", metavar="SUBCOMMAND")
    status = rsub.add_parser("status", help="list recorded drains", description="List the drains slurm-attrib "
                             "recorded (node, time, reason, resumed).")
    status.add_argument("--format", choices=("table", "json"), default="table", help="output format")
    resume = rsub.add_parser("resume", help="resume a node slurm-attrib drained",
                             description="Resume NODE if slurm-attrib drained it and its reason is still ours.")
    resume.add_argument("node", help="node name")
    for p, func in ((status, cmd_remediate_status), (resume, cmd_remediate_resume)):
        add_config_option(p)
        p.add_argument("--state", help="drain ledger file (default remediation.state_file)")
        p.set_defaults(func=func)
