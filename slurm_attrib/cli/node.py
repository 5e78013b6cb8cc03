"""Node-side commands: ``collect`` (the Epilog's collector, :mod:`slurm_attrib.collect`) and
``epilog-config`` (the wrapper's settings, :mod:`slurm_attrib.epilog_config`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..config import load_config
from ..epilog_config import write_epilog_config
from .common import add_config_option

DEFAULT_ETC = "/etc/slurm-attrib"


def register(sub: Any) -> None:
    """Add ``collect`` and ``epilog-config`` to the top-level subparsers."""
    from ..collect import add_collect_options

    collect = sub.add_parser("collect", help="collect this node's evidence for a finished job (Epilog)",
                             description="Collect this node's evidence for the job in the Epilog environment "
                             "and hand the node bundle to the finalizer. Always exits 0.")
    add_collect_options(collect)
    collect.set_defaults(func=cmd_collect)
    conf = sub.add_parser("epilog-config", help="write the Epilog wrapper's settings from the configuration",
                          description="Write epilog.conf and the capture-always flag file that the /bin/sh "
                          "Epilog wrapper reads (it does not parse YAML).")
    add_config_option(conf)
    conf.add_argument("--etc", default=DEFAULT_ETC, help=f"directory to write into (default {DEFAULT_ETC})")
    conf.set_defaults(func=cmd_epilog_config)


def cmd_collect(args: argparse.Namespace) -> int:
    from ..collect import run

    return run(args)


def cmd_epilog_config(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    for path in write_epilog_config(config.collector, Path(args.etc), args.config or ""):
        sys.stdout.write(f"wrote {path}\n")
    return 0
