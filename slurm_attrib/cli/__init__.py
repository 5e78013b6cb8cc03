"""The ``slurm-attrib`` command line: option parsing and output only; every command is a call into the
library. One module per command group registers its commands; :func:`main` is the one place that
maps exceptions to messages and exit codes.

Every command that judges evidence builds its engine from the configuration (``--config``, else
``$SLURM_ATTRIB_CONFIG``, else /etc/slurm-attrib/slurm-attrib.yaml) exactly as the finalizer does.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Callable, Optional

from .. import __version__
from ..errors import AttribError
from ..termsafe import for_terminal
from .common import EXIT_USAGE

# The modules that register commands, in the order the help lists them.
GROUPS = ("diagnose", "rules", "evaluate", "store", "slurm", "node", "doctor", "serve", "watch")
# Which module registers each command: a run imports the module of its command only. The others bring
# the store, the service, the Slurm backends and the connectors (~30 ms of every start); the help and
# a name that is no command load them all. tests/cli/test_main.py checks this table against `register`.
COMMANDS = {
    "diagnose": "diagnose", "demo": "diagnose", "rules": "rules", "eval": "evaluate", "show": "store",
    "query": "store", "nodes": "store", "stats": "store", "replay": "store", "sweep": "store",
    "import-spool": "store", "finalize": "slurm", "remediate": "slurm", "collect": "node",
    "epilog-config": "node", "doctor": "doctor", "serve": "serve", "watch": "watch",
}


def build_parser(argv: Optional[Sequence[str]] = None) -> argparse.ArgumentParser:
    """The parser of every command, or with ``argv`` naming a known command, of that command's module."""
    parser = argparse.ArgumentParser(prog="slurm-attrib", description="Deterministic failure attribution "
                                     "for GPU training jobs on Slurm.")
    parser.add_argument("--version", action=_VersionAction, nargs=0,
                        help="show the version and the prefilter in use (hyperscan or re), then exit")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = _module_of(argv)
    for group in GROUPS:
        if wanted is None or group == wanted:
            importlib.import_module(f"{__name__}.{group}").register(sub)
    return parser


def _module_of(argv: Optional[Sequence[str]]) -> Optional[str]:
    """The module of the command ``argv`` runs (its first word that is no option); None for all."""
    for word in argv or ():
        if not word.startswith("-"):
            return COMMANDS.get(word)
    return None


class _VersionAction(argparse.Action):
    """``--version``: the release and which multi-pattern prefilter the scan uses here, so an admin can
    see whether the compiled one is installed. The engine is imported only when asked."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: Optional[str] = None) -> None:
        from ..engine import prefilter

        sys.stdout.write(f"slurm-attrib {__version__}\nprefilter: {prefilter.kind()}\n")
        parser.exit()


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    func: Optional[Callable[[argparse.Namespace], int]] = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        code = func(args)
        sys.stdout.flush()  # a reader that went away is found here, not at interpreter exit
        return code
    except BrokenPipeError:  # before OSError, of which it is one: `| head` is not an error
        _silence_stdout()
        return 0
    except AttribError as exc:
        if args.debug:
            raise
        sys.stderr.write(f"slurm-attrib: error: {for_terminal(str(exc))}\n")
        return exc.exit_code
    except (OSError, ValueError) as exc:
        if args.debug:
            raise
        sys.stderr.write(f"slurm-attrib: error: {for_terminal(str(exc))}\n")
        return 1


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the flush at exit does not raise a second BrokenPipeError."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
