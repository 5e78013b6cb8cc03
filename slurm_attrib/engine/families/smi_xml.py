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
# a whole element on its own line ('\t\t\t<remapped_row_pending>Yes</remapped_row_pending>'), and a line that only
# opens one ('\t\t<remapped_rows>')
_ELEMENT_LINE = re.compile(r"[ \t]*<(?P<tag>\w{1,64})>[^<>\n]{0,200}</(?P=tag)>[ \t]*")
_OPEN_LINE = re.compile(r"[ \t]*<(?P<tag>\w{1,64})(?: [^<>\n]{0,200})?>[ \t]*")
# the block each value belongs in: a flag in remapped_rows or retired_pages, a counter in ecc_errors' volatile
_PARENTS = {"flag": ("remapped_rows", "retired_pages"), "counter": ("volatile",)}
_PROCESSES = re.compile(r"[ \t]*<processes>[ \t]*")


def _parent_element(line: Line) -> str | None:
    """The element the matched line's element sits in: the nearest line above it, indented less, that only opens
    one; None when the line is no whole element of its own (a value inside another element's text, such as a
    process name that spells out a tag) or the block runs past what is read."""
    text = line.text[len(line.lead):]
    if not _ELEMENT_LINE.fullmatch(text):
        return None
    indent = len(text) - len(text.lstrip())
    for previous in line.preceding(60):
        if previous.strip() and len(previous) - len(previous.lstrip()) < indent:
            found = _OPEN_LINE.fullmatch(previous)
            return found["tag"] if found else None
    return None


@decoder("smi_xml_gpu")
def decode_smi_xml(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """Name the GPU from the enclosing ``<gpu id=...>``; keep counters only from ``<volatile>``, and a fabric
    state only where it opens the ``<fabric>`` block. A flag or counter must be a whole element of its own in the
    block it belongs to, above the GPU's ``<processes>``: a process name is any user's text (nvidia-smi lists
    every process on the GPU), and one that spells out '<remapped_row_pending>Yes<...' is no GPU's state."""
    if sym.fields.get("state") and heading_above(line) != "<fabric>":
        return False
    kind = "flag" if sym.fields.get("flag") else "counter" if sym.fields.get("counter") else None
    if kind is not None and _parent_element(line) not in _PARENTS[kind]:
        return False
    section = None
    for text in line.preceding(400):
        if kind is not None and _PROCESSES.fullmatch(text):
            return False  # below the GPU's process list: text a process wrote, laid out as the snapshot's
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
