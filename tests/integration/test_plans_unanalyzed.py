"""The claim keeps its plan right after a bulk load, before any ANALYZE: with the rows of
test_plans.py just loaded, the statistics still describe an empty table. A module of its own:
its database is filled for each dialect without the statistics test_plans.py's shared
database has."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from conftest import STORE_KINDS
from duetime.core.models import NewJob, Outcome
from duetime.core.requests import DEFAULT_LEASE_SECONDS, TaskDefaults, build_new_job
from duetime.core.states import Event, JobStatus
from duetime.store import open_store
from duetime.store.base import ClaimPlan, Store
from duetime.store.postgres.driver import PostgresDriver
from duetime.store.sql.front import SQLStore
from integration.test_plans import (
    NOW,
    auto_explained,
    claim_params,
    explain,
    fill,
    job_scans,
    postgres_executed,
    scan_reads,
    sorted_scans,
    sorts,
    start_auto_explain,
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
                "floor": NOW,  # where its seeks of the classes start (Store.next_due's now)
                "known": [],  # as Store.next_due: every class sought
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


def test_a_claim_planned_on_an_empty_table_keeps_its_plan_after_a_bulk_load(
    tmp_path: Path,
) -> None:
    """PostgreSQL plans a connection's claim once (a generic plan, cached) and runs that plan
    for every later claim on it. A worker's first claim may find the table empty and the
    next a burst loaded since (no ANALYZE yet, which would plan it again): the plan made for
    the empty table must still walk the claim-order index and find each picked job by its
    key. The control: the same statement planned for the empty table with sorting off alone
    moves the picked jobs through a hash join over a sequential scan of the whole table."""
    kit = kit_named("postgres")
    url = kit.fresh_url(tmp_path, drop=True)
    with one_connection(url) as store:
        assert store.claim(worker_id="w", queues=None, limit=10, now=NOW) == []  # planned here
        assert claim_plans(store) == (1, 0)
        with psycopg.connect(url) as control:
            claim = store.driver.statements("claim")[-1]
            encoded = store.driver.encode(claim_params(True))

            def claim_sorting_off() -> None:
                for setting in ("enable_sort = off", "plan_cache_mode = force_generic_plan"):
                    control.execute(f"SET LOCAL {setting}")
                control.execute(claim, encoded, prepare=True).fetchall()

            claim_sorting_off()  # planned here
            control.commit()
            fill(kit, url, analyze=False)

            plan = postgres_executed(
                store, "claim", claim_params(True), analyze=True, rolled_back=False
            )
            assert claim_plans(store) == (2, 0)  # that plan ran again: the one made above
            root = json.loads(plan)[0]["Plan"]
            pick = subplan(root, "CTE picked")
            assert job_scans(pick) == ["duetime_jobs_due_any"] and sorts(pick) == [], pick
            assert pick["Actual Rows"] == 10
            # the move finds each picked job by its key (a seek per key, or a bitmap of
            # them); nothing reads the whole table
            move = json.dumps(subplan(root, "CTE claimed"))
            assert '"Index Name": "duetime_jobs_pkey"' in move, plan
            assert '"Index Cond": "(id = ANY' in move, plan
            assert "Seq Scan" not in plan and "Hash" not in plan, plan
            pages, _ = scan_reads(root)
            assert pages < 300, pages  # the table's 200,050 rows fill some 9,500 pages

            notes = [  # the plan made above
                json.dumps(p) for p in auto_explained(control, claim_sorting_off, analyze=False)
            ]
            control.rollback()
            assert any("Seq Scan" in n and "Hash Join" in n for n in notes), notes
        claims = store.claim(worker_id="w", queues=None, limit=100, now=NOW)
        assert len(claims) == 40  # and the claim above took the first 10


@contextmanager
def one_connection(url: str) -> Iterator[SQLStore]:
    """A migrated PostgreSQL store of one connection (so its cached plans are the test's),
    on a jobs table that autovacuum never analyzes behind the test's back."""
    store = SQLStore(PostgresDriver(url, min_size=1, max_size=1))
    try:
        store.migrate()
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute("ALTER TABLE duetime_jobs SET (autovacuum_enabled = off)")
        yield store
    finally:
        store.close()


SUCCEED = Outcome(Event.SUCCEED)


def new_job(now: datetime) -> NewJob:
    return build_new_job("t", {}, now=now, tenant="default", defaults=TaskDefaults())


def explained_from_now(store: SQLStore, *, analyze: bool = False) -> list[str]:
    """The plans of every statement the store's one connection runs from now on, as
    auto_explain sends them to it (notices, text format; with (ANALYZE, BUFFERS)' counts
    where analyze), appended to the list returned."""
    notes: list[str] = []
    with store.driver._pool.connection() as native:  # type: ignore[attr-defined]
        native.add_notice_handler(lambda d: notes.append(d.message_primary or ""))
        start_auto_explain(native, analyze=analyze, scope="SESSION", log_format="text")
        native.commit()
    return notes


def claim_plans(store: SQLStore) -> tuple[int, int]:
    """The claim's (generic plans, custom plans) on the store's one connection."""
    with store.driver.transaction() as c:
        rows, _ = store.driver.execute(
            c.native,
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
            "WHERE statement LIKE 'WITH RECURSIVE up AS (%%'",
            {},
        )
    [row] = rows
    return row["generic_plans"], row["custom_plans"]


def test_a_finish_planned_on_a_small_table_reads_its_jobs_by_key_after_a_bulk_load(
    tmp_path: Path,
) -> None:
    """finish_jobs is prepared on each connection and its generic plan cached there. A worker
    that starts on a quiet database plans it while the jobs table is small; a plan that then
    read the table whole (a hash join over a sequential scan, or over a full walk of the
    primary key) would read every row for each batch once the table has grown: 13 to 25 ms a
    batch at 50,000 jobs, against under 5 ms by the key. The plan made on a table of 30 jobs
    must still find a batch of 200 by their ids."""
    with one_connection(kit_named("postgres").fresh_url(tmp_path, drop=True)) as store:
        store.enqueue([new_job(NOW) for _ in range(30)], NOW)
        for _ in range(6):  # five custom plans, then the generic one, cached
            claims = store.claim(worker_id="w", queues=None, limit=5, now=NOW)
            assert store.finish_many([(c.lease, SUCCEED) for c in claims], NOW) == [True] * 5
        for _ in range(10):
            store.enqueue([new_job(NOW) for _ in range(5_000)], NOW)
        claims = store.claim(worker_id="w", queues=None, limit=200, now=NOW)
        assert len(claims) == 200
        notes = explained_from_now(store)
        assert store.finish_many([(c.lease, SUCCEED) for c in claims], NOW) == [True] * 200
        [plan] = [n for n in notes if "json_to_recordset" in n]
        assert "Seq Scan on duetime_jobs" not in plan, plan
        assert "Full" not in plan and "on duetime_jobs j " in plan, plan


@contextmanager
def vacuumed_under_a_held_snapshot(
    tmp_path: Path, queues: list[str] | None = None, capped: bool = False, live: int = 0
) -> Iterator[SQLStore]:
    """A store of one connection after 10,000 jobs were claimed (by `queues`; under flow
    control when `capped`) and finished under a snapshot held open, then a VACUUM ANALYZE
    with `live` jobs waiting: the finished jobs' rows and index entries stay, dead yet not
    removable, and the vacuum records the table as holding only the live ones (autovacuum's,
    in the pressure benchmark, between two jobs of a steady flow), so the statements cached
    on the connection are planned again on that. With no job live PostgreSQL's estimates
    fall back to its defaults; with one, it takes the primary key to hold a single value, so
    that any condition on it selects every row. The snapshot is held while the test runs."""
    url = kit_named("postgres").fresh_url(tmp_path, drop=True)
    with one_connection(url) as store, psycopg.connect(url, autocommit=True) as admin:
        if capped:  # a cap never reached: every claim is a controlled one
            store.set_queue("default", NOW, concurrency=100_000)
        with held_snapshot(url):
            claimed_and_finished(store, queues, 4, NOW)
            store.enqueue([new_job(NOW) for _ in range(live)], NOW)
            admin.execute("VACUUM ANALYZE duetime_jobs")
            [(tuples,)] = admin.execute(
                "SELECT reltuples FROM pg_class WHERE relname = 'duetime_jobs'"
            ).fetchall()
            assert tuples == live  # the table looks (all but) empty to the planner
            store.enqueue([new_job(NOW) for _ in range(50 - live)], NOW)
            yield store


@contextmanager
def held_snapshot(url: str) -> Iterator[None]:
    """A transaction held open on its own connection (BEGIN; SELECT txid_current(); idle)
    while the block runs: no row or index entry that dies meanwhile can be removed."""
    held = psycopg.connect(url)
    try:
        held.execute("SELECT txid_current()")  # a snapshot older than what follows
        yield
    finally:
        held.close()


def claimed_and_finished(
    store: SQLStore, queues: list[str] | None, batches: int, due: datetime
) -> None:
    """`batches` of 2,500 jobs due at `due` enqueued, each claimed (by `queues`) and
    finished at NOW before the next."""
    for _ in range(batches):
        store.enqueue([new_job(due) for _ in range(2_500)], due)
        while claims := store.claim(worker_id="w", queues=queues, limit=500, now=NOW):
            store.finish_many([(c.lease, SUCCEED) for c in claims], NOW)


def unconditioned_job_scans(plan: str) -> list[str]:
    """The scans of the jobs table in a text-format plan that read it with no condition on
    an index (a walk of a whole index, or the whole table), each as its plan line."""
    lines = plan.splitlines()
    found = []
    for i, line in enumerate(lines):
        if not re.search(r"Scan(?: Backward)? (?:using \w+ )?on duetime_jobs ", line):
            continue
        if "Bitmap Heap Scan" in line:
            continue  # its bitmap index scans, below it, are checked on their own lines
        details = []
        for after in lines[i + 1 :]:
            if "->" in after:
                break
            details.append(after)
        if not any("Index Cond" in d for d in details):
            found.append(line.strip())
    return found


LIVE_AT_THE_VACUUM = pytest.mark.parametrize(
    "live", [0, 1], ids=["no job live at the vacuum", "one job live at the vacuum"]
)


@LIVE_AT_THE_VACUUM
def test_a_finish_reads_its_jobs_by_key_after_a_vacuum_under_a_held_snapshot(
    tmp_path: Path, live: int
) -> None:
    """While a transaction stays open, the jobs claimed and finished since it began leave
    their rows and index entries behind, none removable. A VACUUM ANALYZE then finds no live
    row and records the table as empty, and the finish's cached plan is made again on that:
    a plan that walked a whole index of the table to build its hash (the planner believes it
    holds a row) read every dead entry for each batch, 15 to 30 ms against 1.5
    (docs/performance.md, "The finish's plan after a vacuum"). The batch's jobs must still
    be read through the primary key alone, each read with a condition on it. With one job
    live at the vacuum, the planner took any condition on the key to select every row and
    left bitmap scans out, so the plan walked whole indexes (duetime_jobs_status, the
    primary key) with index scans it had been told not to use: 7,600 pages for a batch of
    20 where 160 do, 29 ms a batch in the pressure benchmark, for a minute, until the next
    autovacuum (docs/performance.md, "The finish's plan with one job live")."""
    with vacuumed_under_a_held_snapshot(tmp_path, live=live) as store:
        claims = store.claim(worker_id="w", queues=None, limit=50, now=NOW)
        assert len(claims) == 50
        notes = explained_from_now(store)
        assert store.finish_many([(c.lease, SUCCEED) for c in claims], NOW) == [True] * 50
    [plan] = [n for n in notes if "json_to_recordset" in n]
    indexes = set(re.findall(r"Scan(?: Backward)? using (\w+) on duetime_jobs ", plan))
    indexes |= set(re.findall(r"Bitmap Index Scan on (\w+)", plan))
    assert indexes <= {"duetime_jobs_pkey", "duetime_jobs_done_pkey"}, plan
    assert "Seq Scan on duetime_jobs " not in plan, plan
    assert unconditioned_job_scans(plan) == [], plan


def test_a_finish_of_every_kind_reads_its_jobs_by_key_after_a_vacuum_with_one_job_live(
    tmp_path: Path,
) -> None:
    """The finish's settings hold for the rest of its transaction. After the vacuum with one
    job live, every statement of a finish must read the jobs by a condition on an index:
    retries, failures for good, a batch with one stale outcome (the long way: the rows locked
    first, the outcome that lost its fence reported late, which walked the whole primary key
    before the batch's bounds named it), and the reaper's finish of expired leases."""
    with vacuumed_under_a_held_snapshot(tmp_path, live=1) as store:
        claims = store.claim(worker_id="w", queues=None, limit=40, now=NOW)
        assert len(claims) == 40
        notes = explained_from_now(store)
        retry = Outcome(Event.RETRY, due_at=NOW + timedelta(seconds=5))
        dead = Outcome(Event.GIVE_UP, error_message="failed for good")
        assert store.finish_many([(c.lease, retry) for c in claims[:10]], NOW) == [True] * 10
        assert store.finish_many([(c.lease, dead) for c in claims[10:20]], NOW) == [True] * 10
        stale_beside_current = [(c.lease, SUCCEED) for c in claims[:1] + claims[20:30]]
        assert store.finish_many(stale_beside_current, NOW) == [False] + [True] * 10
        lapsed = NOW + timedelta(seconds=DEFAULT_LEASE_SECONDS + 1)
        reaped = [(c.lease, dead) for c in claims[30:]]
        assert store.finish_many(reaped, lapsed, only_if_expired=True) == [True] * 10
    plans = [n for n in notes if "duetime_jobs" in n]
    assert any("late_outcome = v.outcome" in n for n in plans), notes  # the late report ran
    for plan in plans:
        assert unconditioned_job_scans(plan) == [], plan


@pytest.mark.parametrize(
    ("queues", "capped"),
    [(None, False), (["default"], False), (None, True)],
    ids=["all queues", "named queues", "a capped queue"],
)
@LIVE_AT_THE_VACUUM
def test_a_claim_moves_its_jobs_by_key_after_a_vacuum_under_a_held_snapshot(
    tmp_path: Path, queues: list[str] | None, capped: bool, live: int
) -> None:
    """As the finish above: after the vacuum, the claim is planned again (a generic plan for
    all queues, one per call for named ones; a capped queue's claim picks under flow control
    and moves its chosen jobs with claim_chosen). Joined to its picked jobs, the move of a
    claim believed the table held a row and walked the whole primary key, every dead entry,
    for each claim: 13,289 pages, 70 ms at 60,000 claimed jobs (docs/performance.md, "The
    claim's move and the heartbeat after a vacuum"). The move must find its jobs by their
    keys, and every read of the table must have a condition on the index it walks."""
    with vacuumed_under_a_held_snapshot(tmp_path, queues, capped, live) as store:
        notes = explained_from_now(store)
        claims = store.claim(worker_id="w", queues=queues, limit=50, now=NOW)
        assert len(claims) == 50
    [plan] = [n for n in notes if "UPDATE duetime_jobs AS j" in n]
    move = plan[plan.index("CTE claimed") :]
    assert "Index Scan using duetime_jobs_pkey on duetime_jobs" in move, plan
    assert "Index Cond: (id = ANY" in move, plan
    assert unconditioned_job_scans(plan) == [], plan


@LIVE_AT_THE_VACUUM
def test_a_heartbeat_reads_its_jobs_by_key_after_a_vacuum_under_a_held_snapshot(
    tmp_path: Path, live: int
) -> None:
    """A worker's heartbeat renews the leases of the attempts it runs (renew_leases) and reads
    their states back (lease_states). After the vacuum, joined to its batch of leases, each
    walked the whole primary key, and a status condition beside the keys could walk the
    running entries of duetime_jobs_status, dead ones included: 18 and 7 ms a heartbeat at
    40,000 claimed jobs, against 0.2 and 0.1. Both must read their jobs by key only, and the
    heartbeat must still renew what it holds and nothing else."""
    with vacuumed_under_a_held_snapshot(tmp_path, live=live) as store:
        claims = store.claim(worker_id="w", queues=None, limit=10, now=NOW)
        assert len(claims) == 10
        ended = claims[0]
        assert store.finish_many([(ended.lease, SUCCEED)], NOW) == [True]
        later = NOW + timedelta(seconds=7)
        notes = explained_from_now(store)
        states = store.heartbeat([c.lease for c in claims], later)
    assert [s.held for s in states] == [False] + [True] * 9  # the one that ended: lost
    renewed = later + timedelta(seconds=DEFAULT_LEASE_SECONDS)
    assert {s.lease_expires_at for s in states[1:]} == {renewed}
    plans = [n for n in notes if "json_to_recordset" in n]
    assert len(plans) == 2, notes  # renew_leases, lease_states
    for plan in plans:
        assert unconditioned_job_scans(plan) == [], plan
        assert "duetime_jobs_status" not in plan, plan


@pytest.mark.parametrize("queues", [None, ["default"]], ids=["all queues", "named queues"])
def test_an_empty_claim_from_its_floor_reads_no_entry_below_it_under_a_held_snapshot(
    tmp_path: Path, queues: list[str] | None
) -> None:
    """Under a transaction held open, the entries of every job claimed since it began stay in
    the claim-order index. A claim that finds nothing due from its floor on (two workers
    woken by the same enqueue: one takes the jobs, the other finds none) sought its classes
    with the floor a filter, not a bound (PostgreSQL 15 bounds a walk by due_at only within
    one priority): its seek stepped over every entry of the class, all the hold had kept,
    2.2 ms at 100,000 claimed jobs (docs/performance.md, "The seeks between the known
    classes"). Naming the classes it saw lately, it seeks only between them: the claim must
    read a few pages, not the entries below its floor (20,000 of them, about 80 pages)."""
    url = kit_named("postgres").fresh_url(tmp_path, drop=True)
    long_ago = NOW - timedelta(hours=1)
    with one_connection(url) as store, held_snapshot(url):
        claimed_and_finished(store, queues, 8, long_ago)
        notes = explained_from_now(store, analyze=True)
        plan = ClaimPlan(floor=NOW - timedelta(seconds=1))
        got = store.claim_planned(plan, worker_id="w", queues=queues, limit=16, now=NOW)
        assert got.claims == []
    [claim] = [n for n in notes if "UPDATE duetime_jobs AS j" in n]  # claim, claim_queues
    # the first counts of the plan are its top node's: the whole statement's
    first = re.search(r"Buffers: shared hit=(\d+)(?: read=(\d+))?", claim)
    assert first is not None, claim
    assert int(first[1]) + int(first[2] or 0) < 30, claim


@pytest.mark.parametrize("queues", [None, ["default"]], ids=["all queues", "named queues"])
def test_the_timers_look_ahead_reads_no_entry_below_now_under_a_held_snapshot(
    tmp_path: Path, queues: list[str] | None
) -> None:
    """The timer's look at the next seconds (Store.next_due) seeks the priority classes with a
    job due from now on, as an empty claim does from its floor: under a transaction held open
    it stepped over every entry of the class the hold kept (docs/performance.md, "The
    reaper's turn"). It names the classes the store's claims saw lately, as a claim does:
    it must read a few pages, not the 20,000 entries due before now (about 80 pages). A
    job due within the look ends the seek's walk of its class at once; none is here."""
    url = kit_named("postgres").fresh_url(tmp_path, drop=True)
    long_ago = NOW - timedelta(hours=1)
    with one_connection(url) as store, held_snapshot(url):
        claimed_and_finished(store, queues, 8, long_ago)
        notes = explained_from_now(store, analyze=True)
        # nothing due ahead: a seek that walks the class from its latest entry (a job due
        # ahead would end it at once) steps over every entry the hold kept
        assert store.next_due(NOW, NOW + timedelta(seconds=10), queues, 100) == []
    [look] = [n for n in notes if "WITH RECURSIVE up" in n and "UPDATE" not in n]
    first = re.search(r"Buffers: shared hit=(\d+)(?: read=(\d+))?", look)
    assert first is not None, look
    assert int(first[1]) + int(first[2] or 0) < 30, look


@LIVE_AT_THE_VACUUM
def test_the_deadlines_expiry_reads_only_jobs_with_a_deadline_after_a_vacuum_under_a_held_snapshot(
    tmp_path: Path, live: int
) -> None:
    """The reaper's pass expires the waiting jobs past their deadline (expire_overdue). Under a
    transaction held open, the claim-order index keeps an entry of every job claimed since it
    began; after a vacuum that found the table (all but) empty, a pick whose plan sorts is a
    coin toss between the small index of the waiting jobs with a deadline (then sorted) and a
    walk of the claim-order index (then sorted): in the pressure benchmark's hold it walked,
    20 to 66 ms and up to 10,587 buffers a call (docs/performance.md, "The deadlines' expiry
    under the hold"). Here the costs fall the other way, so the plan is held to its form: an
    ordered walk of the index of jobs with a deadline, nothing sorted (with sorting off, the
    only plan not disabled), and the update by key; the job past its deadline expires, the
    other stays."""
    with vacuumed_under_a_held_snapshot(tmp_path, live=live) as store:
        late, later = (
            build_new_job("t", {}, now=NOW, tenant="default", defaults=TaskDefaults(), deadline=at)
            for at in (NOW + timedelta(seconds=1), NOW + timedelta(hours=1))
        )
        ids = [e.job.id for e in store.enqueue([late, later], NOW)]
        notes = explained_from_now(store, analyze=True)
        assert store.expire_overdue(NOW + timedelta(seconds=2), 100) == 1
        statuses = [store.get_job(i).status for i in ids]  # type: ignore[union-attr]
        assert statuses == [JobStatus.EXPIRED, JobStatus.SCHEDULED]
    [plan] = [n for n in notes if "deadline_at" in n and "UPDATE duetime_jobs" in n]
    indexes = set(re.findall(r"Scan(?: Backward)? using (\w+) on duetime_jobs ", plan))
    indexes |= set(re.findall(r"Bitmap Index Scan on (\w+)", plan))
    assert indexes == {"duetime_jobs_deadline", "duetime_jobs_pkey"}, plan
    assert "Index Scan using duetime_jobs_deadline on duetime_jobs " in plan, plan
    assert "Sort" not in plan and "Seq Scan on duetime_jobs " not in plan, plan
    assert unconditioned_job_scans(plan) == [], plan
