"""Errors of the Slurm access layer, under the project's one exception root."""

from __future__ import annotations

from ..errors import AttribError


class SlurmError(AttribError):
    """A Slurm command failed, timed out, is missing, or printed what cannot be parsed."""

    exit_code = 5


class SlurmCommandError(SlurmError):
    """The command could not run or exited non-zero; ``stderr`` carries Slurm's message."""

    def __init__(self, message: str, argv: tuple[str, ...] = (), returncode: int = -1, stderr: str = "") -> None:
        super().__init__(message)
        self.argv = argv
        self.returncode = returncode
        self.stderr = stderr


class SlurmTimeout(SlurmCommandError):
    """The command ran past its timeout and was killed."""


class SlurmParseError(SlurmError):
    """Slurm printed something the parser does not understand."""
