"""Where a ``watch`` verdict goes besides stdout (which the command prints itself).

- ``store``: the SQLite store (``store.path``), with the bundle, as the finalizer records it; a store
  that stays locked spools the verdict (``spool.dir``/verdicts) like the finalizer does.
- ``annotate``: the discovery's own place (a Slurm job's AdminComment, a Kueue Workload's
  ``slurm-attrib.io/verdict`` annotation), in the AdminComment's short form.
- ``service``: the bundle POSTed to a slurm-attrib service (``watch.service_url``,
  ``/v1/diagnoses?store=true``) with the write token of ``watch.service_token_file``.

A sink returns one line saying what it did ("" when it had nothing to do); it raises on failure and the
orchestrator turns that into a line, so one sink's failure never keeps the verdict from the others.
"""

from __future__ import annotations

import io
import tarfile
from datetime import datetime
from pathlib import Path
from typing import Any, Optional, Protocol

from ..attribution import VerdictStore
from ..config import HttpConfig
from ..finalizer.comment import verdict_segment
from ..store.rows import verdict_id
from . import Discovery, Found

__all__ = ["AnnotateSink", "ServiceSink", "Sink", "StoreSink", "pack_tar"]


class Sink(Protocol):
    @property
    def name(self) -> str: ...

    def deliver(self, found: Found, diagnosis: dict[str, Any], bundle: Path, verdict_time: datetime,
                discovery: Discovery) -> str: ...


class StoreSink:
    name = "store"

    def __init__(self, store: VerdictStore) -> None:
        self.store = store

    def deliver(self, found: Found, diagnosis: dict[str, Any], bundle: Path, verdict_time: datetime,
                discovery: Discovery) -> str:
        stored = self.store.record(diagnosis, bundle, verdict_time)
        if stored.where == "store":
            return f"store: recorded as {stored.verdict_id}"
        if stored.where:
            return f"store: {stored.reason}; spooled to {stored.where}"
        return f"store: not recorded ({stored.reason})"


class AnnotateSink:
    name = "annotate"

    def deliver(self, found: Found, diagnosis: dict[str, Any], bundle: Path, verdict_time: datetime,
                discovery: Discovery) -> str:
        done = discovery.annotate(found, verdict_segment(diagnosis, verdict_id(diagnosis)))
        return f"annotate: {done}" if done else ""


class ServiceSink:
    """POSTs the bundle; the service diagnoses it again with its own rules and records that verdict."""

    name = "service"

    def __init__(self, settings: HttpConfig, client: Optional[Any] = None) -> None:
        from ..connectors.http import HttpClient

        self.client = client or HttpClient(settings)

    def deliver(self, found: Found, diagnosis: dict[str, Any], bundle: Path, verdict_time: datetime,
                discovery: Discovery) -> str:
        answer = self.client.request("POST", "/v1/diagnoses", params={"store": "true"}, data=pack_tar(bundle),
                                     headers={"Content-Type": "application/gzip"})
        remote = answer.json()
        status = remote.get("status") if isinstance(remote, dict) else None
        return f"service: recorded ({status})"


def pack_tar(root: Path) -> bytes:
    """The bundle as a tar.gz of regular files and folders, in sorted order, with fixed owners and times
    (the same bundle gives the same bytes)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=6) as tar:
        for path in sorted(root.rglob("*")):
            if path.is_symlink() or not (path.is_file() or path.is_dir()):
                continue
            info = tar.gettarinfo(str(path), arcname=path.relative_to(root).as_posix())
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            if path.is_file():
                with path.open("rb") as handle:
                    tar.addfile(info, handle)
            else:
                tar.addfile(info)
    return buffer.getvalue()
