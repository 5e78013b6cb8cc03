"""Canonical JSON: sorted keys, fixed separators, UTF-8, one trailing newline.

The same Diagnosis must serialise to the same bytes on every run, whatever the hash seed or the
order in which files were created; lists are ordered by the engine, dict keys are sorted here.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def dumps(obj: Any, *, indent: int | None = 2) -> str:
    """Serialise ``obj`` canonically (sorted keys, no NaN, non-ASCII kept as UTF-8)."""
    separators = (",", ": ") if indent else (",", ":")
    return json.dumps(obj, sort_keys=True, indent=indent, separators=separators, ensure_ascii=False,
                      allow_nan=False) + "\n"


def digest(obj: Any) -> str:
    """SHA-256 of the compact canonical form of ``obj``, hex."""
    return hashlib.sha256(dumps(obj, indent=None).encode("utf-8")).hexdigest()
