"""``diagnose`` (one bundle; with ``--store`` the store's history feeds the verdict and the verdict is
kept) and ``demo`` (the built-in bundle). The work is :func:`slurm_attrib.attribution.attribute`, the
function the finalizer and the service call too."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from typing import Any

from ..data import demo_bundle
from ..termsafe import for_terminal
from .common import (
    add_history_option,
    add_rule_options,
    command,
    config_of,
    engine_of,
    history_text,
    now_of,
    write_diagnosis,
)


def cmd_diagnose(args: argparse.Namespace) -> int:
    config = config_of(args)
    engine = engine_of(args, config)
    if not args.store:
        write_diagnosis(engine.diagnose(args.bundle), args.format)
        return 0
    from ..attribution import SqliteVerdictStore, attribute  # the store's modules, only when it is used
    from ..store import StoreError

    # By hand, a store that cannot be used is an error, never a reason to write into the production
    # spool (the finalizer would import the verdict into the production store): only --spool-dir spools.
    store = SqliteVerdictStore(replace(config.store, path=args.store), args.spool_dir)
    done = attribute(engine, args.bundle, store, now_of(args), args.history_days)
    for warning in done.warnings():
        sys.stderr.write(f"slurm-attrib: warning: {for_terminal(str(warning))}\n")
    write_diagnosis(done.diagnosis, args.format,
                    history_text(done.history.culprit_jobs(), done.diagnosis.culprit_nodes, args.history_days))
    return StoreError.exit_code if done.stored is not None and not done.stored.where else 0


def cmd_demo(args: argparse.Namespace) -> int:
    bundle = demo_bundle()
    diag = engine_of(args).diagnose(bundle)
    if args.format == "text":
        sys.stdout.write(f"demo bundle: {bundle}\n\n")
    write_diagnosis(diag, args.format)
    return 0


def register(sub: Any) -> None:
    diag = command(sub, "diagnose", cmd_diagnose, "diagnose one evidence bundle", "Run the rule engine on an "
                   "evidence bundle directory and print the diagnosis; with --store, the store's history of the "
                   "job's nodes feeds the verdict and the verdict is recorded (or spooled).")
    diag.add_argument("--bundle", required=True, help="the bundle directory (job.yaml, applog/, syslog/ ...)")
    diag.add_argument("--format", choices=("text", "json"), default="text", help="output format")
    diag.add_argument("--store", help="also record the diagnosis in this store; the store's history flags "
                                      "repeat offenders")
    diag.add_argument("--spool-dir", help="where a verdict goes when the store stays locked or read-only; "
                                          "without it such a verdict is not recorded (exit 4), never put in the "
                                          "finalizer's spool")
    diag.add_argument("--now", help="verdict time to record (ISO); default: the clock")
    add_history_option(diag)
    add_rule_options(diag)

    demo = command(sub, "demo", cmd_demo, "diagnose the built-in demo bundle",
                   "Diagnose the bundled demo case (an NVLink fault on node-02).")
    demo.add_argument("--format", choices=("text", "json"), default="text", help="output format")
    add_rule_options(demo)
