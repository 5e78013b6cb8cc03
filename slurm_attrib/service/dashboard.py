"""The read-only dashboard: server-rendered Jinja2 pages (autoescaped: text from bundles and users is
never HTML), inline SVG charts drawn from the same report functions the CLI uses, no script and no
request to any other host."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta
from pathlib import Path
from typing import Any, Optional
from urllib.parse import quote

import jinja2
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, Response

from .. import __version__
from ..store import reports
from . import charts
from .context import Service

TEMPLATES = Path(__file__).parent / "templates"
CHART_DAYS = {"day": 60, "week": 182}  # how far back the overview's chart reaches, per bucket size


def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             trim_blocks=True, lstrip_blocks=True,
                             auto_reload=False)  # installed templates do not change: no stat of each per page
    env.filters["url"] = lambda text: quote(str(text), safe="")
    env.globals["version"] = __version__
    return env


def add_dashboard(app: FastAPI, service: Service) -> None:
    env = environment()

    def page(name: str, status: int = 200, **values: Any) -> Response:
        return HTMLResponse(env.get_template(name).render(**values), status_code=status)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def overview(request: Request, by: str = "day") -> Response:
        return page("overview.html", **overview_values(service, "week" if by == "week" else "day"))

    @app.get("/jobs/{cluster}/{job}", response_class=HTMLResponse, include_in_schema=False)
    def job_page(cluster: str, job: str) -> Response:
        found = service.job_verdict(cluster, job)
        if found is None:
            return page("missing.html", 404, what=f"no verdict for job {job} on cluster {cluster}")
        return page("job.html", **job_values(found))

    @app.get("/nodes/{cluster}/{node}", response_class=HTMLResponse, include_in_schema=False)
    def node_page(cluster: str, node: str) -> Response:
        if not service.has_store():
            return page("missing.html", 404, what="no store yet")
        with service.reading() as st:
            jobs = reports.query_verdicts(st, reports.VerdictFilter(node=node, cluster=cluster, limit=500))
        return page("node.html", cluster=cluster, node=node, jobs=jobs, **node_summary(jobs))

    @app.get("/rules", response_class=HTMLResponse, include_in_schema=False)
    def rules_page() -> Response:
        from .app import rule_list

        rules = rule_list(service)
        phases: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for rule in rules:
            phases[rule["phase"]].append(rule)
        return page("rules.html", phases=list(phases.items()), count=len(rules))


def overview_values(service: Service, by: str) -> dict[str, Any]:
    """The overview over the recent past: the chart, lost GPU-hours and the unattributed rate of the last
    ``CHART_DAYS``; repeat offenders of the culprit-history window (``finalizer.history_days``)."""
    now = service.clock()
    chart_window = reports.Window(since=now - timedelta(days=CHART_DAYS[by]))
    offender_window = service.culprit_window()
    if not service.has_store():
        buckets, offenders, recent = [], [], []
    else:
        with service.reading() as st:
            buckets = [b.to_dict() for b in reports.verdict_stats(st, chart_window, by)]
            offenders = reports.node_offenders(st, offender_window, 1, False, 10)
            recent = reports.query_verdicts(st, reports.VerdictFilter(limit=20))
    jobs = sum(b["jobs"] for b in buckets)
    unattributed = sum(b["by_status"].get("unattributed", 0) for b in buckets)
    lost: dict[str, float] = defaultdict(float)
    for bucket in buckets:
        for category, group in bucket["by_category"].items():
            lost[category] += group["gpu_hours"]
    return {"chart": charts.stacked_by_category(buckets), "by": by, "days": CHART_DAYS[by], "jobs": jobs,
            "unattributed": unattributed, "unattributed_rate": round(100.0 * unattributed / jobs, 1) if jobs else 0.0,
            "lost": charts.share_bars(sorted(((k, round(v, 2)) for k, v in lost.items()),
                                             key=lambda kv: (-kv[1], kv[0]))),
            "offenders": offenders, "offender_days": service.history_days, "recent": recent,
            "now": now.isoformat(timespec="seconds")}


def job_values(found: dict[str, Any]) -> dict[str, Any]:
    diag = found["diagnosis"]
    root: Optional[dict[str, Any]] = diag.get("root_cause")
    supporting = list(diag.get("supporting_symptoms") or [])
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for sym in supporting:
        groups[f"{sym.get('category')} / {sym.get('kind')}"].append(sym)
    missing = [c for c in diag.get("coverage") or [] if c.get("state") != "ok"]
    return {"found": found, "diag": diag, "job": diag["job"], "root": root, "groups": sorted(groups.items()),
            "supporting": supporting, "timeline": charts.timeline(supporting, root), "missing": missing,
            "coverage": diag.get("coverage") or [], "bundle": found.get("bundle"),
            "previous": found.get("previous_verdicts") or []}


def node_summary(jobs: list[dict[str, Any]]) -> dict[str, Any]:
    categories: dict[str, int] = defaultdict(int)
    hours = 0.0
    for row in jobs:
        categories[str(row["category"])] += 1
        hours += float(row["gpu_hours"] or 0.0)
    return {"categories": sorted(categories.items(), key=lambda kv: (-kv[1], kv[0])), "gpu_hours": round(hours, 2),
            "first": jobs[-1]["job_time"] if jobs else "", "last": jobs[0]["job_time"] if jobs else ""}
