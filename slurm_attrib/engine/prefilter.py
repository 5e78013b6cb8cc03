"""Choosing the multi-pattern prefilter: Hyperscan when it imports, else one ``re`` alternation.

Both report positions of literal anchors; the detailed per-rule regexes run only on hit lines, so
the choice changes speed, never results. ``SLURM_ATTRIB_PREFILTER=re`` forces the fallback.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

from ..scan import Prefilter, RegexPrefilter


class HyperscanPrefilter:
    """Literal anchors compiled into one Hyperscan block database."""

    def __init__(self, hs: Any, anchors: Sequence[bytes]) -> None:
        self._anchors = sorted(set(anchors))
        self._db = hs.Database(mode=hs.HS_MODE_BLOCK)
        self._db.compile(expressions=[_literal(a) for a in self._anchors],
                         ids=list(range(len(self._anchors))),
                         flags=[0] * len(self._anchors))
        self._scratch = hs.Scratch(self._db)

    def positions(self, data: bytes, start: int, end: int) -> Iterator[int]:
        found: list[int] = []

        def on_match(_id: int, _from: int, to: int, _flags: int, _ctx: object) -> None:
            found.append(start + to - len(self._anchors[_id]))

        self._db.scan(data[start:end], match_event_handler=on_match, scratch=self._scratch)
        found.sort()
        yield from found


def _literal(anchor: bytes) -> bytes:
    return b"".join(b"\\x%02x" % c for c in anchor)


def build(anchors: Sequence[bytes]) -> Prefilter:
    """The fastest prefilter available here for these anchors."""
    if os.environ.get("SLURM_ATTRIB_PREFILTER", "") != "re" and anchors:
        try:
            import hyperscan
        except ImportError:
            pass
        else:
            return HyperscanPrefilter(hyperscan, anchors)
    return RegexPrefilter(anchors)
