"""The Epilog wrapper's settings, from the YAML configuration.

The ``/bin/sh`` Epilog wrapper must not parse YAML, so ``slurm-attrib epilog-config`` turns the
configuration into two tiny files it reads: ``epilog.conf`` (``key=value`` lines: budget, python,
log_file, config) and the flag file ``capture-always`` (present when collector.capture_always). Both
are written with temp file + rename; run it at install time and after each config change.
"""

from __future__ import annotations

import os
from pathlib import Path

from .config import CollectorConfig


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
