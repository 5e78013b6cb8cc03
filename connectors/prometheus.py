"""GPU telemetry from Prometheus: dcgm-exporter series over the job window, judged into findings.

Many sites keep dcgm-exporter's series in Prometheus for weeks, long after a node's own exporter has
forgotten them. :class:`PrometheusSource` asks ``/api/v1/query_range`` for each configured metric on
all the job's nodes at once (a regex matcher on the host label) over [window.since, window.until],
and writes what the samples say into ``metrics/NODE.promql.log``: one line per finding, stamped, in
words an admin reads in a verdict (docs/bundle.md):

- an error counter that increased inside [start, end] (stamped at the first sample showing it);
- ``DCGM_FI_DEV_XID_ERRORS``, the LAST Xid of a GPU since the exporter started (not a counter): a change
  to a non-zero value inside the window is an Xid with that code at the first sample showing it;
- a value that was already non-zero before the job and did not move: context (``pre_existing``);
- a GPU whose clocks were slowed by hardware (slowdown, thermal, power brake) for a part of the window
  while the GPUs of the job's other nodes were not: a straggler, never a root cause on its own.

Prometheus refuses more than 11,000 points per series, an answer is capped at ``max_bytes`` and one
metric's samples are held until judged: a long window or a large job splits the range into several
queries or raises the step (:func:`plan_ranges`), and the coverage says which. Series that appear mid-window
(a new label set, e.g. dcgm-exporter's ``err_code`` label following the Xid value) are merged per GPU;
counter resets, NaN, infinities and DCGM's "blank" sentinel are handled. The connector reads no clock
but the injected monotonic one (for its deadline): the window decides everything else.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from typing import Any, Callable, Optional

from slurm_attrib.config import PrometheusConfig
from slurm_attrib.errors import ConfigError

from .base import BundleWriter, Limits, SourceCoverage, Window, Workload
from .http import HttpClient, HttpFailure

__all__ = [
    "COUNTER_SIGNALS",
    "MAX_POINTS",
    "SLOWDOWN_BITS",
    "Finding",
    "GpuId",
    "PrometheusSource",
    "host_matcher",
    "judge_counter",
    "judge_throttle",
    "judge_xid",
    "plan_ranges",
]

MAX_POINTS = 11_000  # Prometheus: "exceeded maximum resolution of 11,000 points per timeseries"
MAX_CHUNKS = 8  # queries per metric before the step is raised instead
MAX_SAMPLES = 2_000_000  # of one metric for all the job's GPUs (about 200 MB as Python tuples)
BYTES_PER_SAMPLE = 32  # in query_range's JSON: [1763632800,"79"], is 18-24 bytes (measured); kept generous
GPUS_PER_NODE = 8  # how many series a node is assumed to have when the ranges are planned
MAX_XID_CHANGES = 20  # Xid lines per GPU: a gauge that flaps is cut there
BLANK = 9.2e18  # DCGM's "blank" values for unsupported fields (9223372036854775794 and neighbours)

# The error counters whose increase inside the window is evidence (config key -> what the line calls it).
COUNTER_SIGNALS = (
    "ecc_dbe_volatile", "ecc_sbe_volatile", "remapped_rows_uncorrectable", "row_remap_pending",
    "row_remap_failure", "nvlink_crc_flit", "nvlink_crc_data", "nvlink_replay", "nvlink_recovery", "pcie_replay",
)

# NVML clocks-event reasons that slow a GPU for a hardware reason (DCGM field 112, the research notes §D.1:
# https://github.com/NVIDIA/DCGM/blob/72fa3feaa67d716a75323a8f47c34ff3ee73f824/dcgmlib/dcgm_fields.h).
# SW power cap (0x4), idle (0x1), application clocks (0x2) and sync boost (0x10) are normal under load.
SLOWDOWN_BITS = {0x8: "hw_slowdown", 0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake"}
SLOWDOWN_MASK = sum(SLOWDOWN_BITS)

_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
_NODE_NAME = re.compile(r"[^\x00-\x20/\x7f]+\Z")  # a node name that can also name a bundle file
_UNSAFE_VALUE = re.compile(r"[^\x21-\x7e]")  # label values go into lines: no blanks, no control characters
_RE2_SPECIAL = set(r"\.+*?()|[]{}^$-&~#<>=!,:;/'\"`@%")

Sample = tuple[float, float]


@dataclass(frozen=True, order=True)
class GpuId:
    """One GPU of one node, as the series' labels name it. Sorted by node, then index as a number."""

    node: str
    order: tuple[int, str]
    index: str = ""
    uuid: str = ""
    pci: str = ""

    @classmethod
    def of(cls, node: str, index: str, uuid: str, pci: str) -> GpuId:
        return cls(node, (int(index), "") if index.isdigit() else (1 << 30, index), index, uuid, pci)

    def words(self) -> str:
        parts = [f"node={self.node}"]
        parts += [f"{key}={value}" for key, value in (("gpu", self.index), ("uuid", self.uuid), ("pci", self.pci))
                  if value]
        return " ".join(parts)


