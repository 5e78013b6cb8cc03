"""The receiving end of the epilog's HTTP spool: a node bundle POSTed as a tar.gz is unpacked safely
next to where it belongs and renamed into ``<spool>/nodes/<job key>/<node>/`` by the same atomic
publish the directory spool uses, so the finalizer sees it whole or not at all. A retry of the same
node replaces the earlier bundle (the same epilog ran again): the request is idempotent."""

from __future__ import annotations

import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ..connectors.spool import DIR_MODE, NodeBundle, publish, safe_name
from .tarsafe import ArchiveRefused, Limits, extract

_PUBLISH = threading.Lock()  # publish() names its side directories by pid: one rename dance at a time


@dataclass(frozen=True)
class Received:
    job_key: str
    node: str
    files: int
    replaced: bool

    def to_dict(self) -> dict[str, object]:
        return {"job_key": self.job_key, "node": self.node, "files": self.files, "replaced": self.replaced}


def checked_name(text: str, what: str) -> str:
    """``text`` when it is already a safe path component (what :func:`safe_name` leaves unchanged, not
    hidden); ArchiveRefused otherwise: the sender's name is never rewritten into someone else's."""
    if not text or text != safe_name(text) or text.startswith("."):
        raise ArchiveRefused(f"invalid {what} {text!r}: letters, digits, '.', '_' and '-' only")
    return text


def receive(spool: Path, key: str, node: str, body: IO[bytes], size: int, limits: Limits) -> Received:
    """Unpack ``body`` (a tar.gz of ``size`` bytes) and publish it as ``node``'s bundle of job ``key``."""
    key, node = checked_name(key, "job key"), checked_name(node, "node")
    parent = spool / "nodes" / key
    parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".tmp-{node}-http", dir=parent))
    try:
        files = extract(body, size, staging, limits)
        with _PUBLISH:
            replaced = (parent / node).exists()
            publish(NodeBundle(staging), parent, node)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Received(key, node, files, replaced)
