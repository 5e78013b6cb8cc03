"""What every command shares: the configuration, the engine it describes, the clock, and printing a
diagnosis. Commands read the clock only through :func:`now_of` (``--now`` where a command offers it)."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Optional

from .. import canonical
from ..config import DEFAULT_PATH, ENV_PATH, Config, load_config
from ..settings import DEFAULT_HISTORY_DAYS

if TYPE_CHECKING:
    from ..engine import Engine
    from ..model import Diagnosis

EXIT_USAGE = 2
EXIT_RULES_FAILED = 1
Handler = Callable[[argparse.Namespace], int]


def add_config_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help=f"configuration file (default ${ENV_PATH}, else {DEFAULT_PATH})")


def add_rule_options(parser: argparse.ArgumentParser) -> None:
    """The options that pick the engine: the configuration and where the site rules come from."""
    add_config_option(parser)
    parser.add_argument("--rules-dir", help="site rules directory (default $SLURM_ATTRIB_RULES_D, else the "
                                            "configuration's rules_dir, /etc/slurm-attrib/rules.d)")
    parser.add_argument("--no-site-rules", action="store_true", help="use the bundled rules only")


def add_history_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--history-days", type=_history_days, default=DEFAULT_HISTORY_DAYS,
                        help="how far back the culprit history of a node reaches (days, or 30d, 2w)")


def _history_days(text: str) -> float:
    try:
        days = float(text)
    except ValueError:
        from ..store.timespec import parse_duration

        delta = parse_duration(text)
        days = delta.total_seconds() / 86400 if delta else 0.0
    if days <= 0:
        raise argparse.ArgumentTypeError(f"not a number of days or a duration: {text!r}")
    return days


def history_text(evidence: dict[str, list[str]], culprits: list[str], days: float) -> str:
    """What the store says of the culprit nodes' earlier jobs, after a verdict printed as text."""
    lines = [f"  {node}: culprit of {len(evidence[node])} earlier job(s): {', '.join(evidence[node])}"
             for node in culprits if evidence.get(node)]
    return (f"\nstore history of the culprit nodes ({days:g} days before the job):\n" + "\n".join(lines) + "\n") \
        if lines else ""


def config_of(args: argparse.Namespace) -> Config:
    return load_config(getattr(args, "config", None))


def engine_of(args: argparse.Namespace, config: Optional[Config] = None) -> Engine:
    """The engine the configuration describes (:meth:`Engine.from_config`), as the finalizer builds it."""
    from ..engine import Engine

    return Engine.from_config(config or config_of(args), rules_dir=args.rules_dir,
                              include_site=not args.no_site_rules)


def now_of(args: argparse.Namespace) -> datetime:
    """``--now`` (ISO time) or the current time."""
    if getattr(args, "now", None):
        from ..store.timespec import parse_when

        return parse_when(args.now, datetime(1970, 1, 1, tzinfo=timezone.utc))
    return datetime.now(timezone.utc)


def write_diagnosis(diag: Diagnosis, fmt: str, trailer: str = "") -> None:
    """A diagnosis as canonical JSON or as text (with ``trailer`` after the text)."""
    if fmt == "json":
        sys.stdout.write(canonical.dumps(diag.to_dict()))
        return
    from ..render import render_text
    from ..termsafe import for_terminal

    sys.stdout.write(render_text(diag) + for_terminal(trailer, keep="\n"))


def command(sub: Any, name: str, func: Handler, text: str, description: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(name, help=text, description=description)
    parser.set_defaults(func=func)
    return parser