@dataclass(frozen=True)
class Finding:
    """One line of ``metrics/NODE.promql.log``: ``at`` (unix seconds) stamps it."""

    at: float
    gpu: GpuId
    kind: str  # changed (an Xid), increase, pre_existing, no_baseline, throttle_straggler
    signal: str  # the config key (ecc_dbe_volatile): rules match it, whatever the site names the metric
    metric: str
    text: str

    def line(self) -> str:
        return f"{_iso(self.at)} promql {self.kind} {self.signal} {self.gpu.words()} {self.metric} {self.text}"

    def sort_key(self) -> tuple[GpuId, str, float, str]:
        return (self.gpu, self.signal, self.at, self.kind)


# --- what to ask ------------------------------------------------------------------------------------


def host_matcher(nodes: Iterable[str]) -> str:
    """An RE2 pattern (PromQL regexes are anchored) matching each node, bare or with a domain suffix,
    as the body of a double-quoted PromQL string: regex metacharacters escaped, then the string's."""
    alternatives = "|".join("".join("\\" + c if c in _RE2_SPECIAL else c for c in node) for node in nodes)
    pattern = f"(?:{alternatives})(?:\\..+)?"
    return pattern.replace("\\", "\\\\").replace('"', '\\"')


def plan_ranges(since: float, until: float, step: float, series: int = 1,
                max_bytes: int = 16 << 20) -> tuple[float, list[tuple[float, float]], str]:
    """The step and the [start, end] ranges that cover [since, until] for about ``series`` series, and a
    note when the step had to be raised or the range split ("" when neither).

    One metric's samples for all series stay under :data:`MAX_SAMPLES` (they are held until judged):
    past it the step is raised. One answer stays under Prometheus's 11,000 points per series and under
    ``max_bytes`` (at :data:`BYTES_PER_SAMPLE`): past them the range is split, into at most
    :data:`MAX_CHUNKS` queries, and past that the step is raised again."""
    span = max(0.0, until - since)
    series = max(1, series)
    notes: list[str] = []
    most = max(2, MAX_SAMPLES // series)
    if span / step + 1 > most:
        step = float(math.ceil(span / (most - 1)))
        notes.append(f"step raised to {step:g} s to hold {series} series within {MAX_SAMPLES} samples")
    per_answer = max(2, min(MAX_POINTS, max_bytes // BYTES_PER_SAMPLE // series))
    if span > MAX_CHUNKS * (per_answer - 1) * step:
        step = float(math.ceil(span / (MAX_CHUNKS * (per_answer - 1))))
        notes.append(f"step raised to {step:g} s to need at most {MAX_CHUNKS} queries per metric")
    per_query = (per_answer - 1) * step
    ranges = [(since, min(until, since + per_query))]
    while ranges[-1][1] < until:
        start = ranges[-1][1] + step
        ranges.append((start, min(until, start + per_query)))
    if len(ranges) > 1:
        notes.append(f"split into {len(ranges)} queries per metric of at most {per_answer} points per series "
                     "(Prometheus's 11,000 and the answer's byte cap)")
    return step, ranges, "; ".join(notes)


# --- what the samples say ---------------------------------------------------------------------------


def _split(samples: Sequence[Sample], start: float) -> tuple[Optional[Sample], list[Sample]]:
    """The last sample at or before ``start`` (the value the job began with) and those after it."""
    before = [s for s in samples if s[0] <= start]
    return (before[-1] if before else None), [s for s in samples if s[0] > start]


def judge_counter(samples: Sequence[Sample], start: float, end: float) -> Optional[tuple[str, float, str]]:
    """(kind, stamp, text) for an error counter over [start, end], or None when it says nothing.

    An increase inside the window is evidence, stamped at the first sample that shows it. A counter that
    goes down was reset (driver reload, GPU reset); its new value counts as new errors, as Prometheus's
    ``increase()`` does. Non-zero before the job and unmoved: ``pre_existing``. A series that begins
    inside the window has no value to compare its first one with: ``no_baseline`` when that is non-zero."""
    baseline, inside = _split(samples, start)
    inside = [s for s in inside if s[0] <= end]
    if baseline is None:
        if not inside:
            return None
        baseline, inside = inside[0], inside[1:]
        if baseline[1] > 0 and not any(v > baseline[1] for _, v in inside):
            return "no_baseline", baseline[0], (f"first sampled at {_num(baseline[1])} inside the job window "
                                                "(no earlier value to compare)")
    previous, total, first, resets = baseline, 0.0, None, 0
    for sample in inside:
        rise = sample[1] - previous[1] if sample[1] >= previous[1] else sample[1]
        resets += sample[1] < previous[1]
        if rise > 0:
            total += rise
            first = first or (sample, previous)
        previous = sample
    if first is not None:
        (at, value), (was_at, was) = first
        reset = f"; {resets} counter reset(s)" if resets else ""
        return "increase", at, (f"increased {_num(was)} -> {_num(value)} in the job window (previous sample "
                                f"{_iso(was_at)}; +{_num(total)} in all by {_iso(previous[0])}{reset})")
    if baseline[1] > 0 and baseline[0] <= start:
        return "pre_existing", start, f"was {_num(baseline[1])} before the job and did not increase in it"
    return None


def judge_xid(samples: Sequence[Sample], start: float, end: float) -> list[tuple[str, float, str]]:
    """(kind, stamp, text) for DCGM_FI_DEV_XID_ERRORS: the value is the code of the GPU's last Xid since the
    exporter started, so each change to a non-zero value inside the window is one Xid (several Xids
    between two samples show as the last one); a non-zero value from before the job is context."""
    baseline, inside = _split(samples, start)
    inside = [s for s in inside if s[0] <= end]
    if baseline is None:
        if not inside:
            return []
        baseline, inside = inside[0], inside[1:]
        if baseline[1] > 0:
            found = [("no_baseline", baseline[0], f"first sampled at {_num(baseline[1])} inside the job window "
                      "(the last Xid since the exporter started; no earlier value to compare)")]
            return found + _xid_changes(baseline, inside)
    changes = _xid_changes(baseline, inside)
    if not changes and baseline[1] > 0:
        return [("pre_existing", start, f"was {_num(baseline[1])} before the job (the last Xid since the "
                 "exporter started); no new Xid in it")]
    return changes


def _xid_changes(baseline: Sample, inside: Sequence[Sample]) -> list[tuple[str, float, str]]:
    found: list[tuple[str, float, str]] = []
    previous = baseline
    for sample in inside:
        if sample[1] != previous[1] and sample[1] > 0 and float(sample[1]).is_integer():
            found.append(("changed", sample[0], f"changed {_num(previous[1])} -> {_num(sample[1])} in the job window: "
                          f"xid {_num(sample[1])} (previous sample {_iso(previous[0])})"))
        previous = sample
    return found[:MAX_XID_CHANGES]


@dataclass(frozen=True)
class Slowdown:
    """How much of the job window one GPU spent with a hardware slowdown reason set."""

    samples: int
    slowed: int
    bits: int
    first: float
    last: float

    @property
    def fraction(self) -> float:
        return self.slowed / self.samples if self.samples else 0.0


_NOT_SLOWED = Slowdown(0, 0, 0, 0.0, 0.0)


def judge_throttle(samples: Sequence[Sample], start: float, end: float) -> Optional[Slowdown]:
    """The share of the samples in [start, end] with a slowdown bit of :data:`SLOWDOWN_BITS` set (None
    without samples there): the bitmask is a state at each sample, not a counter."""
    inside = [s for s in samples if start <= s[0] <= end]
    slowed = [s for s in inside if int(s[1]) & SLOWDOWN_MASK]
    if not inside:
        return None
    bits = 0
    for _, value in slowed:
        bits |= int(value) & SLOWDOWN_MASK
    return Slowdown(len(inside), len(slowed), bits, slowed[0][0] if slowed else 0.0,
                    slowed[-1][0] if slowed else 0.0)


def _stragglers(slowdowns: Mapping[GpuId, Slowdown], min_fraction: float) -> list[GpuId]:
    """GPUs slowed for at least ``min_fraction`` of the window on one node, or on a minority of the nodes
    observed, while the others were not: a whole job running hot is the room's problem, not one node's,
    and a job on one node has nothing to compare with."""
    observed = {gpu.node for gpu in slowdowns}
    slowed = sorted(gpu for gpu, s in slowdowns.items() if s.slowed and s.fraction >= min_fraction)
    slowed_nodes = {gpu.node for gpu in slowed}
    few = len(slowed_nodes) == 1 or len(slowed_nodes) * 2 < len(observed)
    return slowed if slowed and len(slowed_nodes) < len(observed) and few else []


def _at(samples: Sequence[Sample], at: float) -> Optional[float]:
    """The value of the last sample at or before ``at``."""
    value = None
    for when, sample in samples:
        if when > at:
            break
        value = sample
    return value


# --- the source -------------------------------------------------------------------------------------


@dataclass
class _Answer:
    """What the queries said so far. Each metric is judged as soon as its answer is in and its samples
    are let go, so memory holds one metric's samples (at most :data:`MAX_SAMPLES`) and the findings;
    temperature and power are kept only for the GPUs that were slowed (the straggler line quotes them)."""

    findings: list[Finding] = field(default_factory=list)
    slowdowns: dict[GpuId, Slowdown] = field(default_factory=dict)
    readings: dict[tuple[str, GpuId], list[Sample]] = field(default_factory=dict)
    gpu_series: int = 0
    nodes: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    dropped_values: int = 0
    queries: list[str] = field(default_factory=list)


class PrometheusSource:
    """Reads the job's nodes' dcgm-exporter series from Prometheus and writes ``metrics/NODE.promql.log``."""

    name = "prometheus"

    def __init__(self, settings: PrometheusConfig, client: Optional[HttpClient] = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.client = client
        self.clock = clock

    def collect(self, workload: Workload, window: Window, bundle: BundleWriter, limits: Limits) -> SourceCoverage:
        began = self.clock()
        if not self.settings.url:
            return SourceCoverage(self.name, "skipped", "no url configured (prometheus.url)")
        nodes = sorted({n for n in workload.nodes if _NODE_NAME.match(n) and not n.startswith(".")})
        if not nodes:
            return SourceCoverage(self.name, "skipped", "the workload names no node")
        try:
            signals = self._signals()
            client = self.client or HttpClient(self.settings, clock=self.clock)
        except (ConfigError, ValueError, OSError) as exc:  # a bad key, an unreadable token file
            return SourceCoverage(self.name, "error", f"configuration: {exc}")
        deadline = began + limits.seconds
        job = (_unix(window.start), _unix(window.end))
        step, ranges, plan_note = plan_ranges(_unix(window.since), _unix(window.until), self.settings.step_s,
                                              len(nodes) * GPUS_PER_NODE, self.settings.max_bytes)
        answer = _Answer(notes=[plan_note] if plan_note else [])
        try:
            for signal, metric in signals:
                self._query(client, (signal, metric), nodes, (step, ranges, job), deadline, answer)
        except HttpFailure as exc:
            return SourceCoverage(self.name, exc.state, str(exc), query=answer.queries[-1],
                                  seconds=self.clock() - began)
        except _Refused as exc:
            return SourceCoverage(self.name, "error", str(exc), query=answer.queries[-1],
                                  seconds=self.clock() - began)
        for gpu in _stragglers(answer.slowdowns, self.settings.throttle_min_fraction):
            answer.findings.append(self._straggler(gpu, answer, dict(signals)["clock_throttle_reasons"]))
        return self._write(answer, nodes, step, bundle, limits, began)

    def _signals(self) -> list[tuple[str, str]]:
        """(config key, metric name) of every signal configured; the label names and the step checked."""
        for label in (self.settings.host_label, self.settings.gpu_label, self.settings.uuid_label,
                      self.settings.pci_label):
            if label and not _LABEL_NAME.match(label):
                raise ConfigError(f"{label!r} is not a Prometheus label name")
        if not _LABEL_NAME.match(self.settings.host_label):
            raise ConfigError("host_label is required")
        if not (math.isfinite(self.settings.step_s) and self.settings.step_s > 0):
            raise ConfigError(f"step_s must be a positive number of seconds, not {self.settings.step_s!r}")
        metrics = self.settings.metrics
        chosen = [(f.name, str(getattr(metrics, f.name))) for f in fields(metrics) if getattr(metrics, f.name)]
        for key, metric in chosen:
            if not _METRIC_NAME.match(metric):
                raise ConfigError(f"metrics.{key}: {metric!r} is not a Prometheus metric name")
        return chosen

    def _query(self, client: HttpClient, wanted: tuple[str, str], nodes: list[str],
               plan: tuple[float, list[tuple[float, float]], tuple[float, float]], deadline: float,
               answer: _Answer) -> None:
        """One metric over the plan's ranges at its step, merged per GPU and judged over the job's span."""
        signal, metric = wanted
        step, ranges, job = plan
        query = f'{metric}{{{self.settings.host_label}=~"{host_matcher(nodes)}"}}'
        answer.queries.append(query)
        raw: dict[tuple[GpuId, str], list[Sample]] = {}
        for first, last in ranges:
            params = {"query": query, "start": f"{first:.3f}", "end": f"{last:.3f}", "step": f"{step:g}"}
            data = _matrix(client.get("/api/v1/query_range", params, deadline=deadline).json(), query)
            for warning in data.get("warnings", ()):
                answer.notes.append(f"{metric}: prometheus warns: {str(warning)[:200]}")
            for series in data["result"]:
                self._take(series, nodes, raw, answer)
            if sum(len(samples) for samples in raw.values()) > MAX_SAMPLES:
                raise _Refused(f"{metric}: more than {MAX_SAMPLES} samples for the job's GPUs; raise "
                               "prometheus.step_s or shorten the margins")
        merged = _merge(raw)
        del raw
        answer.gpu_series += len(merged)
        answer.nodes.update(gpu.node for gpu in merged)
        self._judge(signal, metric, merged, job, answer)

    @staticmethod
    def _judge(signal: str, metric: str, merged: Mapping[GpuId, list[Sample]], job: tuple[float, float],
               answer: _Answer) -> None:
        start, end = job
        for gpu, samples in sorted(merged.items()):
            if signal in COUNTER_SIGNALS:
                judged = judge_counter(samples, start, end)
                answer.findings += [Finding(judged[1], gpu, judged[0], signal, metric, judged[2])] if judged else []
            elif signal == "xid":
                answer.findings += [Finding(at, gpu, kind, signal, metric, text)
                                    for kind, at, text in judge_xid(samples, start, end)]
            elif signal == "clock_throttle_reasons":
                slowdown = judge_throttle(samples, start, end)
                if slowdown is not None:
                    answer.slowdowns[gpu] = slowdown
            elif signal in ("gpu_temp", "power_usage") and answer.slowdowns.get(gpu, _NOT_SLOWED).slowed:
                # asked after clock_throttle_reasons (PrometheusMetrics' field order), so the slowed GPUs are known
                answer.readings[(signal, gpu)] = [s for s in samples if start <= s[0] <= end]

    def _take(self, series: Any, nodes: list[str], raw: dict[tuple[GpuId, str], list[Sample]],
              answer: _Answer) -> None:
        if not isinstance(series, dict) or not isinstance(series.get("metric"), dict):
            raise _Refused("the answer is not a Prometheus matrix (a series without labels)")
        labels: dict[str, Any] = series["metric"]
        node = _node_for(str(labels.get(self.settings.host_label, "")), nodes)
        if node is None:
            return
        gpu = GpuId.of(node, *(_clean(labels.get(key, "")) for key in (
            self.settings.gpu_label, self.settings.uuid_label, self.settings.pci_label)))
        key = (gpu, repr(sorted((str(k), str(v)) for k, v in labels.items())))
        values = series.get("values")
        kept = _samples(values if isinstance(values, list) else [])
        answer.dropped_values += (len(values) if isinstance(values, list) else 0) - len(kept)
        raw.setdefault(key, []).extend(kept)

    def _write(self, answer: _Answer, nodes: list[str], step: float, bundle: BundleWriter, limits: Limits,
               began: float) -> SourceCoverage:
        findings = sorted(answer.findings, key=Finding.sort_key)
        seen_nodes = answer.nodes
        notes = list(answer.notes)
        if answer.dropped_values:
            notes.append(f"{answer.dropped_values} sample(s) NaN, infinite or DCGM's blank value: left out")
        missing = [n for n in nodes if n not in seen_nodes]
        if missing and seen_nodes:
            notes.append(f"no series for {', '.join(missing[:20])} (label {self.settings.host_label})")
        query = " ; ".join(answer.queries)
        seconds = self.clock() - began
        if not answer.gpu_series:
            return SourceCoverage(self.name, "empty", f"no series for the job's nodes (label "
                                  f"{self.settings.host_label}) in the window", query=query, seconds=seconds,
                                  notes=tuple(notes))
        cap = min(limits.max_bytes, self.settings.max_bytes)
        files, written, cut = self._files(findings, bundle, cap)
        if cut:
            notes.append(f"{cut} finding line(s) past the {cap}-byte cap left out")
        reason = (f"{answer.gpu_series} series on {len(seen_nodes)} of {len(nodes)} node(s) at step {step:g} s; "
                  f"{len(findings)} finding(s)")
        return SourceCoverage(self.name, "ok", reason, files=tuple(files), bytes=written, seconds=self.clock() - began,
                              query=query, truncated=bool(cut), notes=tuple(notes))

    @staticmethod
    def _straggler(gpu: GpuId, answer: _Answer, metric: str) -> Finding:
        slow = answer.slowdowns[gpu]
        reasons = ",".join(name for bit, name in sorted(SLOWDOWN_BITS.items()) if slow.bits & bit)
        others = sorted({g.node for g, s in answer.slowdowns.items() if g.node != gpu.node and not s.slowed})
        readings = []
        for signal, word, unit in (("gpu_temp", "temp", "C"), ("power_usage", "power", "W")):
            value = _at(answer.readings.get((signal, gpu), []), slow.first)
            if value is not None:
                readings.append(f"{word}={_num(round(value, 1))} {unit}")
        at_start = f" ({', '.join(readings)} then)" if readings else ""
        text = (f"{reasons} (0x{slow.bits:x}) in {slow.slowed} of {slow.samples} job-window samples "
                f"({round(100 * slow.fraction)}%) from {_iso(slow.first)}{at_start} until {_iso(slow.last)}; "
                f"not slowed on {len(others)} other node(s) of the job: a straggler candidate")
        return Finding(slow.first, gpu, "throttle_straggler", "clock_throttle_reasons", metric, text)

    @staticmethod
    def _files(findings: list[Finding], bundle: BundleWriter, cap: int) -> tuple[list[str], int, int]:
        """Write one file per node, in node order, up to ``cap`` bytes in all; returns files, bytes, lines cut."""
        by_node: dict[str, list[str]] = {}
        for finding in findings:
            by_node.setdefault(finding.gpu.node, []).append(finding.line() + "\n")
        files: list[str] = []
        written = cut = 0
        for node, lines in sorted(by_node.items()):
            kept: list[str] = []
            for line in lines:
                size = len(line.encode())
                if written + size > cap:
                    cut += 1
                    continue
                kept.append(line)
                written += size
            if kept:
                rel = f"metrics/{node}.promql.log"
                bundle.write(rel, "".join(kept).encode())
                files.append(rel)
        return files, written, cut


class _Refused(Exception):
    """Prometheus answered, but not with something to use (an error status, a result of another type)."""


def _matrix(body: Any, query: str) -> dict[str, Any]:
    """The ``data`` of a successful matrix answer (warnings moved into it), or :class:`_Refused`."""
    if not isinstance(body, dict):
        raise _Refused("the answer is not a Prometheus API object")
    if body.get("status") != "success":
        kind = str(body.get("errorType", "unknown"))[:60]
        raise _Refused(f"prometheus refused {query[:200]!r}: {kind}: {str(body.get('error', ''))[:300]}")
    data = body.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
        raise _Refused("the answer is not a Prometheus matrix")
    warnings = body.get("warnings")
    return {**data, "warnings": warnings if isinstance(warnings, list) else []}


def _merge(raw: Mapping[tuple[GpuId, str], list[Sample]]) -> dict[GpuId, list[Sample]]:
    """One list of samples per GPU from its series. A GPU's label set can change inside the window
    (dcgm-exporter's ``err_code`` follows the Xid value; a driver update changes a version label); where
    two overlap (an ended series stays visible for Prometheus's lookback), the one that began last wins."""
    by_gpu: dict[GpuId, list[tuple[float, str, list[Sample]]]] = {}
    for (gpu, labels), samples in raw.items():
        if samples:
            by_gpu.setdefault(gpu, []).append((min(t for t, _ in samples), labels, samples))
    merged: dict[GpuId, list[Sample]] = {}
    for gpu, parts in by_gpu.items():
        values: dict[float, float] = {}
        for _, _, samples in sorted(parts):
            values.update(samples)
        merged[gpu] = sorted(values.items())
    return merged


def _samples(values: list[Any]) -> list[Sample]:
    """The usable samples of one series' ``values``: converted in one pass when every pair is well formed
    (the answer of a healthy Prometheus; this is where a large job's time goes), else pair by pair."""
    try:
        pairs = [(float(when), float(value)) for when, value in values]
    except (TypeError, ValueError):
        return [sample for sample in map(_sample, values) if sample is not None]
    return [(when, value) for when, value in pairs
            if math.isfinite(when) and math.isfinite(value) and abs(value) < BLANK]


def _sample(pair: Any) -> Optional[Sample]:
    """``[<unix float>, "<value>"]`` → (time, value); None for NaN, ±Inf, DCGM's blank value or garbage."""
    if not isinstance(pair, (list, tuple)) or len(pair) != 2:
        return None
    try:
        when, value = float(pair[0]), float(str(pair[1]))
    except (TypeError, ValueError):
        return None
    if not (math.isfinite(when) and math.isfinite(value)) or abs(value) >= BLANK:
        return None
    return when, value


def _node_for(host: str, nodes: Sequence[str]) -> Optional[str]:
    """The job node a host label names: the same name, or that name with a domain."""
    if host in nodes:
        return host
    short = host.split(".", 1)[0]
    return short if short in nodes else None


def _clean(value: Any) -> str:
    return _UNSAFE_VALUE.sub("_", str(value))[:80]


def _unix(when: datetime) -> float:
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()


def _iso(at: float) -> str:
    moment = datetime.fromtimestamp(at, timezone.utc)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    return f"{text}.{moment.microsecond // 1000:03d}Z" if moment.microsecond // 1000 else f"{text}Z"


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
