"""Kernel logs and job output kept by Loki: LogQL ``query_range``, paged forward through the window.

Per node, the kernel streams (``loki.kernel_selector`` with ``host_label="NODE"`` added) become
``syslog/NODE.log``; the job's output streams (``loki.app_selector`` with ``job_label="JOBID"``
added, or the job's nodes' host matcher when there is no job label) become ``applog/NODE.log`` for
a stream whose host label is one of the job's nodes, else ``applog/loki.log``. Every line keeps
Loki's nanosecond stamp in front (RFC 3339, UTC), so the engine times it even when the program's
own line has no time. A kernel line that carries its own syslog header (promtail reading kern.log)
keeps its host and program tag behind Loki's stamp, so a line ``logger`` wrote under another tag is
still refused as the kernel's word; nothing shipped counts as written by the kernel (origin
``shipped``: it may explain a verdict, never drain a node).

Paging: Loki answers at most ``limit`` entries per query, the earliest first with
``direction=forward``. The next page starts at the last stamp seen (``start`` is inclusive), and
entries of that stamp already seen are dropped by (stream, stamp, line), so nothing is lost or
doubled at a page boundary. A page that brings nothing new at the same stamp stops the paging
with a note (more entries share one nanosecond than one page holds).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Optional

from ..config import LokiConfig
from ..timestamps import SYSLOG_FORMATS, TimeContext, parse_line_time
from .base import BundleWriter, Limits, SourceCoverage, Window, Workload
from .http import HttpClient, HttpFailure

__all__ = ["LokiSource", "add_matcher", "label_value"]

QUERY_PATH = "/loki/api/v1/query_range"
_NS = 1_000_000_000


def label_value(value: str) -> str:
    """``value`` as a LogQL double-quoted string (Go escapes: backslash, quote, newline)."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def add_matcher(selector: str, matcher: str) -> str:
    """``{job="kernel"} |= "x"`` with ``host="n1"`` added inside its braces. The selector's first
    ``}`` outside a quoted string closes the stream selector; a selector without braces is an error."""
    text = selector.strip()
    if not text.startswith("{"):
        raise ValueError(f"{selector!r}: a LogQL stream selector starts with {{")
    quote = ""
    i = 1
    while i < len(text):
        char = text[i]
        if quote:
            if char == "\\":
                i += 1
            elif char == quote:
                quote = ""
        elif char in "\"`":
            quote = char
        elif char == "}":
            inner = text[1:i].strip()
            return "{" + (f"{inner}, " if inner else "") + matcher + "}" + text[i + 1:]
        i += 1
    raise ValueError(f"{selector!r}: the stream selector is not closed")


@dataclass
class _Query:
    """One LogQL query paged through the window: what it brought, per stream."""

    logql: str
    entries: list[tuple[int, tuple[tuple[str, str], ...], str]] = field(default_factory=list)
    pages: int = 0
    problem: str = ""
    state: str = "ok"
    stopped: str = ""


