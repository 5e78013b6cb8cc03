"""Parser cases: real captured Slurm 22.05 output (``data/<case>.txt``) and what it must parse into
(``data/<case>.expected.json``). ``sacct-envdump-*`` come from ../shared/research/slurm-minicluster/
env-dumps (sacct -P with a header); ``sacct-failedjobs-*`` re-project captured rows into the failed-jobs
query's columns; the others were captured from the test cluster (tests/integration)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable
from zoneinfo import ZoneInfo

from slurm_attrib.slurm import parse
from slurm_attrib.slurm.cli_backend import FAILED_JOB_FIELDS, SACCT_FIELDS

DATA = Path(__file__).resolve().parent / "data"
TZ = ZoneInfo("UTC")  # the capture host's zone


def _dicts(items: list[Any]) -> list[dict[str, Any]]:
    return [i.to_dict() for i in items]


PARSERS: dict[str, Callable[[str], Any]] = {
    "sacct-envdump": lambda text: _dicts(parse.parse_sacct(text, tz=TZ)),
    "sacct-fields": lambda text: _dicts(parse.parse_sacct(text, SACCT_FIELDS, tz=TZ)),
    "sacct-failedjobs": lambda text: _dicts(parse.parse_sacct_capture(text, FAILED_JOB_FIELDS, tz=TZ)),
    "scontrol-job": lambda text: _dicts(parse.parse_scontrol_job(text, tz=TZ)),
    "scontrol-node": lambda text: _dicts(parse.parse_scontrol_node(text)),
    "scontrol-partition": lambda text: parse.parse_partition_nodes(text),
    "sacctmgr-events": lambda text: _dicts(parse.parse_events(text, tz=TZ)),
}


def parser_for(case: str) -> Callable[[str], Any]:
    for prefix, func in PARSERS.items():
        if case.startswith(prefix):
            return func
    raise KeyError(case)


def cases() -> list[str]:
    return sorted(p.stem for p in DATA.glob("*.txt") if any(p.stem.startswith(k) for k in PARSERS))
