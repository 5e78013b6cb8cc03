"""``slurm-attrib serve --demo``: a temporary store filled with the bundled demo and, in a source
checkout, the golden cases (tests/golden/*/bundle), each recorded through
:func:`slurm_attrib.attribution.attribute` as the finalizer records a verdict."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Optional

from ..attribution import SqliteVerdictStore, attribute
from ..config import StoreConfig
from ..data import demo_bundle
from ..engine import Engine
from ..store import Store


def demo_bundles(checkout: Optional[Path] = None) -> list[Path]:
    """The demo bundle, then the golden cases of the source checkout when there is one, sorted."""
    root = checkout or Path(__file__).resolve().parents[2]
    golden = sorted(p for p in (root / "tests" / "golden").glob("*/bundle") if (p / "job.yaml").is_file())
    return [demo_bundle(), *golden]


def fill_demo_store(engine: Engine, folder: Path, now: datetime, bundles: Optional[Iterable[Path]] = None) -> Path:
    """Create ``folder/store.sqlite`` and record a verdict for each bundle; the store's path."""
    path = folder / "store.sqlite"
    Store.open(path).close()  # created and migrated, so the first reader finds a store
    store = SqliteVerdictStore(StoreConfig(path=str(path)), folder / "verdicts")
    for bundle in bundles if bundles is not None else demo_bundles():
        attribute(engine, bundle, store, now, 30.0)
    return path
