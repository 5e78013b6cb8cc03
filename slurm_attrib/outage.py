"""One WARNING per outage, not one per attempt: a dependency (the store, Slurm) that fails is reported
when it starts failing and when it is back, and probed again only after a growing pause.

During an outage of the store the finalizer spools each verdict at once instead of waiting out the
lock for every one (7 x busy_timeout, 214 s, per verdict before), and the log says so once.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Optional


@dataclass
class Outage:
    """The state of one dependency; ``clock`` is monotonic seconds."""

    name: str
    log: logging.Logger
    first_pause_s: float = 5.0
    max_pause_s: float = 300.0
    clock: Callable[[], float] = time.monotonic
    since: Optional[float] = None
    failures: int = 0
    next_probe: float = 0.0
    _pause: float = field(default=0.0, repr=False)

    @property
    def down(self) -> bool:
        return self.since is not None

    def should_try(self) -> bool:
        """Up, or down and its next probe is due."""
        return self.since is None or self.clock() >= self.next_probe

    def failed(self, reason: str, consequence: str = "") -> None:
        """Record a failure; only the first of an outage is a WARNING."""
        now = self.clock()
        self.failures += 1
        if self.since is None:
            self.since, self._pause = now, self.first_pause_s
            self.log.warning("%s unavailable: %s%s", self.name, reason, f"; {consequence}" if consequence else "")
        else:
            self._pause = min(self._pause * 2, self.max_pause_s)
            self.log.debug("%s still unavailable: %s", self.name, reason)
        self.next_probe = now + self._pause

    def recovered(self) -> None:
        """Record a success; ends an outage with one INFO line."""
        if self.since is not None:
            self.log.info("%s available again after %.0f s (%d failed attempt(s))", self.name,
                          self.clock() - self.since, self.failures)
        self.since, self.failures, self.next_probe = None, 0, 0.0
