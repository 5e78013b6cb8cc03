"""A progress bar for long store operations (replay, sweep): on a terminal only, silent otherwise."""

from __future__ import annotations

import sys
from typing import Callable, Optional, TextIO

ProgressCallback = Callable[[int, int], None]
WIDTH = 30


class ProgressBar:
    """``bar(done, total)`` redraws one stderr line when the stream is a TTY; does nothing otherwise."""

    def __init__(self, label: str, stream: Optional[TextIO] = None, enabled: Optional[bool] = None) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self._drawn = False

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total <= 0:
            return
        filled = WIDTH * done // total
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (WIDTH - filled)}] {done}/{total}")
        self.stream.flush()
        self._drawn = True

    def finish(self) -> None:
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False
