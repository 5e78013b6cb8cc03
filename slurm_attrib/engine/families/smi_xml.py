"""Reading an ``nvidia-smi -q -x`` snapshot line by line: which GPU a value belongs to, and whether a
counter is the volatile (since driver load) or the aggregate (lifetime) one."""

from __future__ import annotations

import re
from typing import Any

from ...model import Symptom
from ...nvidia.parse import normalise_pci
from ...scan import Line
from ..context import EngineContext
from ..registry import decoder
from .gpu import heading_above

_GPU_ID = re.compile(r'<gpu id="(?P<pci>[0-9A-Fa-f:.]+)">')
_SECTION = re.compile(r"<(?P<name>volatile|aggregate)>")


@decoder("smi_xml_gpu")
def decode_smi_xml(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """Name the GPU from the enclosing ``<gpu id=...>``; keep counters only from ``<volatile>``, and a fabric
    state only where it opens the ``<fabric>`` block."""
    if sym.fields.get("state") and heading_above(line) != "<fabric>":
        return False
    section = None
    for text in line.preceding(400):
        found = _SECTION.search(text)
        if found and section is None:
            section = found["name"]
        gpu = _GPU_ID.search(text)
        if gpu:
            try:
                sym.gpu = normalise_pci(gpu["pci"])
                sym.fields["pci"] = sym.gpu
            except ValueError:
                pass
            break
    if sym.fields.get("counter"):
        if section != "volatile":
            return False  # lifetime counts are history, not this job's evidence
        sym.strength = 45
        sym.notes.append("a volatile counter counts since the driver loaded, not only this job")
    if sym.fields.get("flag") == "remapped_row_failure":
        sym.strength = 65
    return True
