"""Compiled Hyperscan databases kept on disk between runs (:mod:`..diskcache`, its trust model).

Compiling the rules' patterns costs about 3 s (the line-start patterns' prefixes most), paid by every
``diagnose`` and every finalizer run, while the serialized database loads in a millisecond. A database
is stored under the hash of everything that shaped it (Hyperscan's version, mode, flags and patterns).
"""

from __future__ import annotations

from typing import Any, Callable

from ..diskcache import cached


def cached_database(hs: Any, shape: tuple[Any, ...], compile_db: Callable[[], Any]) -> Any:
    """The database ``compile_db`` makes, loaded from the cache when ``shape`` was compiled before."""
    key = repr((getattr(hs, "__version__", ""), hs.HS_MODE_BLOCK, shape))
    return cached(key, ".hsdb", compile_db, hs.dumpb, lambda data: hs.loadb(data, hs.HS_MODE_BLOCK), (hs.error,))
