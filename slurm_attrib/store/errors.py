"""Errors of the store, under the project's one exception root."""

from __future__ import annotations

from ..errors import AttribError


class StoreError(AttribError):
    """The store cannot be opened, read or written (missing, corrupt, not a store)."""

    exit_code = 4


class StoreBusy(StoreError):
    """The store stayed locked or read-only through every retry; the caller may spool the verdict."""

    exit_code = 4