class LokiSource:
    """The ``loki`` connector. ``client`` is built from the settings unless a test passes one;
    ``clock`` is the monotonic clock the deadline is kept on."""

    name = "loki"

    def __init__(self, settings: LokiConfig, client: Optional[HttpClient] = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self._client = client
        self.clock = clock

    def collect(self, workload: Workload, window: Window, bundle: BundleWriter, limits: Limits) -> SourceCoverage:
        began = self.clock()
        if not self.settings.url:
            return SourceCoverage(self.name, "skipped", "loki.url is not set")
        args = workload.args.get(self.name) or {}
        if not isinstance(args, Mapping):
            return SourceCoverage(self.name, "error", "its inventory arguments are not a mapping")
        try:
            client = self._client or HttpClient(self.settings, clock=self.clock)
            plan = self._plan(workload, args)
        except (ValueError, OSError) as exc:
            return SourceCoverage(self.name, "error", str(exc))
        deadline = began + limits.seconds
        start_ns = _ns(window.since)
        end_ns = _ns(window.until) + 1  # Loki's end is exclusive
        queries: list[tuple[str, str, _Query]] = []
        for kind, target, logql in plan:
            query = _Query(logql)
            queries.append((kind, target, query))
            self._page(client, query, start_ns, end_ns, deadline)
            if query.state == "timeout":
                break
        return self._write(workload, queries, bundle, min(limits.max_bytes, self.settings.max_bytes),
                           self.clock() - began)

    def _plan(self, workload: Workload, args: Mapping[str, Any]) -> list[tuple[str, str, str]]:
        """(kind, node or "", LogQL) in order: the kernel streams of each node, then the job's output
        (unless ``args["app"]`` is false)."""
        host = self.settings.host_label
        kernel = str(args.get("kernel_selector") or self.settings.kernel_selector)
        app = str(args.get("app_selector") or self.settings.app_selector)
        job_label = str(args.get("job_label", self.settings.job_label))
        job_value = str(args.get("job_id") or workload.job_id)
        plan = [("kernel", node, add_matcher(kernel, f"{host}={label_value(node)}"))
                for node in sorted(set(workload.nodes))]
        if args.get("app") is False:  # the caller has the job's output (the finalizer's gap filling)
            return plan
        if job_label:
            plan.append(("app", "", add_matcher(app, f"{job_label}={label_value(job_value)}")))
        elif workload.nodes:
            alternatives = "|".join(_regex_literal(n) for n in sorted(set(workload.nodes)))
            plan.append(("app", "", add_matcher(app, f"{host}=~{label_value(alternatives)}")))
        return plan

    def _page(self, client: HttpClient, query: _Query, start_ns: int, end_ns: int, deadline: float) -> None:
        limit = max(1, self.settings.page_limit)
        seen: set[tuple[int, tuple[tuple[str, str], ...], str]] = set()
        cursor = start_ns
        while query.pages < self.settings.max_pages:
            params = {"query": query.logql, "start": str(cursor), "end": str(end_ns), "limit": str(limit),
                      "direction": "forward"}
            try:
                page = _entries(client.get(QUERY_PATH, params, deadline=deadline).json())
            except HttpFailure as exc:
                query.state, query.problem = exc.state, str(exc)
                return
            except ValueError as exc:
                query.state, query.problem = "error", f"{QUERY_PATH}: {exc}"
                return
            query.pages += 1
            fresh = [e for e in page if e not in seen]
            query.entries.extend(fresh)
            if len(page) < limit:
                return
            last = max(e[0] for e in page)
            if not fresh and last == cursor:
                query.stopped = (f"more than {limit} entries share the stamp {last}; the rest of that "
                                 "nanosecond was not read")
                cursor = last + 1
                seen = set()
                continue
            seen = {e for e in page if e[0] == last} | ({e for e in seen if e[0] == last} if last == cursor else set())
            cursor = last
        if query.pages >= self.settings.max_pages:
            query.stopped = f"stopped after loki.max_pages ({self.settings.max_pages}) pages"

    def _write(self, workload: Workload, queries: list[tuple[str, str, _Query]], bundle: BundleWriter, cap: int,
               seconds: float) -> SourceCoverage:
        nodes = set(workload.nodes)
        files: dict[str, list[tuple[int, tuple[tuple[str, str], ...], int, str]]] = defaultdict(list)
        for kind, target, query in queries:
            for order, (ts, stream, line) in enumerate(query.entries):
                if kind == "kernel":
                    files[f"syslog/{target}.log"].append((ts, stream, order, _kernel_line(ts, target, line)))
                else:
                    host = dict(stream).get(self.settings.host_label, "")
                    rel = f"applog/{host}.log" if host in nodes else "applog/loki.log"
                    files[rel].append((ts, stream, order, f"{_stamp(ts)} {line}"))
        written: list[str] = []
        total = 0
        truncated = False
        for rel in sorted(files):
            lines = [text for _, _, _, text in sorted(files[rel])]  # by stamp, then stream, then Loki's order
            data = "".join(f"{text}\n" for text in lines).encode("utf-8", "replace")
            if total + len(data) > cap:
                data = data[: max(0, cap - total)]
                data = data[: data.rfind(b"\n") + 1]
                truncated = True
            if data:
                total += bundle.write(rel, data)
                written.append(rel)
            if truncated:
                break
        notes = tuple(f"{q.logql}: {q.stopped}" for _, _, q in queries if q.stopped)
        problems = [q.problem for _, _, q in queries if q.problem]
        state = "ok" if written else "empty"
        if problems:
            state = "timeout" if any(q.state == "timeout" for _, _, q in queries) else "error"
        reason = "; ".join(problems) or ("cut at the byte cap" if truncated else "") or (
            "" if written else "no entries in the window")
        return SourceCoverage(self.name, state, reason, tuple(written), total, seconds,
                              query="; ".join(q.logql for _, _, q in queries), truncated=truncated, notes=notes,
                              facts={"kernel_nodes": sorted(r[len("syslog/"):-len(".log")] for r in written
                                                            if r.startswith("syslog/"))},
                              origin="shipped")


def _entries(answer: Any) -> list[tuple[int, tuple[tuple[str, str], ...], str]]:
    """(stamp ns, stream labels, line) of a ``query_range`` answer of result type ``streams``."""
    if not isinstance(answer, dict) or answer.get("status") != "success":
        error = answer.get("error") if isinstance(answer, dict) else None
        raise ValueError(f"Loki answered without success: {str(error or answer)[:200]}")
    data = answer.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "streams" or not isinstance(data.get("result"), list):
        raise ValueError("the answer holds no streams (a metric query?)")
    out: list[tuple[int, tuple[tuple[str, str], ...], str]] = []
    for stream in data["result"]:
        labels = stream.get("stream") if isinstance(stream, dict) else None
        values = stream.get("values") if isinstance(stream, dict) else None
        if not isinstance(labels, dict) or not isinstance(values, list):
            raise ValueError("a stream without labels or values")
        key = tuple(sorted((str(k), str(v)) for k, v in labels.items()))
        for value in values:
            if not (isinstance(value, list) and len(value) >= 2 and isinstance(value[1], str)
                    and str(value[0]).isdigit()):
                raise ValueError(f"an entry that is not [\"<ns>\", \"<line>\"]: {str(value)[:80]}")
            out.append((int(value[0]), key, value[1].replace("\r", "").replace("\n", " ")))
    return out


def _kernel_line(ts: int, node: str, line: str) -> str:
    """Loki's stamp, then the line's own syslog host and tag when it has them (so another program's tag
    is still seen as such), else the node and the line as it came."""
    own = parse_line_time(line, TimeContext())
    if own.fmt in SYSLOG_FORMATS and own.host and own.tag:
        return f"{_stamp(ts)} {own.host} {own.tag}: {own.message}"
    return f"{_stamp(ts)} {node} {line}"


def _stamp(ts: int) -> str:
    seconds, nanos = divmod(ts, _NS)
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos:09d}Z"


def _ns(moment: datetime) -> int:
    aware = moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
    delta = aware - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86400 + delta.seconds) * _NS + delta.microseconds * 1000


def _regex_literal(text: str) -> str:
    """``text`` as a literal inside a RE2 alternation (LogQL's ``=~``)."""
    return "".join(f"\\{c}" if c in r"\.+*?()|[]{}^$" else c for c in text)
