"""What an ``nvidia-smi -q -x`` snapshot (metrics/NODE.xml, taken by the node epilog after the job) says about
each GPU's memory: whether it counted uncorrectable ECC errors since the driver loaded, and whether its lifetime
records (aggregate counts, remapped rows, retired pages) show one ever, or a remap or retirement waiting.

Parsed as XML, each GPU an element of the root: a process's name (any user's text) is the text of its own element
deep inside, never a GPU of the snapshot, and a name that breaks the document makes it unreadable (no GPU read)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from .parse import normalise_pci

if TYPE_CHECKING:
    from xml.etree.ElementTree import Element

# A100 and later: <sram_uncorrectable_parity>, <sram_uncorrectable_secded>, <dram_uncorrectable> (older drivers:
# <sram_uncorrectable>); before: <double_bit> ... <total>N</total></double_bit>
_UNCORRECTABLE = re.compile(r"(?:dram|sram)_uncorrectable\w*")
_WAITING = ("remapped_rows/remapped_row_pending", "remapped_rows/remapped_row_failure",
            "retired_pages/pending_retirement", "retired_pages/pending_blacklist")
_EVER = ("remapped_rows/remapped_row_unc", "retired_pages/double_bit_retirement/retired_count")


@dataclass(frozen=True)
class GpuMemoryState:
    """One GPU's memory as the snapshot shows it. ``uncorrectable``: the sum of its volatile uncorrectable ECC
    counters, None where it shows none as a number (ECC off, N/A); ``pending``: a remap or retirement waits or
    failed; ``history``: its lifetime records show an uncorrectable error ever (an aggregate count, a row remapped
    for one, a page retired): the volatile counters start again at every driver load and GPU reset, so a clean
    volatile count says nothing then."""

    pci: str
    uncorrectable: Optional[int]
    pending: bool
    history: bool

    @property
    def clean(self) -> bool:
        """Counted no uncorrectable error since the driver loaded, never had one, and has no remap waiting: its
        memory failed nothing, as far as the snapshot can say."""
        return self.uncorrectable == 0 and not self.pending and not self.history


def gpu_memory_states(data: bytes) -> dict[str, GpuMemoryState]:
    """Each GPU's :class:`GpuMemoryState`, by its normalised PCI address (``0000:2a:00``); empty for a document
    that does not parse."""
    from xml.etree import ElementTree  # on first use: most diagnoses read no GPU snapshot

    try:
        root = ElementTree.fromstring(data)
    except (ElementTree.ParseError, ValueError):
        return {}
    states: dict[str, GpuMemoryState] = {}
    for gpu in root.findall("gpu"):
        try:
            pci = normalise_pci(gpu.get("id") or "")
        except ValueError:
            continue  # a block without a PCI address names no GPU
        if pci in states:
            continue
        volatile = _counts(gpu.find("ecc_errors/volatile"))
        numbers = [value for value in volatile if value is not None]
        uncorrectable = sum(numbers) if numbers and len(numbers) == len(volatile) else None
        pending = any((gpu.findtext(path) or "").strip() == "Yes" for path in _WAITING)
        ever = [*_counts(gpu.find("ecc_errors/aggregate")), *(_number(gpu.findtext(path)) for path in _EVER)]
        states[pci] = GpuMemoryState(pci=pci, uncorrectable=uncorrectable, pending=pending,
                                     history=any(value for value in ever))
    return states


def _counts(block: Optional[Element]) -> list[Optional[int]]:
    """The uncorrectable counters of an ECC block (volatile or aggregate), each a number or None (N/A)."""
    if block is None:
        return []
    found = [_number(child.text) for child in block if _UNCORRECTABLE.fullmatch(child.tag)]
    double_bit = block.find("double_bit/total")
    if double_bit is not None:
        found.append(_number(double_bit.text))
    return found


def _number(text: Optional[str]) -> Optional[int]:
    value = (text or "").strip()
    return int(value) if value.isdigit() else None
