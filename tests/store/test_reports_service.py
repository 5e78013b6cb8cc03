"""The report functions the service adds: keyset pages of ``query`` and all-time (status, category) totals."""

from __future__ import annotations

from collections import defaultdict
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
