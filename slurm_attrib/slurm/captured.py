"""Captured ``sacct --parsable2`` output standing in for Slurm (gather, then judge): the store's sweep
reads files with ``--sacct-file`` instead of running sacct. Parsed by the layer's parser; the backfill
query's state filter and window apply as they would to the live query."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime, timezone, tzinfo
from pathlib import Path
from typing import Optional, Union

from .cli_backend import FAILED_JOB_FIELDS
from .errors import SlurmError
from .parse import parse_sacct_capture
from .records import AcctRecord
from .states import FAILED_STATES


class CapturedSacct:
    """``failed_jobs`` from captured files: a header line names the columns (any sacct field list);
    without one, the columns are :data:`FAILED_JOB_FIELDS`. ``cluster`` names the jobs of output without
    a Cluster column; ``tz`` is the zone sacct printed times in."""

    name = "captured"

    def __init__(self, paths: Iterable[Union[str, Path]], cluster: str = "",
                 tz: Optional[tzinfo] = timezone.utc) -> None:
        self.paths, self.cluster, self.tz = [Path(p) for p in paths], cluster, tz

    def records(self) -> list[AcctRecord]:
        """Every allocation (no steps) in the files, in order."""
        out: list[AcctRecord] = []
        for path in self.paths:
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError as exc:
                raise SlurmError(f"{path}: cannot read sacct output: {exc}") from exc
            out.extend(replace(r, cluster=r.cluster or self.cluster)
                       for r in parse_sacct_capture(text, FAILED_JOB_FIELDS, self.tz) if r.job_id and not r.is_step)
        return out

    def failed_jobs(self, since: datetime, until: datetime) -> list[AcctRecord]:
        return [r for r in self.records() if r.state in FAILED_STATES and r.ended_in(since, until)]
