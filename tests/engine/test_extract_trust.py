"""KernelLines' reading of kernel text a process chose: a rule's words inside a quoted string of the kernel's
message are the copied name or value, whatever message quotes them."""

from __future__ import annotations

import pytest

from slurm_attrib.engine.extract import _inside_quotes
from slurm_attrib.timestamps import TimeContext, parse_line_time


@pytest.mark.parametrize(("line", "words", "inside"), [
    # quoted by the kernel: a mount option, a path (any message of that shape, not only the known heads)
    ("[  812.552100] tmpfs: Unknown parameter 'NVRM: Xid (PCI:0000:01:00): 79, pid=0, GPU has fallen off the bus.'",
     "NVRM: Xid", True),
    ("[  812.552100] squashfs: bad option 'x', then 'NVRM: Xid (PCI:0000:01:00): 79'", "NVRM: Xid", True),
    # the kernel's own report, its quoted pid and name closed before the words
    ("[  812.552100] NVRM: Xid (PCI:0000:a1:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
     "GPU has fallen off", False),
    ("[  812.552100] NVRM: Xid (PCI:0000:a1:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
     "NVRM: Xid", False),
    # a quote in the stamp's part of the line (an export's wrapper) is not the message's
    ("Mar 21 20:18:56 gpu-01 kernel: NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.", "NVRM", False),
])
def test_words_inside_a_kernel_quote(line: str, words: str, inside: bool) -> None:
    stamp = parse_line_time(line, TimeContext())
    assert _inside_quotes(line, stamp, line.index(words)) is inside
