"""The claim keeps its plan right after a bulk load, before any ANALYZE: with the rows of
test_plans.py just loaded, the statistics still describe an empty table. A module of its own:
its database is filled for each dialect without the statistics test_plans.py's shared
database has."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from conftest import STORE_KINDS
from duetime.store import open_store
from duetime.store.base import Store
from integration.test_plans import (
    NOW,
    claim_params,
    explain,
    fill,
    job_scans,
    sorted_scans,
    sorts,
    subplan,
)
from kit import DialectKit, kit_named


@pytest.fixture(params=STORE_KINDS)
def kit(request: pytest.FixtureRequest) -> DialectKit:
    return kit_named(request.param)


@pytest.fixture
def unanalyzed(kit: DialectKit, tmp_path: Path) -> Iterator[Store]:
    """The same rows just bulk-loaded, before any ANALYZE (the 9:00 burst, before autovacuum
    has looked at the table): the statistics still describe an empty table."""
    url = kit.fresh_url(tmp_path, drop=True)  # new tables: no statistics of an earlier fill
    store = open_store(url)
    store.migrate()
    fill(kit, url, analyze=False)
    yield store
    store.close()


def test_a_claim_keeps_its_plan_before_the_statistics_know_of_a_bulk_load(
    unanalyzed: Store,
) -> None:
    """Right after a bulk load nothing has analyzed the table yet; the claim and the timer's
    next_due still walk their indexes and stop after `limit` rows (PostgreSQL would otherwise
    read and sort every due row on each claim: 20 ms instead of 0.3 ms at 30,000 due)."""
    plan = explain(unanalyzed, "claim", claim_params(True, ["t"]))
    if unanalyzed.dialect == "postgres":
        node = subplan(json.loads(plan)[0]["Plan"], "CTE picked")
        pick = json.dumps(node)
        assert "Seq Scan" not in pick and sorts(node) == [], pick
        assert '"Index Name": "duetime_jobs_due_any"' in pick and '"Limit"' in pick, pick
        due = explain(
            unanalyzed,
            "next_due",
            {
                "now": NOW,
                "until": NOW + timedelta(days=400),
                "all_queues": True,
                "queues": [],
                "limit": 10,
            },
        )
        # each priority class's walk of the claim-order index stops at the limit; the one
        # sort merges those few rows (migration 23), never the backlog
        root = json.loads(due)[0]["Plan"]
        assert set(job_scans(root)) == {"duetime_jobs_due_any"}, due
        assert sorted_scans(root) == [] and "Seq Scan" not in due, due
        # with sorting off a plan's estimated cost looks huge: JIT would compile it, for
        # hundreds of milliseconds a claim, were it not off on the store's connections
        driver = unanalyzed.driver  # type: ignore[attr-defined]
        with driver.transaction() as c:
            rows, _ = driver.execute(c.native, "SHOW jit", {})
        assert rows == [{"jit": "off"}]
    elif unanalyzed.dialect == "sqlite":
        assert (
            "SEARCH duetime_jobs USING INDEX duetime_jobs_due_any (priority=? AND due_at<?)" in plan
        ), plan
    else:
        assert "filesort" not in plan.lower(), plan
        assert '"key": "duetime_jobs_due_any"' in plan, plan
    claims = unanalyzed.claim(worker_id="w", queues=None, limit=100, now=NOW, tasks=["t"])
    assert len(claims) == 50
