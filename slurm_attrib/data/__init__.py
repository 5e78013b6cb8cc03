"""Package data: the XID catalog and the built-in demo bundle."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def demo_bundle() -> Path:
    """The bundled demo case: the NVLink fault of DESIGN.md §1 (XID 149 on node-02)."""
    return Path(str(resources.files(__name__) / "demo"))
