"""``doctor``: check this node's (``--node``, the default) or the controller's (``--controller``) install
and say what to fix (:mod:`slurm_attrib.doctor`). Exits 1 when a check fails."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from .. import canonical
from .common import add_config_option, config_of
from .node import DEFAULT_ETC


def register(sub: Any) -> None:
    doctor = sub.add_parser("doctor", help="check the install on this node or the controller",
                            description="Check that a failed job on this node gets its evidence collected "
                            "(--node: slurm.conf's Epilog, the wrapper's settings, its interpreter, the spool, "
                            "the tools) or its verdict made (--controller: the Slurm commands, the trigger, "
                            "the hook's user, the store). Changes nothing. Exit 1 when a check fails.")
    mode = doctor.add_mutually_exclusive_group()
    mode.add_argument("--node", dest="mode", action="store_const", const="node", help="node checks (default)")
    mode.add_argument("--controller", dest="mode", action="store_const", const="controller",
                      help="controller checks")
    add_config_option(doctor)
    doctor.add_argument("--etc", default=DEFAULT_ETC, help=f"the wrapper's settings folder (default {DEFAULT_ETC})")
    doctor.add_argument("--slurm-conf", help="slurm.conf (default $SLURM_CONF, else /etc/slurm/slurm.conf)")
    doctor.add_argument("--format", choices=("text", "json"), default="text")
    doctor.set_defaults(func=cmd_doctor, mode="node")


def cmd_doctor(args: argparse.Namespace) -> int:
    from .. import doctor

    config = config_of(args)
    place = doctor.Place(etc=Path(args.etc), slurm_conf=Path(args.slurm_conf) if args.slurm_conf else None)
    run = doctor.controller_checks if args.mode == "controller" else doctor.node_checks
    checks = run(config, place, dict(os.environ))
    sys.stdout.write(canonical.dumps(doctor.as_json(checks)) + "\n" if args.format == "json"
                     else doctor.report(checks))
    return 1 if doctor.failed(checks) else 0
