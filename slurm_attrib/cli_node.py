"""Node-side commands of the CLI: ``collect`` (the Epilog's collector) and ``epilog-config``.

``epilog-config`` turns the YAML configuration into the two tiny files the /bin/sh Epilog wrapper
reads, because the wrapper must not parse YAML: ``epilog.conf`` (``key=value`` lines: budget,
python, log_file) and the flag file ``capture-always`` (present when collector.capture_always).
Both are written with temp file + rename; run it at install time and after each config change.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from .config import CollectorConfig, load_config

DEFAULT_ETC = "/etc/slurm-attrib"


def register_node(sub: Any) -> None:
    """Add ``collect`` and ``epilog-config`` to the top-level subparsers."""
    from .collect import add_collect_options

    collect = sub.add_parser("collect", help="collect this node's evidence for a finished job (Epilog)",
                             description="Collect this node's evidence for the job in the Epilog environment "
                             "and hand the node bundle to the finalizer. Always exits 0.")
    add_collect_options(collect)
    collect.set_defaults(func=cmd_collect)
    conf = sub.add_parser("epilog-config", help="write the Epilog wrapper's settings from the configuration",
                          description="Write epilog.conf and the capture-always flag file that the /bin/sh "
                          "Epilog wrapper reads (it does not parse YAML).")
    conf.add_argument("--config", help="configuration file (default /etc/slurm-attrib/slurm-attrib.yaml)")
    conf.add_argument("--etc", default=DEFAULT_ETC, help=f"directory to write into (default {DEFAULT_ETC})")
    conf.set_defaults(func=cmd_epilog_config)


def cmd_collect(args: argparse.Namespace) -> int:
    from .collect import run

    return run(args)


def epilog_settings(collector: CollectorConfig, config_path: str = "") -> str:
    """The ``epilog.conf`` text for the wrapper (values it validates again itself)."""
    budget = f"{collector.budget_s:g}" if collector.budget_s > 0 else "10"
    text = (f"# written by `slurm-attrib epilog-config` from collector.*; do not edit\n"
            f"budget={budget}\npython={collector.interpreter}\nlog_file={collector.log_file}\n")
    return text + (f"config={config_path}\n" if config_path else "")


def write_epilog_config(collector: CollectorConfig, etc: Path, config_path: str = "") -> list[Path]:
    """Write ``epilog.conf`` and create or remove ``capture-always``; returns what now exists.

    ``config_path`` (a non-default configuration file) is passed on to the collector."""
    etc.mkdir(mode=0o755, parents=True, exist_ok=True)
    _atomic_write(etc / "epilog.conf", epilog_settings(collector, config_path))
    flag = etc / "capture-always"
    if collector.capture_always:
        _atomic_write(flag, "# collector.capture_always: collect node bundles for jobs that exited 0:0 too\n")
    elif flag.exists() or flag.is_symlink():
        flag.unlink()
    return [p for p in (etc / "epilog.conf", flag) if p.exists()]


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


def cmd_epilog_config(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    for path in write_epilog_config(config.collector, Path(args.etc), args.config or ""):
        sys.stdout.write(f"wrote {path}\n")
    return 0
