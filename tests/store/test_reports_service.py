"""The report functions the service adds: keyset pages of ``query`` and all-time (status, category) totals."""

from __future__ import annotations

import random
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

from slurm_attrib.store import Store
from slurm_attrib.store.reports import (
    VerdictFilter,
    Window,
    query_verdict_page,
    query_verdicts,
    verdict_stats,
    verdict_totals,
)

from .test_stats_daily import synthetic


def test_pages_follow_query_order_without_gaps_or_repeats(golden_store: Path) -> None:
    with Store.open(golden_store, readonly=True) as store:
        whole = query_verdicts(store, VerdictFilter(limit=1000))
        seen, after = [], None
        while True:
            rows, after = query_verdict_page(store, VerdictFilter(limit=3, after=after))
            seen += rows
            if after is None:
                break
    assert seen == whole and len(whole) >= 19


def test_totals_agree_with_the_stats_buckets(golden_store: Path) -> None:
    with Store.open(golden_store) as store:
        totals = verdict_totals(store)
        buckets = verdict_stats(store, Window(), "week", use_summary=False)
    by_status: dict[str, int] = defaultdict(int)
    by_category: dict[str, float] = defaultdict(float)
    for (status, category), (jobs, hours) in totals.items():
        by_status[status] += jobs
        by_category[category] += hours
    assert dict(by_status) == {s: sum(b.by_status.get(s, 0) for b in buckets) for s in by_status}
    for category, hours in by_category.items():
        expected = sum(b.by_category[category][1] for b in buckets if category in b.by_category)
        assert round(hours, 2) == round(expected, 2)


def test_a_nodes_pages_through_its_culprit_index_are_the_scan_of_its_verdicts(tmp_path: Path) -> None:
    """``node=`` reads the node's culprit events in (job time, id) order: every page, every filter and
    every tie of job times gives what a scan of all verdicts naming the node as culprit gives."""
    rng = random.Random(11)
    with Store.open(tmp_path / "s.sqlite") as store:
        for i in range(1500):
            diag, gpus = synthetic(rng, rng.choice(["c", "d"]), str(i))
            if i % 7 == 0:  # ties: several verdicts with the same job time
                diag["job"]["end"] = "2026-11-20T10:00:00.000000Z"
            store.record(diag, datetime(2026, 12, 1, tzinfo=timezone.utc), gpus_per_node=gpus)
        scan = [r for r in query_verdicts(store, VerdictFilter(limit=100_000))]
        for node, category, window in (("n03", None, Window()), ("n07", "nvlink", Window()),
                                       ("n11", None, Window(since=datetime(2026, 11, 10, tzinfo=timezone.utc)))):
            expected = [r for r in scan if node in (r["culprit_nodes"] or "").split(",")
                        and (category is None or r["category"] == category)
                        and (window.since is None or r["job_time"] >= window.since.strftime("%Y-%m-%dT%H:%M:%S"))]
            seen, after = [], None
            while True:
                rows, after = query_verdict_page(store, VerdictFilter(node=node, category=category, window=window,
                                                                      limit=2, after=after))
                seen += rows
                if after is None:
                    break
            assert seen == expected and len(expected) > 2
