"""Charts drawn on the server as plain numbers for an inline SVG: no script, no request to anyone.
Each function turns report rows into shapes (positions in the SVG's own units); the templates only
place them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Optional

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#aec7e8", "#98df8a", "#ff9896")
WIDTH, HEIGHT, PAD = 640, 220, 28


def colours(keys: list[str]) -> dict[str, str]:
    """A colour per key, in sorted order, so a category keeps its colour on every page."""
    return {key: PALETTE[i % len(PALETTE)] for i, key in enumerate(sorted(keys))}


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    colour: str
    title: str


@dataclass(frozen=True)
class StackedChart:
    bars: list[Bar]
    labels: list[tuple[float, str]]  # (x, text) under the bars
    legend: list[tuple[str, str]]  # (colour, category)
    peak: int
    width: int = WIDTH
    height: int = HEIGHT


def stacked_by_category(buckets: list[dict[str, Any]]) -> StackedChart:
    """Verdicts per bucket, stacked by category (``verdict_stats`` buckets, oldest first)."""
    keys = sorted({k for b in buckets for k in b["by_category"]})
    colour = colours(keys)
    peak = max([b["jobs"] for b in buckets] + [1])
    step = (WIDTH - 2 * PAD) / max(1, len(buckets))
    scale = (HEIGHT - 2 * PAD) / peak
    bars: list[Bar] = []
    labels: list[tuple[float, str]] = []
    for i, bucket in enumerate(buckets):
        x, top = PAD + i * step, float(HEIGHT - PAD)
        for key in keys:
            jobs = bucket["by_category"].get(key, {}).get("jobs", 0)
            if jobs:
                top -= jobs * scale
                bars.append(Bar(round(x + step * 0.1, 1), round(top, 1), round(step * 0.8, 1), round(jobs * scale, 1),
                                colour[key], f"{bucket['bucket']}: {jobs} {key}"))
        labels.append((round(x + step / 2, 1), bucket["bucket"][5:]))
    return StackedChart(bars, _thin(labels), [(colour[k], k) for k in keys], peak)


def _thin(labels: list[tuple[float, str]], most: int = 8) -> list[tuple[float, str]]:
    every = max(1, -(-len(labels) // most))
    return labels[::every]


@dataclass(frozen=True)
class Mark:
    x: float
    y: float
    colour: str
    title: str
    root: bool


@dataclass(frozen=True)
class Timeline:
    marks: list[Mark]
    rows: list[tuple[float, str]]  # (y, node)
    start: str
    end: str
    width: int
    height: int


def timeline(symptoms: list[dict[str, Any]], root: Optional[dict[str, Any]]) -> Optional[Timeline]:
    """When each symptom happened on which node: one row per node, the root cause drawn larger."""
    timed = [(s, _when(s.get("time"))) for s in ([root] if root else []) + symptoms]
    points = [(s, t) for s, t in timed if t is not None]
    if not points:
        return None
    first, last = min(t for _, t in points), max(t for _, t in points)
    span = max((last - first).total_seconds(), 1.0)
    nodes = sorted({str(s.get("node") or "-") for s, _ in points})
    row_h, left = 24, 120
    height = PAD + row_h * len(nodes)
    y_of = {n: PAD / 2 + row_h * (i + 0.5) for i, n in enumerate(nodes)}
    colour = colours(sorted({str(s.get("category")) for s, _ in points}))
    marks = [Mark(round(left + (WIDTH - left - PAD) * (t - first).total_seconds() / span, 1),
                  round(y_of[str(s.get("node") or "-")], 1), colour[str(s.get("category"))],
                  f"{s.get('time')} {s.get('node') or '-'}: {s.get('summary') or s.get('kind')}", s is root)
             for s, t in points]
    return Timeline(marks, [(y_of[n], n) for n in nodes], first.isoformat(), last.isoformat(), WIDTH, int(height))


def _when(text: Any) -> Optional[datetime]:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def share_bars(rows: list[tuple[str, float]]) -> list[tuple[str, float, float]]:
    """(key, value, width in percent of the largest) for a horizontal bar list."""
    peak = max([v for _, v in rows] + [0.0])
    return [(k, v, round(100.0 * v / peak, 1) if peak else 0.0) for k, v in rows]
