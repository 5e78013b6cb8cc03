"""Choosing a backend: the CLI tools (every version) or pyslurm when it imports and matches the
installed Slurm."""

from __future__ import annotations

import importlib
import logging
from typing import Any, Callable, Optional

from .base import SlurmAccess
from .cli_backend import CliSlurm
from .errors import SlurmError
from .pyslurm_backend import PyslurmSlurm, version_matches
from .runner import CommandRunner, run_command

log = logging.getLogger(__name__)


def slurm_version(runner: CommandRunner = run_command) -> str:
    """'slurm 22.05.8' from ``sinfo --version``; '' when it cannot be run."""
    try:
        result = runner(["sinfo", "--version"], 10.0)
    except SlurmError:
        return ""
    return result.stdout.strip() if result.returncode == 0 else ""


def open_slurm(backend: str = "auto", timeout_s: float = 20.0, runner: CommandRunner = run_command,
               importer: Callable[[str], Any] = importlib.import_module, cluster: str = "") -> SlurmAccess:
    """The backend to use: ``cli``, ``pyslurm`` (an error when unusable) or ``auto`` (pyslurm when it
    imports and matches the installed Slurm, else the CLI). ``cluster`` restricts the CLI's sacct
    queries to one cluster (``--clusters``)."""
    cli = CliSlurm(runner=runner, timeout_s=timeout_s, cluster=cluster)
    if backend == "cli":
        return cli
    module: Optional[Any] = None
    why = ""
    try:
        module = importer("pyslurm")
    except ImportError as exc:
        why = f"pyslurm does not import ({exc})"
    if module is not None:
        installed = slurm_version(runner)
        ours = str(getattr(module, "__version__", ""))
        if version_matches(ours, installed):
            return PyslurmSlurm(module, cli)
        why = f"pyslurm {ours or '?'} does not match {installed or 'the installed Slurm (unknown)'}"
    if backend == "pyslurm":
        raise SlurmError(f"pyslurm backend requested but {why}")
    log.debug("using the CLI backend: %s", why)
    return cli
