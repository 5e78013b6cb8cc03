"""Bearer tokens kept in a file only its owner can read: the service's write tokens, and the one a node's
collector sends with its bundle. Standard library only, so the collector can read one."""

from __future__ import annotations

import os
import stat

from .errors import ConfigError
from .safeio import read_regular

MAX_TOKEN_FILE_BYTES = 1 << 20


def read_token_file(path: str) -> list[str]:
    """The tokens of ``path`` (one a line, ``#`` comments); none when it does not exist. ConfigError when
    it is not a regular file (checked before it is opened: a FIFO would block, a device answer) or anyone
    but its owner may read or write it: a token others can read is no secret."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the tokens: {exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode) or info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(f"{path}: tokens must be in a regular file only its owner can read (chmod 600)")
    try:
        text = read_regular(path, MAX_TOKEN_FILE_BYTES).decode("utf-8", "replace")
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read the tokens: {exc}") from None
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
