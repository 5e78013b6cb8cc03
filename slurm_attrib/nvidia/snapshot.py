"""What an ``nvidia-smi -q -x`` snapshot (metrics/NODE.xml, taken by the node epilog after the job) says about
each GPU's memory: whether it counted uncorrectable ECC errors since the driver loaded, and whether a row remap or
page retirement waits or failed. Read by the tags of each GPU's own block, above its <processes>, where every
process is listed under the name it gives itself (any user's text); a value counts only as a whole element."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from .parse import normalise_pci

_GPU = re.compile(r'<gpu id="(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])">')
_VOLATILE = re.compile(r"<ecc_errors>\s*<volatile>(?P<body>.*?)</volatile>", re.S)
# A100 and later: <sram_uncorrectable_parity>, <sram_uncorrectable_secded>, <dram_uncorrectable> (older drivers:
# <sram_uncorrectable>); before: <double_bit> ... <total>N</total></double_bit>
_UNCORRECTABLE = re.compile(r"<(?:dram|sram)_uncorrectable\w*>(?P<value>[^<]{1,20})</")
_DOUBLE_BIT_TOTAL = re.compile(r"<double_bit>.*?<total>(?P<value>[^<]{1,20})</total>", re.S)
_PENDING = re.compile(r"<(?:remapped_row_pending|remapped_row_failure|pending_retirement|pending_blacklist)>Yes<")


@dataclass(frozen=True)
class GpuMemoryState:
    """One GPU's memory as the snapshot shows it. ``uncorrectable``: the sum of its volatile uncorrectable ECC
    counters, None where it shows none as a number (ECC off, N/A, a block cut off); ``pending``: a remap or
    retirement waits or failed."""

    pci: str
    uncorrectable: Optional[int]
    pending: bool

    @property
    def clean(self) -> bool:
        """Counted no uncorrectable error and has no remap waiting: its memory failed nothing since the driver
        loaded, as far as the snapshot can say."""
        return self.uncorrectable == 0 and not self.pending


def gpu_memory_states(text: str) -> dict[str, GpuMemoryState]:
    """Each GPU's :class:`GpuMemoryState`, by its normalised PCI address (``0000:2a:00``)."""
    states: dict[str, GpuMemoryState] = {}
    starts = list(_GPU.finditer(text))
    for index, opened in enumerate(starts):
        end = starts[index + 1].start() if index + 1 < len(starts) else len(text)
        block = text[opened.end():end]
        block = block[:block.find("<processes>")] if "<processes>" in block else block
        volatile = _VOLATILE.search(block)
        values = [found["value"].strip() for found in (
            [*_UNCORRECTABLE.finditer(volatile["body"]), *_DOUBLE_BIT_TOTAL.finditer(volatile["body"])]
            if volatile else [])]
        numbers = [int(value) for value in values if value.isdigit()]
        uncorrectable = sum(numbers) if numbers and len(numbers) == len(values) else None
        pci = normalise_pci(opened["pci"])  # the first block of a GPU is nvidia-smi's (a later one, a name's text)
        pending = bool(_PENDING.search(block))
        states.setdefault(pci, GpuMemoryState(pci=pci, uncorrectable=uncorrectable, pending=pending))
    return states
