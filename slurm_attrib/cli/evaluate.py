"""``eval``: score the engine on a labelled corpus (:mod:`slurm_attrib.evaluate`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .. import canonical
from .common import EXIT_RULES_FAILED, add_rule_options, command, engine_of


def cmd_eval(args: argparse.Namespace) -> int:
    from ..evaluate import evaluate, render

    report = evaluate(engine_of(args), Path(args.corpus))
    sys.stdout.write(canonical.dumps(report.to_dict()) if args.format == "json" else render(report, args.verbose))
    failed = report.accuracy < args.min_accuracy or len(report.false_accusations) > args.max_false_accusations
    if failed and args.format == "text":
        sys.stdout.write(f"FAILED: needs accuracy >= {100 * args.min_accuracy:g}% and at most "
                         f"{args.max_false_accusations} false accusation(s)\n")
    return EXIT_RULES_FAILED if failed else 0


def register(sub: Any) -> None:
    ev = command(sub, "eval", cmd_eval, "score the engine on a labelled corpus", "Diagnose every case of a "
                 "corpus (folders with case.yaml, see corpus/README.md) and score the verdicts against their "
                 "labels: accuracy per family, confusion by category, false accusations, unattributed rate. "
                 "Exit 1 below the bars.")
    ev.add_argument("corpus", help="the corpus directory")
    ev.add_argument("--format", choices=("text", "json"), default="text", help="output format")
    ev.add_argument("--min-accuracy", type=float, default=0.9, help="fail below this share right (default 0.9)")
    ev.add_argument("--max-false-accusations", type=int, default=0, help="fail above this many (default 0)")
    ev.add_argument("-v", "--verbose", action="store_true", help="list every case, not only the wrong ones")
    add_rule_options(ev)
