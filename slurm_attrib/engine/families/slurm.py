"""Decoders for Slurm's own step errors (srun / slurmstepd): whose fault a launch failure is."""

from __future__ import annotations

import re
from typing import Any

from ...model import Symptom
from ...scan import Line
from ..context import EngineContext
from ..registry import decoder

# Reasons slurmd gives for a task launch that the job itself caused: its program, its files.
_JOB_REASONS = re.compile(r"No such file or directory|Permission denied|Exec format error|Not a directory|"
                          r"Invalid (?:user|group) id|Invalid job id", re.IGNORECASE)


@decoder("slurm_launch_reason")
def decode_launch_reason(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """A launch that failed for the job's own program is an application error on that node."""
    if _JOB_REASONS.search(str(sym.fields.get("reason", ""))):
        sym.category, sym.responsible, sym.strength = "application", "workload", 55
    return True


@decoder("slurm_execve")
def decode_execve(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """slurmd's own copy of the batch script missing from its spool is the node's fault."""
    program = str(sym.fields.get("program", ""))
    if program.endswith("/slurm_script") and sym.fields.get("reason") == "No such file or directory":
        sym.category, sym.responsible, sym.strength = "node_failure", "infrastructure", 60
        sym.summary = f"the node's slurmd spool lost the batch script ({program})"
    return True
