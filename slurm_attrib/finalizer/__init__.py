"""The controller-side finalizer: queue → job state → node bundles → job bundle → engine → store →
AdminComment (→ optional drain). See :mod:`.service`."""

from __future__ import annotations

from .service import Finalizer, Result

__all__ = ["Finalizer", "Result"]
