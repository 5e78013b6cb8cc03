"""Parser cases: real captured Slurm 22.05 output (``data/<case>.txt``) and what it must parse into
(``data/<case>.expected.json``). ``sacct-envdump-*`` come from ../shared/research/slurm-minicluster/
env-dumps (sacct -P with a header); ``sacct-failedjobs-*`` re-project captured rows into the failed-jobs
query's columns; the others were captured from the test cluster (tests/integration)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable
from zoneinfo import ZoneInfo

from slurm_attrib.slurm import parse
from slurm_attrib.slurm.cli_backend import FAILED_JOB_FIELDS


def sacct_reply(capture: str, columns: list[str]) -> Callable[[tuple[str, ...]], str]:
    """What sacct would print for an argv, from a ``|``-split capture with ``columns``: the argv's
    ``--format`` columns in its order, joined with its ``--delimiter`` (default ``|``)."""
    def reply(argv: tuple[str, ...]) -> str:
        opts = dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)
        wanted, delimiter = opts["format"].split(","), opts.get("delimiter", "|")
        rows = parse.parse_parsable(capture, columns)
        return "".join(delimiter.join(row.get(c, "") for c in wanted) + "\n" for row in rows)
    return reply

DATA = Path(__file__).resolve().parent / "data"
TZ = ZoneInfo("UTC")  # the capture host's zone
# The columns the sacct-fields-* captures were taken with (SACCT_FIELDS before the user-controlled
# columns moved last).
CAPTURED_SACCT_FIELDS = ["jobid", "jobidraw", "state", "exitcode", "derivedexitcode", "nodelist", "user", "uid",
                         "partition", "cluster", "jobname", "start", "end", "workdir", "admincomment"]


def _dicts(items: list[Any]) -> list[dict[str, Any]]:
    return [i.to_dict() for i in items]


PARSERS: dict[str, Callable[[str], Any]] = {
    "sacct-envdump": lambda text: _dicts(parse.parse_sacct(text, tz=TZ)),
    "sacct-fields": lambda text: _dicts(parse.parse_sacct(text, CAPTURED_SACCT_FIELDS, tz=TZ)),
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
