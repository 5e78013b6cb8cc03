"""Node facts the engine needs to read a node's logs: boot time, zone, driver, kernel, hostname.

The boot time resolves ``dmesg`` uptime stamps; the zone resolves yearless syslog stamps; the
driver version selects the XID 144-150 decode branch. Read from ``/proc`` and ``/etc`` under an
injectable root, so tests use a fake tree instead of the machine they run on.
"""

from __future__ import annotations

import os
import re
import socket
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

from .base import BundleWriter, Limits, SourceCoverage, Window, Workload

__all__ = ["NodeFactsSource", "driver_from_proc"]

_DRIVER = re.compile(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+(?:\.\d+)+)")


def driver_from_proc(text: str) -> Optional[str]:
    """The version in /proc/driver/nvidia/version ('NVRM version: NVIDIA UNIX x86_64 Kernel Module
    535.54.03  Tue Jun  6 22:20:39 UTC 2023')."""
    m = _DRIVER.search(text)
    return m.group(1) if m else None


class NodeFactsSource:
    """Reads the facts; a value that cannot be read is left out and named in ``problems``.

    As a source it writes no file: its facts go into the coverage, and the collector writes
    facts/NODE.yaml once the GPU sources have added theirs.
    """

    name = "node_facts"

    def __init__(self, root: str = "/", hostname: Optional[str] = None) -> None:
        self.root = Path(root)
        self._hostname = hostname

    def collect(self, workload: Workload, window: Window, bundle: BundleWriter, limits: Limits) -> SourceCoverage:
        began = time.monotonic()
        facts, problems = self.gather()
        state = "error" if problems and not facts else "ok"
        return SourceCoverage(self.name, state, "; ".join(problems), seconds=time.monotonic() - began,
                              notes=tuple(problems), facts=facts)

    def _read(self, rel: str, limit: int = 65536) -> Optional[str]:
        try:
            with open(self.root / rel, "rb") as handle:
                return handle.read(limit).decode("utf-8", "replace")
        except OSError:
            return None

    def gather(self) -> tuple[dict[str, Any], list[str]]:
        facts: dict[str, Any] = {}
        problems: list[str] = []
        facts["hostname"] = self._hostname or self._read_stripped("proc/sys/kernel/hostname") or socket.gethostname()
        kernel = self._read_stripped("proc/sys/kernel/osrelease")
        if kernel:
            facts["kernel"] = kernel
        boot = self.boot_time()
        if boot is None:
            problems.append("boot time: /proc/stat has no btime")
        else:
            facts["boot_time"] = boot.strftime("%Y-%m-%dT%H:%M:%SZ")
        facts["timezone"] = self.timezone(problems)
        driver = driver_from_proc(self._read("proc/driver/nvidia/version") or "")
        if driver:
            facts["driver_version"] = driver
        return facts, problems

    def _read_stripped(self, rel: str) -> Optional[str]:
        text = self._read(rel)
        return text.strip() if text and text.strip() else None

    def boot_time(self) -> Optional[datetime]:
        for line in (self._read("proc/stat", 1 << 20) or "").splitlines():
            if line.startswith("btime "):
                try:
                    return datetime.fromtimestamp(int(line.split()[1]), tz=timezone.utc)
                except (IndexError, ValueError, OverflowError):
                    return None
        return None

    def timezone(self, problems: list[str]) -> str:
        """The IANA name of the local zone (/etc/localtime's target, else /etc/timezone), else UTC."""
        try:
            target = os.readlink(self.root / "etc/localtime")
            if "zoneinfo/" in target:
                return target.split("zoneinfo/", 1)[1]
        except OSError:
            pass
        name = self._read_stripped("etc/timezone")
        if name and re.fullmatch(r"[A-Za-z0-9_+\-/]+", name):
            return name
        problems.append("timezone: not found in /etc/localtime or /etc/timezone; UTC assumed")
        return "UTC"
