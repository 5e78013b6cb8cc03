"""Running a Slurm command: never through a shell, always with a timeout. Injected into backends so
tests give a fake that replays captured output."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from .errors import SlurmCommandError, SlurmTimeout

SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


class CommandRunner(Protocol):
    def __call__(self, argv: Sequence[str], timeout: float) -> CommandResult: ...


def run_command(argv: Sequence[str], timeout: float) -> CommandResult:
    """Run ``argv`` (no shell) with ``timeout`` seconds; a missing binary or a timeout raises."""
    env = dict(os.environ)
    env.setdefault("PATH", SAFE_PATH)
    env["LC_ALL"] = "C"
    env.pop("SLURM_TIME_FORMAT", None)  # keep sacct's ISO 8601 times
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, shell=False,
                              env=env, stdin=subprocess.DEVNULL, errors="replace")
    except subprocess.TimeoutExpired:
        raise SlurmTimeout(f"{argv[0]}: no answer within {timeout:g} s", tuple(argv)) from None
    except OSError as exc:
        raise SlurmCommandError(f"{argv[0]}: cannot run: {exc.strerror}", tuple(argv)) from None
    return CommandResult(tuple(argv), done.returncode, done.stdout, done.stderr)
