"""Text for a terminal: control characters from outside input are shown, never obeyed.

A job name, an application's log line or a file name reaches ``show``, ``query``, ``nodes`` and
``diagnose`` output; an ESC in it (``\\x1b[2J``, ``\\x1b]0;title\\x07``) would repaint the reader's
terminal, a ``\\r`` overwrite the line it is on, a newline forge a line of the verdict. Every C0 and C1
control character, DEL, and the Unicode line separators and bidirectional controls (which reorder
what is shown, CVE-2021-42574) become a visible escape such as ``\\x1b``; an escape sequence is then
plain text. JSON output needs none of this: JSON escapes C0 itself, and its bytes are canonical.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def for_terminal(text: str, keep: str = "") -> str:
    """``text`` with every control character but those in ``keep`` (e.g. ``"\\n"`` for a block of lines)
    written as a visible escape."""
    if not _UNSAFE.search(text):
        return text
    return _UNSAFE.sub(lambda m: m.group(0) if m.group(0) in keep else _shown(m), text)
