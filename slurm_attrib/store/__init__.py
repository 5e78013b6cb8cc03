"""The SQLite store: verdicts with indexed columns, culprit events, bundles, history; the reports over it."""

from .db import DEFAULT_STORE_PATH, RecordResult, Store, StoreSettings, resolve_store_path
from .errors import StoreBusy, StoreError
from .history import settings_with_history
from .spool import import_spool, record_or_spool

__all__ = [
    "DEFAULT_STORE_PATH", "RecordResult", "Store", "StoreBusy", "StoreError", "StoreSettings",
    "import_spool", "record_or_spool", "resolve_store_path", "settings_with_history",
]
