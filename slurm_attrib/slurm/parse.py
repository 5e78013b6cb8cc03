"""Pure parsers of Slurm's text output (gather, then judge: the commands run elsewhere).

Times without a zone (sacct, scontrol and sacctmgr print the controller's local time) are read in
``tz`` (default: this host's zone) and returned in UTC.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone, tzinfo
from typing import NamedTuple, Optional

from . import hostlist, jobrecord
from .errors import SlurmParseError
from .records import AcctRecord, ControllerJob, NodeEvent, NodeInfo
from .states import normalise

_UNSET = ("", "Unknown", "None", "N/A", "(null)")
_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/.-]*)=")


def parse_time(text: str, tz: Optional[tzinfo] = None) -> Optional[datetime]:
    """'2026-12-02T15:30:01' (local) → aware UTC datetime; Unknown/None → None."""
    text = (text or "").strip()
    if text in _UNSET:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        return None
    value = value.replace(tzinfo=tz) if value.tzinfo is None and tz is not None else value
    return (value if value.tzinfo else value.astimezone()).astimezone(timezone.utc)


def _int(text: str) -> Optional[int]:
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


class ParsableRow(NamedTuple):
    """One data line of ``--parsable2`` output: where it is, what it says, and its cells by column."""

    number: int  # 1-based line number in the text
    line: str
    cells: dict[str, str]  # lower-case column name → cell
    missing: int  # columns the line does not reach (a cut line)


def parsable_rows(lines: Iterable[str], fields: Optional[list[str]] = None) -> Iterator[ParsableRow]:
    """The data rows of ``--parsable2`` output; blank lines, ``#`` comments and ``$ `` command lines
    (in captures) are skipped. Without ``fields`` the first other line is the header. Extra cells (a
    ``|`` inside the last field) are joined back into the last column; a short line keeps the columns
    it reaches and says how many it misses, so each reader decides whether that is an error."""
    columns = [f.lower() for f in fields] if fields is not None else None
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.startswith(("#", "$ ")):
            continue
        cells = line.split("|")
        if columns is None:
            columns = [c.strip().lower() for c in cells]
            continue
        if len(cells) > len(columns):
            cells = [*cells[: len(columns) - 1], "|".join(cells[len(columns) - 1:])]
        yield ParsableRow(number, line, dict(zip(columns, cells)), max(len(columns) - len(cells), 0))


def parse_parsable(text: str, fields: Optional[list[str]] = None) -> list[dict[str, str]]:
    """Rows of ``--parsable2`` output (see :func:`parsable_rows`); a short line is an error."""
    rows = []
    for row in parsable_rows(text.splitlines(), fields):
        if row.missing:
            raise SlurmParseError(f"expected {len(row.cells) + row.missing} fields, got {len(row.cells)}: "
                                  f"{row.line[:200]!r}")
        rows.append(row.cells)
    return rows


def acct_record(row: dict[str, str], tz: Optional[tzinfo] = None) -> AcctRecord:
    """One sacct row (keys are lower-case field names) → AcctRecord."""
    node_list = row.get("nodelist", "")
    return AcctRecord(
        job_id=row.get("jobid", ""), job_id_raw=row.get("jobidraw", "") or row.get("jobid", ""),
        state=normalise(row.get("state", "")), state_text=row.get("state", ""),
        exit_code=row.get("exitcode", ""), derived_exit_code=row.get("derivedexitcode", ""),
        node_list=node_list, nodes=tuple(hostlist.expand(node_list)), user=row.get("user", ""),
        uid=_int(row.get("uid", "")), partition=row.get("partition", ""), cluster=row.get("cluster", ""),
        job_name=row.get("jobname", ""), start=parse_time(row.get("start", ""), tz),
        end=parse_time(row.get("end", ""), tz), admin_comment=row.get("admincomment", ""),
        comment=row.get("comment", ""), work_dir=row.get("workdir", ""),
    )


def parse_sacct(text: str, fields: Optional[list[str]] = None, tz: Optional[tzinfo] = None) -> list[AcctRecord]:
    return [acct_record(row, tz) for row in parse_parsable(text, fields)]


def parse_sacct_delimited(text: str, fields: list[str], delimiter: str,
                          tz: Optional[tzinfo] = None) -> tuple[list[AcctRecord], list[str]]:
    """``sacct --parsable2 --noheader --delimiter=<delimiter>`` output, where ``delimiter`` is a random
    string chosen for this call, which no job's text can contain. A row has exactly ``len(fields)``
    cells; a newline in a cell (a job name) makes its line short, and the lines after it are joined to
    it until the row is whole. A row that cannot be made whole or read is left out, with a note:
    never an error, which would only repeat on every retry of the same output. → (records, notes)"""
    records: list[AcctRecord] = []
    notes: list[str] = []
    for row in _delimited_rows(text, len(fields), delimiter, notes):
        try:
            records.append(acct_record(dict(zip(fields, row)), tz))
        except SlurmParseError as exc:
            notes.append(f"row {row[0][:40]!r} left out: {exc}")
    return records, notes


def _delimited_rows(text: str, width: int, delimiter: str, notes: list[str]) -> Iterator[list[str]]:
    pending: Optional[str] = None
    for line in text.split("\n"):
        if pending is None and not line.strip():
            continue
        pending = line if pending is None else f"{pending}\n{line}"
        cells = pending.split(delimiter)
        if len(cells) == width:
            yield cells
        elif len(cells) > width:
            notes.append(f"row {pending[:80]!r} left out: {len(cells)} cells, expected {width}")
        else:
            continue
        pending = None
    if pending is not None:
        notes.append(f"row {pending[:80]!r} left out: cut short ({len(pending.split(delimiter))} of {width} cells)")


def parse_sacct_capture(text: str, fields: list[str], tz: Optional[tzinfo] = None) -> list[AcctRecord]:
    """Captured ``sacct --parsable2`` output (``#`` comments and ``$ `` command lines are skipped): a
    header line (first column ``JobID``) names the columns; without one (``--noheader``), ``fields``."""
    first = next((ln for ln in text.splitlines() if ln.strip() and not ln.startswith(("#", "$ "))), "")
    has_header = first.split("|", 1)[0].strip().lower() == "jobid"
    return parse_sacct(text, None if has_header else fields, tz)


def parse_key_values(line: str) -> dict[str, str]:
    """``Key=Value Key2=Value with spaces`` (scontrol -o) → dict. A value runs to the next `` Key=``."""
    out: dict[str, str] = {}
    matches = list(_KEY.finditer(line))
    for m, nxt in zip(matches, [*matches[1:], None]):
        out[m.group(1)] = line[m.end(): nxt.start() if nxt else len(line)].strip()
    return out


def _name_id(text: str) -> tuple[str, Optional[int]]:
    """'alice(1001)' → ('alice', 1001)."""
    m = re.match(r"^(.*?)\((\d+)\)$", text.strip())
    return (m.group(1), int(m.group(2))) if m else (text.strip(), None)


def parse_scontrol_job(text: str, tz: Optional[tzinfo] = None) -> list[ControllerJob]:
    """``scontrol show job -o`` output → ControllerJob records, read by :mod:`.jobrecord` so that a job
    name or path holding `` JobState=...`` cannot set a field; :class:`SlurmParseError` when a record
    cannot be read with certainty (the caller then goes without the controller's record)."""
    return [_controller_job(jobrecord.read_record(record), tz) for record in jobrecord.split_records(text)]


def _controller_job(f: dict[str, str], tz: Optional[tzinfo]) -> ControllerJob:
    user, uid = _name_id(f.get("UserId", ""))
    node_list = f.get("NodeList", "")
    return ControllerJob(
        job_id=f.get("JobId", ""), state=normalise(f.get("JobState", "")), reason=f.get("Reason", ""),
        exit_code=f.get("ExitCode", ""), derived_exit_code=f.get("DerivedExitCode", ""), user=user,
        uid=uid, partition=f.get("Partition", ""), node_list=node_list,
        nodes=tuple(hostlist.expand(node_list)), restart_count=_int(f.get("Restarts", "")) or 0,
        start=parse_time(f.get("StartTime", ""), tz), end=parse_time(f.get("EndTime", ""), tz),
        std_out=f.get("StdOut", ""), std_err=f.get("StdErr", ""), work_dir=f.get("WorkDir", ""),
        job_name=f.get("JobName", ""), array_job_id=f.get("ArrayJobId", ""),
        array_task_id=f.get("ArrayTaskId", ""), admin_comment=f.get("AdminComment", ""), fields=f,
    )


def parse_scontrol_node(text: str) -> list[NodeInfo]:
    """``scontrol show node -o`` → NodeInfo records."""
    nodes = []
    for line in text.splitlines():
        if not line.strip().startswith("NodeName="):
            continue
        f = parse_key_values(line.strip())
        partitions = tuple(p for p in f.get("Partitions", "").split(",") if p)
        reason = re.sub(r"\s*\[[^\]]*@[^\]]*\]$", "", f.get("Reason", ""))  # drop ' [root@2026-...]'
        nodes.append(NodeInfo(name=f.get("NodeName", ""), state=f.get("State", ""), reason=reason,
                              partitions=partitions))
    return nodes


def parse_partition_nodes(text: str) -> list[str]:
    """``scontrol show partition -o NAME`` → the partition's nodes."""
    for line in text.splitlines():
        if line.strip().startswith("PartitionName="):
            return hostlist.expand(parse_key_values(line.strip()).get("Nodes", ""))
    return []


EVENT_FIELDS = ["nodename", "timestart", "timeend", "state", "reason"]


def parse_events(text: str, tz: Optional[tzinfo] = None) -> list[NodeEvent]:
    """``sacctmgr -n -P list event ... format=NodeName,TimeStart,TimeEnd,State,Reason``."""
    return [NodeEvent(node=r["nodename"], start=parse_time(r["timestart"], tz), end=parse_time(r["timeend"], tz),
                      state=r["state"], reason=r["reason"])
            for r in parse_parsable(text, EVENT_FIELDS) if r["nodename"]]
