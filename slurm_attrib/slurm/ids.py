"""The grammar of every id handed to ``scontrol``, ``sacct`` and ``sacctmgr``, checked in one place.

An id reaches an argv from the hooks' environment, from scontrol or from sacct; if user text ever
slipped into one (``101_0,778,779`` from a forged ``ArrayTaskId``), ``sacctmgr ... where jobid=`` would
modify other users' jobs and ``sacct --jobs=`` would read them. So the backend builds no command with
an id that does not match its grammar here: :class:`SlurmIdError`, and nothing runs.
"""

from __future__ import annotations

import re

from .errors import SlurmError

# job 123, array task 7_1, het job component 123+0 (Slurm's own forms; no lists, no ranges, no steps)
_GRAMMAR = {
    "job": re.compile(r"[0-9]{1,10}(?:_[0-9]{1,10})?(?:\+[0-9]{1,10})?"),
    "cluster": re.compile(r"[A-Za-z0-9_-]{1,64}"),
    "node": re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"),
    "partition": re.compile(r"[A-Za-z0-9_.-]{1,128}"),
}


class SlurmIdError(SlurmError):
    """An id does not match the grammar of its kind: no Slurm command was run with it."""

    exit_code = 2


def checked(kind: str, value: str) -> str:
    """``value`` when it is a well-formed ``kind`` id (job, cluster, node, partition), else SlurmIdError."""
    if not _GRAMMAR[kind].fullmatch(value or ""):
        raise SlurmIdError(f"refusing to pass {kind} id {value[:80]!r} to Slurm: not a {kind} id")
    return value


def is_valid(kind: str, value: str) -> bool:
    return _GRAMMAR[kind].fullmatch(value or "") is not None
