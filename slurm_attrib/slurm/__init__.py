"""The Slurm access layer: typed records from ``sacct``/``scontrol``/``sacctmgr`` (the default
backend on every version) or from pyslurm when it imports and matches the installed Slurm.

The package's names are loaded on first use: the engine and the node collector import the light
modules (:mod:`.states`, :mod:`.parse`) and must not pay for the backends (subprocess, logging).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .access import open_slurm, slurm_version
    from .base import SlurmAccess
    from .captured import CapturedSacct
    from .cli_backend import CliSlurm
    from .errors import SlurmCommandError, SlurmError, SlurmParseError, SlurmTimeout
    from .pyslurm_backend import PyslurmSlurm
    from .records import AcctRecord, ControllerJob, NodeEvent, NodeInfo
    from .runner import CommandResult, CommandRunner, run_command
    from .states import FAILED_STATES

_HOMES = {
    "FAILED_STATES": "states", "AcctRecord": "records", "CapturedSacct": "captured", "CliSlurm": "cli_backend",
    "CommandResult": "runner", "CommandRunner": "runner", "ControllerJob": "records", "NodeEvent": "records",
    "NodeInfo": "records", "PyslurmSlurm": "pyslurm_backend", "SlurmAccess": "base", "SlurmCommandError": "errors",
    "SlurmError": "errors", "SlurmParseError": "errors", "SlurmTimeout": "errors", "open_slurm": "access",
    "run_command": "runner", "slurm_version": "access",
}
__all__ = ["FAILED_STATES", "AcctRecord", "CapturedSacct", "CliSlurm", "CommandResult", "CommandRunner",
           "ControllerJob", "NodeEvent", "NodeInfo", "PyslurmSlurm", "SlurmAccess", "SlurmCommandError", "SlurmError",
           "SlurmParseError", "SlurmTimeout", "open_slurm", "run_command", "slurm_version"]


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` when it is first asked for (PEP 562)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{home}", __name__), name)
