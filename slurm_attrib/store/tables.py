"""Rows as a table, JSON or CSV: the shared output options of every read command."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from .. import canonical
from ..termsafe import for_terminal

FORMATS = ("table", "json", "csv")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def format_rows(rows: Sequence[dict[str, Any]], columns: Sequence[str], fmt: str) -> str:
    """``rows`` restricted to ``columns`` in ``fmt`` (table | json | csv); an empty table says so. Table
    cells show control characters as escapes; JSON and CSV keep the data as it is (both quote it)."""
    if fmt == "json":
        return canonical.dumps([{c: r.get(c) for c in columns} for r in rows])
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([[_cell(r.get(c)) for c in columns] for r in rows])
        return buffer.getvalue()
    if not rows:
        return "(no rows)\n"
    cells = [[for_terminal(_cell(r.get(c))) for c in columns] for r in rows]  # a table cell is one line
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells]
    return "\n".join(lines) + "\n"
