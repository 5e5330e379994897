"""Claims stay fast with a large backlog: with many jobs scheduled far in the future and many
finished ones kept, the claim statement still reads only the due rows through the claim-order
index (no sequential scan, no sort of the backlog). Checked with each database's EXPLAIN on
the store's own connection (its session settings apply), at a backlog large enough for the
planners to prefer a bad plan if one were available; on PostgreSQL, a statement the store
prepares is checked in the plan it runs with, as auto_explain reports it (postgres_executed:
the claim's is a generic plan, which an EXPLAIN with its parameters would not show)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager, suppress
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from conftest import STORE_KINDS
from duetime.core.flow.share import PRIORITY_TOP
from duetime.core.models import JobFilter
from duetime.core.outbox import DISPATCH_HOLDER, Dispatch
from duetime.core.states import Event, JobStatus
from duetime.store import open_store
from duetime.store.base import Store
from duetime.store.driver import Rows
from duetime.store.rows import moves_json
from duetime.store.sql.shared import claim_statement
from history import columns
from kit import DialectKit, kit_named

BACKLOG = 100_000  # future jobs, and as many finished ones
NOW = datetime(2026, 6, 1, tzinfo=UTC)


@pytest.fixture(params=STORE_KINDS, scope="module")
def kit(request: pytest.FixtureRequest) -> DialectKit:
    return kit_named(request.param)


@pytest.fixture(scope="module")
def filled(
    kit: DialectKit, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, list[str]]]:
    """One database per dialect for the module, filled once (the fill dominates each test's
    time); with the tables that were empty after the fill, which reset() empties again."""
    url = kit.fresh_url(tmp_path_factory.mktemp("plans"))
    store = open_store(url)
    store.migrate()
    store.close()
    # SQLite: no ANALYZE, as in a store's own file (duetime never runs it). Its connections
    # read sqlite_stat1 when they open; before this module shared its database, each test's
    # store opened before the fill's ANALYZE and planned without statistics too. (With them,
    # SQLite plans the claim of "every queue, any task" with a sort: see docs/stores.md.)
    fill(kit, url, analyze=kit.name != "sqlite")
    with closing(kit.connect(url)) as conn:
        cur = conn.cursor()
        empty = []
        for table in kit.tables(url):
            cur.execute(f"SELECT COUNT(*) FROM {table}")
            if cur.fetchall()[0][0] == 0:
                empty.append(table)
    yield url, empty
    if kit.name == "mysql":  # the next test's fresh_url would delete the rows one by one
        with closing(kit.connect(url)) as conn:
            cur = conn.cursor()
            cur.execute("SET FOREIGN_KEY_CHECKS = 0")
            cur.execute("TRUNCATE TABLE duetime_jobs")
            cur.execute("TRUNCATE TABLE duetime_jobs_done")


@pytest.fixture
def backlog(kit: DialectKit, filled: tuple[str, list[str]]) -> Iterator[Store]:
    """The module's filled database as the fill left it (what a test claimed or set is
    undone), through a store of its own (no cached controls carried between tests)."""
    url, empty = filled
    reset(kit, url, empty)
    store = open_store(url)
    yield store
    store.close()


COLUMNS = (
    "id, tenant, queue, task, args, priority, due_at, status, max_attempts, retry_base, "
    "retry_cap, lease_seconds, request_hash, business_key, created_at, updated_at"
)
# rows numbered n = first .. first + count - 1; parameters: first, count, due_at, status, at
FILL = {
    "sqlite": "INSERT INTO duetime_jobs ({c}) WITH RECURSIVE s(n) AS (SELECT ?1 UNION ALL "
    "SELECT n + 1 FROM s WHERE n < ?1 + ?2 - 1) SELECT n, 'default', 'default', 't', '{{}}', 0, "
    "?3, ?4, 3, 1, 60, 30, '', 'default/t:' || n, ?5, ?5 FROM s",
    "postgres": "INSERT INTO duetime_jobs ({c}) SELECT n, 'default', 'default', 't', '{{}}', 0, "
    "%(due)s, %(status)s, 3, 1, 60, 30, '', 'default/t:' || n, %(at)s, %(at)s "
    "FROM generate_series(%(first)s::bigint, %(first)s::bigint + %(count)s - 1) AS n",
    "mysql": "INSERT INTO duetime_jobs ({c}) SELECT %(first)s + k - 1, 'default', 'default', "
    "'t', '{{}}', 0, %(due)s, %(status)s, 3, 1, 60, 30, '', CONCAT('default/t:', k), %(at)s, "
    "%(at)s FROM JSON_TABLE(CONCAT('[', REPEAT('0,', %(count)s - 1), '0]'), '$[*]' "
    "COLUMNS (k FOR ORDINALITY)) AS t",
}
# one succeeded attempt of each succeeded job of the fill (the history a drain leaves): where
# successes stay on their jobs' rows (migration 24), the second half's are there (rows
# written as such: copies of the first half's jobs with their attempt columns), and the first
# half's are in the attempts table, as written before migration 24; elsewhere (MariaDB/MySQL)
# every one is in the attempts table
ON_ROWS_FIRST = BACKLOG + BACKLOG // 2 + 1
FILL_ON_ROWS = (
    f"INSERT INTO duetime_jobs ({COLUMNS}, attempt_id, generation, claim_token, worker_id, "
    f"lease_expires_at, started_at) SELECT id + {BACKLOG // 2}, tenant, queue, task, args, "
    "priority, due_at, status, max_attempts, retry_base, retry_cap, lease_seconds, "
    f"request_hash, business_key, created_at, updated_at, id + {4 * BACKLOG}, 1, id, 'gone', "
    "updated_at, updated_at FROM duetime_jobs WHERE status = 'succeeded'"
)
FILL_ATTEMPTS = (
    "INSERT INTO duetime_attempts (job_id, generation, claim_token, worker_id, status, "
    "lease_expires_at, started_at, finished_at, due_at) "
    "SELECT id, 1, id, 'gone', 'succeeded', updated_at, updated_at, updated_at, due_at "
    "FROM duetime_jobs WHERE status = 'succeeded' AND attempt_id IS NULL"
)
# half the succeeded jobs (those of even id: of each kind above) in the history table, as
# once they have moved (docs/history-plan.md); the columns are the history table's (every
# stored column of a job)
MOVE = (
    "INSERT INTO duetime_jobs_done ({c}) SELECT {c} FROM duetime_jobs "
    "WHERE status = 'succeeded' AND id % 2 = 0",
    "DELETE FROM duetime_jobs WHERE status = 'succeeded' AND id % 2 = 0",
)
ANALYZE = {
    "sqlite": "ANALYZE",
    "postgres": "ANALYZE duetime_jobs, duetime_jobs_done, duetime_attempts",
    "mysql": "ANALYZE TABLE duetime_jobs, duetime_jobs_done, duetime_attempts",
}


def fill(kit: DialectKit, url: str, *, analyze: bool = True, only_due: bool = False) -> None:
    """BACKLOG jobs due a year from NOW, BACKLOG succeeded long ago with an attempt each, 50
    due now (only_due: those 50 alone)."""
    past = kit.instant(NOW - timedelta(days=30))
    on_rows = kit.successes_on_rows
    batches = [
        (1, BACKLOG, kit.instant(NOW + timedelta(days=365)), "scheduled"),
        (BACKLOG + 1, BACKLOG // 2 if on_rows else BACKLOG, past, "succeeded"),
        (DUE_FIRST, 50, kit.instant(NOW - timedelta(seconds=1)), "scheduled"),
    ][2 if only_due else 0 :]
    with closing(kit.connect(url)) as conn:
        cur = conn.cursor()
        for first, count, due, status in batches:
            sql = FILL[kit.name].format(c=COLUMNS)
            if kit.name == "sqlite":
                cur.execute(sql, (first, count, due, status, past))
            else:
                params = {"first": first, "count": count, "due": due, "status": status}
                cur.execute(sql, {**params, "at": past})
        if not only_due:
            if on_rows:
                cur.execute(FILL_ON_ROWS)
            cur.execute(FILL_ATTEMPTS)
            stored = ", ".join(columns(kit, url, "duetime_jobs_done"))
            for statement in MOVE:
                cur.execute(statement.format(c=stored))
        if analyze:
            cur.execute(ANALYZE[kit.name])
            if kit.name == "mysql":
                cur.fetchall()


DUE_FIRST = 2 * BACKLOG + 1  # the ids of the 50 due jobs start here


def reset(kit: DialectKit, url: str, empty: list[str]) -> None:
    """Undo a test's writes: empty the tables the fill left empty (attempts, settings...),
    and put the 50 due jobs back as the fill wrote them."""
    with closing(kit.connect(url)) as conn:
        cur = conn.cursor()
        if kit.name == "mysql":
            cur.execute("SET FOREIGN_KEY_CHECKS = 0")
        for table in empty:
            cur.execute(f"DELETE FROM {table}")
        cur.execute(f"DELETE FROM duetime_attempts WHERE job_id >= {DUE_FIRST}")
        cur.execute(f"DELETE FROM duetime_jobs WHERE id >= {DUE_FIRST}")
    fill(kit, url, analyze=False, only_due=True)


def claim_params(all_queues: bool, tasks: list[str] | None = None) -> dict[str, Any]:
    return {
        "now": NOW,
        "limit": 10,
        "all_queues": all_queues,
        "queues": [] if all_queues else ["default"],
        "all_tasks": tasks is None,
        "tasks": tasks or [],
        "moves": moves_json(Event.CLAIM),
        "worker_id": "plan-test",
        "all_direct": True,  # no queue in outbox mode: the common case
        "outbox_queues": [],
        "floor": None,  # a walk from the start (a worker's floor: core/claim_floor.py)
        "known": [],  # every class sought (Claimer.known_classes)
    }


def explain(store: Store, name: str, params: dict[str, Any]) -> str:
    """The plan of the named statement's pick (the first statement that reads the jobs)."""
    driver = store.driver  # type: ignore[attr-defined]
    if name in TAKES_CLASSES:
        params = with_classes(store, params)
    statements = [s for s in driver.statements(name) if "duetime_jobs" in s]
    if store.dialect == "postgres" and statements[0] in driver._prepared:
        return postgres_executed(store, name, params, analyze=False)
    with driver.transaction() as c:
        encoded = driver.encode(params)
        if store.dialect == "postgres":
            for setting in driver.statements(name):  # what runs before it (SET LOCAL ...)
                if setting == statements[0]:
                    break
                driver.execute(c.native, setting, {})
            rows, _ = driver.execute(c.native, "EXPLAIN (FORMAT JSON) " + statements[0], encoded)
            return json.dumps(rows[0]["QUERY PLAN"])
        if store.dialect == "sqlite":
            pick = next(s for s in statements if s.startswith("INSERT INTO temp.duetime_claim"))
            select = pick.split("\n", 1)[1]
            rows, _ = driver.execute(c.native, "EXPLAIN QUERY PLAN " + select, encoded)
            return "\n".join(str(tuple(r)) for r in rows)
        pick = next(s for s in statements if s.startswith("INSERT INTO duetime_claim"))
        select = pick.split("\n", 1)[1]
        rows, _ = driver.execute(c.native, "EXPLAIN FORMAT=JSON " + select, encoded)
        return str(next(iter(rows[0].values())))


def claim_pick(plan: str) -> dict[str, Any]:
    """PostgreSQL: the claim's pick (a branch whose condition is false for these parameters
    has no scan in it: a one-time filter stands for it)."""
    return subplan(json.loads(plan)[0]["Plan"], "CTE picked")


def job_scans(node: dict[str, Any]) -> list[str]:
    """The scans of duetime_jobs under `node`: each index's name, or the node type."""
    found = []
    if node.get("Relation Name") == "duetime_jobs":
        found.append(node.get("Index Name") or node["Node Type"])
    for child in node.get("Plans", []):
        found += job_scans(child)
    return found


def sorted_scans(node: dict[str, Any], sorting: bool = False) -> list[str]:
    """The scans of duetime_jobs whose rows a sort reads without a limit between them: a sort
    of everything the scan yields (a sort above a limit reads `limit` rows at most)."""
    kind = node.get("Node Type")
    sorting = (sorting or kind == "Sort") and kind != "Limit"
    found = []
    if sorting and node.get("Relation Name") == "duetime_jobs":
        found.append(node.get("Index Name") or kind)
    for child in node.get("Plans", []):
        found += sorted_scans(child, sorting)
    return found


def sorts(plan: str | dict[str, Any]) -> list[list[str]]:
    """The sort keys of the sorts of a PostgreSQL JSON plan (or of one of its nodes), but the
    one of the part `classes` (its few priority classes put highest first: they are found
    going up)."""
    found = []

    def walk(node: dict[str, Any]) -> None:
        if node.get("Node Type") == "Sort" and node.get("Sort Key") != ["up.priority DESC"]:
            found.append(node.get("Sort Key", []))
        for child in node.get("Plans", []):
            walk(child)

    for root in json.loads(plan) if isinstance(plan, str) else [{"Plan": plan}]:
        walk(root["Plan"])
    return found


def subplan(node: dict[str, Any], name: str) -> dict[str, Any]:
    """The node of a PostgreSQL JSON plan called `name` (a CTE's init plan)."""
    if node.get("Subplan Name") == name:
        return node
    for child in node.get("Plans", []):
        found = subplan(child, name)
        if found:
            return found
    return {}


@pytest.mark.parametrize("tasks", [None, ["t", "other"]], ids=["any task", "its tasks"])
@pytest.mark.parametrize("all_queues", [True, False], ids=["every queue", "one queue"])
def test_a_claim_reads_only_due_rows_through_its_index(
    backlog: Store, all_queues: bool, tasks: list[str] | None
) -> None:
    """A worker's claim names the tasks it has handlers for: the same plan (the task is a
    filter on the due rows the index yields in claim order)."""
    statement = claim_statement(None if all_queues else ["default"])  # as SQLStore.claim does
    plan = explain(backlog, statement, claim_params(all_queues, tasks))
    if backlog.dialect == "postgres":
        pick = claim_pick(plan)
        # one index walk, stopped by the limit (the one queue's branch: either index, as the
        # statistics say; here every due job is that queue's)
        assert len(job_scans(pick)) == 1 and sorted_scans(pick) == [], pick
        assert job_scans(pick)[0].startswith("duetime_jobs_due"), pick
    elif backlog.dialect == "sqlite":
        # three branches, one runs: every queue and one queue read in index order; only the
        # branch for several queues merges them with a sort
        assert plan.count("TEMP B-TREE") == 1, plan
        assert plan.index("LIST SUBQUERY") < plan.index("TEMP B-TREE"), plan
        assert (
            "SEARCH duetime_jobs USING INDEX duetime_jobs_due_any (priority=? AND due_at<?)" in plan
        ), plan
        assert (
            "SEARCH duetime_jobs USING INDEX duetime_jobs_due (queue=? AND priority=? AND due_at<?)"
            in plan
        ), plan
    else:  # two branches: the one that runs reads its claim-order index, no sort
        assert "filesort" not in plan.lower(), plan
        index = "duetime_jobs_due_any" if all_queues else "duetime_jobs_due"
        assert f'"key": "{index}"' in plan and "Impossible WHERE" in plan, plan
    claims = backlog.claim(
        worker_id="w", queues=None if all_queues else ["default"], limit=100, now=NOW, tasks=tasks
    )
    assert len(claims) == 50  # and the claim takes exactly the due ones


# the most pages a read of the 50 due rows may visit (strictly fewer): each row's heap page
# (rows of different widths leave pages with room for one more, which the free space map
# hands to the inserts of reset(), so the 50 can lie on 50 pages: the fill's successes kept
# on their rows are wider, migration 24), and the index walks' and the class seeks' some 10
# to 20; walking on through the jobs due later read some 500
DUE_ROW_PAGES = 50 + 30


def scan_reads(node: dict[str, Any]) -> tuple[int, int]:
    """PostgreSQL EXPLAIN (ANALYZE, BUFFERS): the pages the scans of duetime_jobs under `node`
    read (shared hits and reads: index pages and the heap pages of the rows they yield, each
    visit counted) and the rows they threw away."""
    pages = removed = 0
    if node.get("Relation Name") == "duetime_jobs" and "Scan" in node["Node Type"]:
        pages = node.get("Shared Hit Blocks", 0) + node.get("Shared Read Blocks", 0)
        removed = node.get("Rows Removed by Filter", 0) * node.get("Actual Loops", 1)
    for child in node.get("Plans", []):
        more = scan_reads(child)
        pages, removed = pages + more[0], removed + more[1]
    return pages, removed


@pytest.mark.parametrize("all_queues", [True, False], ids=["every queue", "one queue"])
def test_a_claim_with_fewer_due_jobs_than_its_limit_stops_at_the_due_ones(
    filled: tuple[str, list[str]], backlog: Store, all_queues: bool
) -> None:
    """A claim whose limit is above the due jobs' count (a trickle: every claim of a quiet
    worker): its pick reads each priority class's due rows alone, not on through the entries
    of the jobs due later (BACKLOG of them, a year away: the claim-order index's later pages).
    None of the three has a skip scan: PostgreSQL's pick walks the classes itself; SQLite's
    and MariaDB/MySQL's are given them (Claimer.due_classes, a seek each). Measured by running
    the pick: PostgreSQL's pages read, MariaDB/MySQL's rows read (ANALYZE), SQLite's virtual
    machine steps; each stays far below what the walk on through the backlog reads."""
    queues = None if all_queues else ["default"]
    params = {**claim_params(all_queues), "limit": 100}  # 50 due
    name = claim_statement(queues)
    if backlog.dialect == "sqlite":
        steps = sqlite_steps(backlog, name, params)
        assert steps < 20_000, steps  # the walk on through the backlog: some 2,000,000
    elif backlog.dialect == "mysql":
        read = mysql_rows_read(backlog, name, params)
        assert read <= 100, read  # the walk on through the backlog: 100,050
    else:
        pick = claim_pick(
            postgres_analyzed(kit_named("postgres"), filled[0], backlog, name, params)
        )
        pages, removed = scan_reads(pick)
        got = pick.get("Actual Rows")
        assert got == 50  # the claim took the due jobs (and only them)
        # the backlog's entries fill some 400 pages of either index (the one walk on through
        # them read 500 pages); the due rows' walks and the seeks of the classes, some 10 to
        # 20, and the due rows' heap pages (up to 50: DUE_ROW_PAGES)
        assert pages < DUE_ROW_PAGES and removed == 0, (pages, removed)
    claims = backlog.claim(worker_id="w", queues=queues, limit=100, now=NOW)
    assert len(claims) == 50  # and the claim takes exactly the due ones


def flood(kit: DialectKit, url: str, due: datetime) -> None:
    """PostgreSQL: DEAD_HEAD scheduled jobs due at `due`, from FLOOD_FIRST on (reset()
    deletes them)."""
    _run(
        kit,
        url,
        FILL["postgres"].format(c=COLUMNS),
        {"first": FLOOD_FIRST, "count": DEAD_HEAD, "due": due, "status": "scheduled", "at": due},
    )


@contextmanager
def moved_under_an_old_snapshot(kit: DialectKit, url: str, status: str) -> Iterator[None]:
    """The flood's jobs moved to `status` (as claims or finishes move them) while a snapshot
    taken before holds, for the block: their index entries are dead, yet none can be removed
    or marked dead."""
    with closing(kit.connect(url)) as old:
        old.autocommit = False
        cur = old.cursor()
        cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        cur.execute("SELECT count(*) FROM duetime_jobs WHERE id >= %s", (FLOOD_FIRST,))
        cur.fetchall()
        _run(
            kit,
            url,
            "UPDATE duetime_jobs SET status = %s WHERE id >= %s AND id < %s",
            (status, FLOOD_FIRST, FLOOD_FIRST + DEAD_HEAD),
        )
        try:
            yield
        finally:
            old.rollback()


DEAD_HEAD = 20_000  # jobs claimed since the last vacuum, under a snapshot older than that


def test_the_class_seeks_land_on_live_entries_past_a_dead_head(
    kit: DialectKit, filled: tuple[str, list[str]], backlog: Store
) -> None:
    """PostgreSQL: the entries of the jobs claimed since the last vacuum lie at the head of
    each class's range of the claim-order index (due earliest), dead; while a transaction as
    old as them holds its snapshot (a held transaction, a long count), none of them can be
    marked dead and a walk from the head reads each one's row. The part classes' seeks go up
    from the lowest class and land on each class's last entry, so they read a few pages
    whatever lies at the head (going down from the highest, some 400 here)."""
    if backlog.dialect != "postgres":
        pytest.skip("PostgreSQL: SQLite and MariaDB/MySQL are given the classes (a seek each)")
    url = filled[0]
    flood(kit, url, NOW - timedelta(days=1))
    with moved_under_an_old_snapshot(kit, url, "succeeded"):
        params = {**claim_params(True), "limit": 10}
        plan = json.loads(postgres_analyzed(kit, url, backlog, "claim", params))[0]["Plan"]
    seeks = subplan(plan, "CTE up")  # the part classes' seeks
    pages = seeks.get("Shared Hit Blocks", 0) + seeks.get("Shared Read Blocks", 0)
    assert seeks and pages < 20, (pages, seeks)


DEAD_TAIL_CLASS = 7  # a class whose every entry is a claimed job's


def test_a_claim_from_a_floor_steps_over_a_dead_class_in_the_index_alone(
    kit: DialectKit, filled: tuple[str, list[str]], backlog: Store
) -> None:
    """PostgreSQL: a class whose due jobs were all claimed under a snapshot older than their
    claims (a transaction held open) keeps an entry for each, dead yet not removable, and its
    last entries are among them: the classes' seeks land there and read each entry's row
    back to the class's first. A claim given a floor (a worker's, core/claim_floor.py) bounds
    its seeks and walks by it: the entries due before it are stepped over in the index, no
    row read. The same claim from the start reads every one of them (the control)."""
    if backlog.dialect != "postgres":
        pytest.skip("PostgreSQL: the other dialects take no floor (Driver.names_classes)")
    url = filled[0]
    flood(kit, url, NOW - timedelta(seconds=60))
    _run(
        kit,
        url,
        "UPDATE duetime_jobs SET priority = %s WHERE id >= %s",
        (DEAD_TAIL_CLASS, FLOOD_FIRST),
    )
    _run(kit, url, "VACUUM duetime_jobs", None)  # the class 0 entries of those rows: gone
    reads = {}
    with moved_under_an_old_snapshot(kit, url, "running"):
        for floor in (None, NOW - timedelta(seconds=2)):
            params = {**claim_params(True), "limit": 10, "floor": floor}
            plan = json.loads(postgres_analyzed(kit, url, backlog, "claim", params))[0]["Plan"]
            seeks = subplan(plan, "CTE up")  # the part floored_classes' seeks
            reads[floor is not None] = heap_fetches(plan), heap_fetches(seeks)
    # from the start: a row read for each claimed job's entry (the seek of its class)
    assert reads[False][1] >= DEAD_HEAD, reads
    # from the floor: none of them (the 10 jobs it takes are read by the pick, not the
    # seeks). A seek may still read the row of the live entry it lands on when its heap page
    # is not all-visible yet (the fresh CI run of 2026-12-05, beside other tests: 1 read), so
    # a few are allowed, against the 20,000 of the walk from the start
    assert reads[True][1] <= 5 and reads[True][0] <= 50, reads


def heap_fetches(node: dict[str, Any]) -> int:
    """PostgreSQL EXPLAIN ANALYZE: the rows the index-only scans under `node` read from the
    heap, over all their loops (an entry whose heap page is not all-visible: a dead one under
    an old snapshot among them)."""
    return node.get("Heap Fetches", 0) + sum(heap_fetches(child) for child in node.get("Plans", []))


def test_the_relays_dispatch_with_fewer_due_jobs_than_its_limit_stops_at_the_due_ones(
    backlog: Store,
) -> None:
    """The relay's dispatch (every 0.1 s while it runs) with the backlog's queue in outbox mode
    and a limit above its 50 due jobs: SQLite's pick reads each priority class's due rows of
    the outbox-mode queues (it took the status index and sorted every scheduled job before)
    and MariaDB/MySQL's reads the due rows alone. (PostgreSQL's walks the classes itself:
    test_reads_of_every_due_job_walk_each_priority_class.)"""
    if backlog.dialect == "postgres":
        pytest.skip("PostgreSQL: its class walk is test_reads_of_every_due_job_walk_each_...")
    backlog.set_queue("default", NOW, dispatch=Dispatch.OUTBOX)
    params = {"now": NOW, "limit": 500}
    if backlog.dialect == "sqlite":
        steps = sqlite_steps(backlog, "dispatch_outbox", params)
        assert steps < 20_000, steps
    else:
        read = mysql_rows_read(backlog, "dispatch_outbox", params)
        assert read <= 100, read
    events = backlog.dispatch_outbox(NOW, 500, 300.0)
    assert len(events) == 50  # and the dispatch takes exactly the due ones


TAKES_CLASSES = (
    "claim_pick_limited",
    "claim",
    "claim_queues",
    "dispatch_outbox",
    "claim_candidates",
    "lower_candidates",
)  # where Driver.names_classes


def with_classes(store: Store, params: dict[str, Any]) -> dict[str, Any]:
    """A claim's parameters as the store's plain claim passes them (with the priority classes
    of the scheduled jobs where its dialect's pick takes them)."""
    with store.driver.transaction() as c:  # type: ignore[attr-defined]
        classes = store.claimer.due_classes(c)  # type: ignore[attr-defined]
    return {**params, **classes}


def temp_pick(store: Store, name: str) -> tuple[list[str], str]:
    """SQLite's and MariaDB/MySQL's claims and dispatch: the statements of `name` before its
    pick (they make the temporary table), and the pick (it fills that table, or, read only,
    it is the first statement that reads the jobs)."""
    statements = list(store.driver.statements(name))  # type: ignore[attr-defined]
    inserts = [s for s in statements if s.startswith(("INSERT INTO temp.", "INSERT INTO duetime_"))]
    # a read-only pick (claim_candidates): the first statement that reads the jobs
    pick = inserts[0] if inserts else next(s for s in statements if "duetime_jobs" in s)
    return statements[: statements.index(pick)], pick


def sqlite_steps(store: Store, name: str, params: dict[str, Any]) -> int:
    """SQLite: the virtual machine steps (in hundreds) of the named claim's or dispatch's
    pick, run on the store's own connection and rolled back."""
    driver = store.driver  # type: ignore[attr-defined]
    before, pick = temp_pick(store, name)
    count = [0]

    def step() -> int:
        count[0] += 1
        return 0

    encoded = driver.encode(with_classes(store, params))
    with pytest.raises(RolledBack), driver.transaction() as c:
        for statement in before:
            driver.execute(c.native, statement, encoded)
        c.native.set_progress_handler(step, 100)
        try:
            driver.execute(c.native, pick, encoded)
        finally:
            c.native.set_progress_handler(None, 100)
        raise RolledBack
    return count[0] * 100


def mysql_rows_read(store: Store, name: str, params: dict[str, Any]) -> int:
    """MariaDB/MySQL: the rows of duetime_jobs the named claim's or dispatch's pick read
    (ANALYZE runs it; the transaction is rolled back)."""
    driver = store.driver  # type: ignore[attr-defined]
    before, pick = temp_pick(store, name)
    encoded = driver.encode(with_classes(store, params))
    with pytest.raises(RolledBack), driver.transaction() as c:
        for statement in before:
            driver.execute(c.native, statement, encoded)
        rows, _ = driver.execute(c.native, "ANALYZE FORMAT=JSON " + pick, encoded)
        plan = json.loads(str(next(iter(rows[0].values()))))
        raise RolledBack
    return sum(
        int(t.get("r_rows") or 0) * int(t.get("r_loops") or 0)
        for t in mysql_tables_analyzed(plan)
        if t.get("table_name") in ("duetime_jobs", "j")
    )


def mysql_tables_analyzed(node: Any) -> list[dict[str, Any]]:
    """Every "table" object of a MariaDB ANALYZE FORMAT=JSON plan."""
    found = []
    if isinstance(node, dict):
        if isinstance(node.get("table"), dict):
            found.append(node["table"])
        for value in node.values():
            found += mysql_tables_analyzed(value)
    elif isinstance(node, list):
        for value in node:
            found += mysql_tables_analyzed(value)
    return found


class RolledBack(Exception):
    """Raised in a test's transaction to roll it back."""


def postgres_analyzed(
    kit: DialectKit, url: str, store: Store, name: str, params: dict[str, Any]
) -> str:
    """PostgreSQL: EXPLAIN (ANALYZE, BUFFERS) of a named statement's first statement on the
    jobs, after what runs before it (SET LOCAL); the transaction is rolled back."""
    # the index entries of the rows earlier tests claimed and reset() deleted are gone (each
    # would cost a visit of its dead row's heap page, whatever the walk)
    _run(kit, url, "VACUUM (INDEX_CLEANUP ON) duetime_jobs", None)
    driver = store.driver  # type: ignore[attr-defined]
    statements = list(driver.statements(name))
    read = next(s for s in statements if "duetime_jobs" in s)
    if read in driver._prepared:
        return postgres_executed(store, name, params, analyze=True)
    with pytest.raises(RolledBack), driver.transaction() as c:
        for setting in statements[: statements.index(read)]:
            driver.execute(c.native, setting, {})
        rows, _ = driver.execute(
            c.native, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + read, driver.encode(params)
        )
        raise RolledBack
    return json.dumps(rows[0]["QUERY PLAN"])


def postgres_executed(
    store: Store, name: str, params: dict[str, Any], *, analyze: bool, rolled_back: bool = True
) -> str:
    """PostgreSQL: the plan a statement the store prepares runs with, as auto_explain reports
    it (EXPLAIN of the statement with its parameters would plan it for them: a custom plan,
    where the claim runs the generic plan its connection has cached). The named statements
    run as the store runs them, the read one prepared (a statement that runs to its end in
    one execute: the claims); the transaction is rolled back (which makes psycopg forget the
    connection's prepared statements), or committed where not rolled_back. In the form of
    EXPLAIN (FORMAT JSON)'s, with (ANALYZE, BUFFERS)' counts where analyze. Needs what the
    test server has: a superuser's connection and PostgreSQL's auto_explain module."""
    driver = store.driver  # type: ignore[attr-defined]
    statements = list(driver.statements(name))
    read = next(s for s in statements if "duetime_jobs" in s)
    with suppress(RolledBack), driver.transaction() as c:
        encoded = driver.encode(params)
        for before in statements[: statements.index(read)]:
            driver.execute(c.native, before, encoded)
        [plan] = auto_explained(
            c.native, lambda: c.native.execute(read, encoded, prepare=True), analyze=analyze
        )
        if rolled_back:
            raise RolledBack
    return json.dumps([{"Plan": plan["Plan"]}])


def start_auto_explain(
    native: Any, *, analyze: bool, scope: str = "LOCAL", log_format: str = "json"
) -> None:
    """PostgreSQL: auto_explain on the psycopg connection `native`, sending the plan of every
    statement it runs as a notice, for its transaction (`scope` LOCAL) or its session
    (SESSION); with (ANALYZE, BUFFERS)' counts where analyze."""
    try:
        native.execute("LOAD 'auto_explain'")
    except psycopg.Error as exc:
        pytest.fail(
            "the plan tests read the claims' plans through auto_explain: connect them as "
            f"a superuser to a server with PostgreSQL's contrib modules ({exc})"
        )
    native.execute(f"SET {scope} client_min_messages = notice")
    logged = {"log_min_duration": "0", "log_format": log_format, "log_level": "notice"}
    if analyze:
        logged |= {"log_analyze": "on", "log_buffers": "on", "log_timing": "off"}
    for setting, value in logged.items():
        native.execute(f"SET {scope} auto_explain.{setting} = {value}")


def auto_explained(native: Any, run: Callable[[], object], *, analyze: bool) -> list[Any]:
    """PostgreSQL: the plans of what `run` executes on the psycopg connection `native`, in
    its transaction, as auto_explain reports them (each its JSON: "Query Text", "Plan"; with
    (ANALYZE, BUFFERS)' counts where analyze)."""
    start_auto_explain(native, analyze=analyze)
    notes: list[str] = []

    def note(diagnostic: Any) -> None:
        notes.append(diagnostic.message_primary or "")

    native.add_notice_handler(note)
    try:
        run()
    finally:
        native.remove_notice_handler(note)
    return [json.loads(n.split("\n", 1)[1]) for n in notes if n.startswith("duration")]


FLOOD_FIRST = DUE_FIRST + 50  # a flood due in another queue (reset() deletes it too)


@pytest.mark.parametrize(
    "queues",
    [["quiet"], ["quiet", "calm"], ["q1", "q2", "q3", "quiet"], ["q1", "q2", "q3", "q4", "quiet"]],
    ids=["one", "two", "four", "five"],
)
def test_a_claim_for_quiet_queues_does_not_read_the_due_jobs_of_others(
    kit: DialectKit,
    filled: tuple[str, list[str]],
    backlog: Store,
    queues: list[str],
) -> None:
    """A worker serving queues with nothing due, while thousands of jobs are due in another
    queue: its claim (every poll) seeks its own queues in the queue's claim-order index, not
    the due jobs of every queue filtered one by one (which grows with the other queue's
    backlog). Then, with one job due in its queue, it takes that job."""
    flood = 20_000

    def due_in(queue: str, first: int, count: int) -> None:
        sql = (
            FILL[kit.name]
            .format(c=COLUMNS)
            .replace("'default', 'default'", f"'default', '{queue}'")
        )
        due, past = kit.instant(NOW - timedelta(seconds=5)), kit.instant(NOW - timedelta(days=30))
        params: Any = (first, count, due, "scheduled", past)
        if kit.name != "sqlite":
            params = dict(zip(["first", "count", "due", "status", "at"], params, strict=True))
        _run(kit, url, sql, params)

    url = filled[0]
    due_in("busy", FLOOD_FIRST, flood)
    if kit.name != "sqlite":  # the module's SQLite file stays unanalyzed (see filled)
        _run(kit, url, ANALYZE[kit.name], None)
    params = {**claim_params(False), "queues": queues}
    plan = explain(backlog, claim_statement(queues), params)
    if backlog.dialect == "postgres" and len(queues) > 4:
        # the known limit (docs/workers.md): past 4 named queues, the walk of every due job,
        # filtered (stopped by the limit: no sort of the due rows)
        pick = claim_pick(plan)
        assert job_scans(pick) == ["duetime_jobs_due_any"] and sorted_scans(pick) == [], pick
    elif backlog.dialect == "postgres":  # each queue's own index, each walk stopped by a limit
        # (one walk per priority class; each queue's classes: seeks in the same index)
        pick, root = claim_pick(plan), json.loads(plan)[0]["Plan"]
        assert job_scans(pick) == ["duetime_jobs_due"] * len(queues), pick
        for k in range(1, len(queues) + 1):
            classes = job_scans(subplan(root, f"CTE up_{k}"))
            assert set(classes) == {"duetime_jobs_due"}, plan
        assert sorted_scans(pick) == [], pick
    elif backlog.dialect == "sqlite":
        assert (
            "SEARCH duetime_jobs USING INDEX duetime_jobs_due (queue=? AND priority=? AND due_at<?)"
            in plan
        ), plan
    else:
        assert '"key": "duetime_jobs_due"' in plan, plan
    assert backlog.claim(worker_id="w", queues=queues, limit=10, now=NOW) == []
    due_in(queues[-1], FLOOD_FIRST + flood, 1)
    claims = backlog.claim(worker_id="w", queues=queues, limit=10, now=NOW)
    assert [c.job.queue for c in claims] == [queues[-1]]


def _run(kit: DialectKit, url: str, sql: str, params: Any) -> None:
    """One raw statement with its own placeholders (not `?`), its rows (if any) read."""
    with closing(kit.connect(url)) as conn:
        cur = conn.cursor()
        if params is None:
            cur.execute(sql)
        else:
            cur.execute(sql, params)
        if cur.description is not None:
            cur.fetchall()


def test_a_claim_keeps_its_plan_while_a_queue_is_in_outbox_mode(backlog: Store) -> None:
    """With a queue in outbox mode the claim leaves its jobs out by a filter on the due rows
    its index yields: the same plan as with none (docs/outbox.md)."""
    params = {
        **claim_params(True, ["t", "other"]),
        "all_direct": False,
        "outbox_queues": ["broker"],
    }
    plan = explain(backlog, "claim", params)
    if backlog.dialect == "postgres":
        pick = claim_pick(plan)
        assert job_scans(pick) == ["duetime_jobs_due_any"] and sorted_scans(pick) == [], pick
    elif backlog.dialect == "sqlite":
        assert (
            "SEARCH duetime_jobs USING INDEX duetime_jobs_due_any (priority=? AND due_at<?)" in plan
        ), plan
    else:
        assert "filesort" not in plan.lower(), plan
        assert '"key": "duetime_jobs_due_any"' in plan, plan


def candidate_params(all_queues: bool) -> dict[str, Any]:
    return {
        "now": NOW,
        "limit": 40,
        "all_queues": all_queues,
        "queues": [] if all_queues else ["default"],
        "all_tasks": True,
        "tasks": [],
        "open_queues": False,
        "skip_queues": ["paused"],
        "open_tenants": False,
        "skip_tenants": ["full"],
        "no_skip_ids": False,
        "skip_ids": [1, 2],
        "blocked": '["\\"api\\""]',  # a limit key that allows no start (store/sql/limits.py)
        "retry_blocked": "[]",
        "floor": None,  # the candidates' walks from the start (a worker's floor: ClaimPlan.floor)
        "known": [],  # every class sought (Claimer.known_classes)
    }


@pytest.mark.parametrize(
    "name",
    [
        "claim_candidates",
        "lower_candidates",
        "claim_pick_limited",
        "queue_candidates",
        "tenant_candidates",
    ],
)
def test_a_controlled_pick_with_fewer_due_jobs_than_its_limit_stops_at_the_due_ones(
    filled: tuple[str, list[str]], backlog: Store, name: str
) -> None:
    """The controlled claim's reads (queue or tenant caps, weights, rotation; the relay's
    dispatch under them), the priority reservation's and the limited claim's (limits per
    dependency), and the probes of one weighted queue or tenant or of a tenant in rotation,
    with a limit above the 50 due jobs:
    each reads the due rows of each priority class alone, as the plain claim does, not on
    through the 100,000 jobs due later (PostgreSQL: some 500 pages before it walked the
    classes). Measured by running the read: SQLite's virtual machine steps, MariaDB/MySQL's
    rows read, PostgreSQL's pages and thrown-away rows."""
    params = {**candidate_params(True), "limit": 100, "skip_ids": [], "no_skip_ids": True}
    if name == "lower_candidates":
        params = {**params, "below": PRIORITY_TOP}  # every class below the top: all of them
    if name == "claim_pick_limited":  # the claim's pick while limits per dependency exist
        params = {**params, "skip": "[]", "all_direct": True, "outbox_queues": []}
    if name in ("queue_candidates", "tenant_candidates"):  # the fill's one queue and tenant
        params = {**params, "queue": "default", "tenant": "default"}
    if backlog.dialect == "sqlite":
        steps = sqlite_steps(backlog, name, params)
        assert steps < 20_000, steps
    elif backlog.dialect == "mysql":
        read = mysql_rows_read(backlog, name, params)
        assert read <= 100, read
    else:
        plan = postgres_analyzed(kit_named("postgres"), filled[0], backlog, name, params)
        pages, removed = scan_reads(json.loads(plan)[0]["Plan"])
        assert pages < DUE_ROW_PAGES and removed == 0, (pages, removed)


@pytest.mark.parametrize("all_queues", [True, False], ids=["every queue", "one queue"])
def test_a_controlled_claim_reads_only_due_rows_through_its_index(
    backlog: Store, all_queues: bool
) -> None:
    """With flow controls (docs/flow-control.md) the claim's candidates come from the same
    claim-order index, the paused/full queues and tenants left out by a filter (SQLite and
    MariaDB/MySQL: one range per priority class, ending at now)."""
    params = with_classes(backlog, candidate_params(all_queues))
    driver = backlog.driver  # type: ignore[attr-defined]
    statements = driver.statements("claim_candidates")
    select = next(s for s in statements if "duetime_jobs" in s)
    with driver.transaction() as c:
        for setting in statements[: statements.index(select)]:  # SET LOCAL enable_sort = off
            driver.execute(c.native, setting, {})
        prefix = {
            "postgres": "EXPLAIN (FORMAT JSON) ",
            "sqlite": "EXPLAIN QUERY PLAN ",
            "mysql": "EXPLAIN FORMAT=JSON ",
        }[backlog.dialect]
        rows, _ = driver.execute(c.native, prefix + select, driver.encode(params))
    if backlog.dialect == "postgres":
        plan = json.dumps(rows[0]["QUERY PLAN"])
        assert "Seq Scan" not in plan and sorts(plan) == [], plan
        assert '"Index Name": "duetime_jobs_due' in plan and '"Limit"' in plan, plan
    elif backlog.dialect == "sqlite":
        plan = "\n".join(str(tuple(r)) for r in rows)
        assert plan.count("TEMP B-TREE") == 1, plan  # only the branch for several queues
        assert "duetime_jobs_due_any (priority=? AND due_at<?)" in plan, plan
        assert "duetime_jobs_due (queue=? AND priority=? AND due_at<?)" in plan, plan
    else:
        plan = str(next(iter(rows[0].values())))
        assert "filesort" not in plan.lower(), plan
        index = "duetime_jobs_due_any" if all_queues else "duetime_jobs_due"
        assert f'"key": "{index}"' in plan, plan
    backlog.set_queue("paused", NOW, paused=True)
    backlog.set_queue("default", NOW, concurrency=30)
    claims = backlog.claim(
        worker_id="w", queues=None if all_queues else ["default"], limit=100, now=NOW
    )
    assert len(claims) == 30  # the cap, over the 50 due


@pytest.mark.parametrize("name", ["queue_candidates", "tenant_candidates"])
def test_a_weighted_probe_reads_one_queue_or_tenant_through_an_index(
    backlog: Store, name: str
) -> None:
    """The probes for weighted queues and tenants behind a flood (docs/flow-control.md) read
    their own rows through an index: never a scan of the whole table."""
    params = with_classes(
        backlog, {**candidate_params(True), "queue": "default", "tenant": "default", "limit": 10}
    )
    driver = backlog.driver  # type: ignore[attr-defined]
    statements = driver.statements(name)
    select = next(s for s in statements if "duetime_jobs" in s)
    prefix = {
        "postgres": "EXPLAIN (FORMAT JSON) ",
        "sqlite": "EXPLAIN QUERY PLAN ",
        "mysql": "EXPLAIN FORMAT=JSON ",
    }[backlog.dialect]
    with driver.transaction() as c:
        for setting in statements[: statements.index(select)]:  # SET LOCAL enable_sort = off
            driver.execute(c.native, setting, {})
        rows, _ = driver.execute(c.native, prefix + select, driver.encode(params))
    index = "duetime_jobs_due" if name == "queue_candidates" else "duetime_jobs_tenant_due"
    if backlog.dialect == "postgres":
        plan = json.dumps(rows[0]["QUERY PLAN"])
        # every row of this backlog is of one tenant and queue: any index will do
        assert "Seq Scan" not in plan and '"Index Name": "duetime_jobs_' in plan, plan
    elif backlog.dialect == "sqlite":
        plan = "\n".join(str(tuple(r)) for r in rows)
        assert f"USING INDEX {index}" in plan, plan
    else:
        plan = str(next(iter(rows[0].values())))
        assert f'"key": "{index}"' in plan, plan


@pytest.mark.parametrize("below", [PRIORITY_TOP, 0], ids=["highest class", "lower classes"])
@pytest.mark.parametrize("all_queues", [True, False], ids=["every queue", "one queue"])
def test_a_priority_reservation_reads_only_due_rows_through_its_index(
    backlog: Store, all_queues: bool, below: int
) -> None:
    """The lower classes' read of a claim that reserves their share (docs/flow-control.md,
    "Priorities") walks the claim-order index from `priority < below`: no sort, no scan."""
    params = with_classes(backlog, {**candidate_params(all_queues), "below": below, "limit": 2})
    driver = backlog.driver  # type: ignore[attr-defined]
    statements = driver.statements("lower_candidates")
    select = next(s for s in statements if "duetime_jobs" in s)
    prefix = {
        "postgres": "EXPLAIN (FORMAT JSON) ",
        "sqlite": "EXPLAIN QUERY PLAN ",
        "mysql": "EXPLAIN FORMAT=JSON ",
    }[backlog.dialect]
    with driver.transaction() as c:
        for setting in statements[: statements.index(select)]:  # SET LOCAL enable_sort = off
            driver.execute(c.native, setting, {})
        rows, _ = driver.execute(c.native, prefix + select, driver.encode(params))
    if backlog.dialect == "postgres":
        plan = json.dumps(rows[0]["QUERY PLAN"])
        assert "Seq Scan" not in plan and sorts(plan) == [], plan
        assert '"Index Name": "duetime_jobs_due' in plan and '"Limit"' in plan, plan
    elif backlog.dialect == "sqlite":
        plan = "\n".join(str(tuple(r)) for r in rows)
        assert plan.count("TEMP B-TREE") == 1, plan  # only the branch for several queues
        assert "duetime_jobs USING INDEX duetime_jobs_due_any" in plan, plan
        assert "duetime_jobs USING INDEX duetime_jobs_due (queue=?" in plan, plan
    else:
        plan = str(next(iter(rows[0].values())))
        assert "filesort" not in plan.lower(), plan
        index = "duetime_jobs_due_any" if all_queues else "duetime_jobs_due"
        if any(-k < below for k in params["classes"]):  # (MariaDB's classes: neg_priority)
            assert f'"key": "{index}"' in plan, plan
        else:  # no class is below `below` (the fill's jobs are all of priority 0)
            assert '"key"' not in plan and "Impossible WHERE" in plan, plan


def test_finding_the_next_tenant_with_due_work_is_one_index_seek(backlog: Store) -> None:
    """A claim that rotates across tenants (docs/flow-control.md, "Tenant fairness") finds
    each tenant with due work with one read of the tenant index (migration 0011): no sort,
    no scan of the table."""
    driver = backlog.driver  # type: ignore[attr-defined]
    [select] = driver.statements("next_due_tenant")
    prefix = {
        "postgres": "EXPLAIN (FORMAT JSON) ",
        "sqlite": "EXPLAIN QUERY PLAN ",
        "mysql": "EXPLAIN FORMAT=JSON ",
    }[backlog.dialect]
    with driver.transaction() as c:
        rows, _ = driver.execute(
            c.native, prefix + select, driver.encode({"after": "", "now": NOW, "floor": None})
        )
    if backlog.dialect == "postgres":
        plan = json.dumps(rows[0]["QUERY PLAN"])
        assert "Seq Scan" not in plan and sorts(plan) == [], plan
        # the planner may take duetime_jobs_status (status, tenant, ...): a seek there too
        assert '"Index Name": "duetime_jobs_' in plan and '"Limit"' in plan, plan
    elif backlog.dialect == "sqlite":
        plan = "\n".join(str(tuple(r)) for r in rows)
        assert "USING INDEX duetime_jobs_tenant_due" in plan and "TEMP B-TREE" not in plan, plan
    else:
        plan = str(next(iter(rows[0].values())))
        assert "filesort" not in plan.lower(), plan
        assert '"key": "duetime_jobs_tenant_due"' in plan, plan
    assert backlog.claim(worker_id="w", queues=None, limit=5, now=NOW)  # the rotation runs


@pytest.mark.parametrize("all_queues", [True, False], ids=["every queue", "one queue"])
def test_the_near_future_is_read_through_the_claim_order_index(
    kit: DialectKit, filled: tuple[str, list[str]], backlog: Store, all_queues: bool
) -> None:
    """The timer's and the relay's read of the near future (next_due): on PostgreSQL, from
    the claim-order index duetime_jobs_due_any, one walk per priority class with scheduled
    jobs (found by a skip scan of the same index), each stopped by the limit, their few rows
    merged (migration 23 dropped the index on due_at alone, one entry fewer per enqueue);
    SQLite and MariaDB/MySQL keep their due_at index. Never a scan of the table, never a sort
    of the backlog; then the instants come back in time order across the classes."""
    params = {
        "now": NOW,
        "floor": NOW,  # where its seeks of the classes start (Store.next_due's now)
        "known": [],  # as Store.next_due: every class sought
        "until": NOW + timedelta(seconds=60),
        "all_queues": all_queues,
        "queues": [] if all_queues else ["default"],
        "limit": 100,
    }
    plan = pick_plan(backlog, "next_due", params)
    if backlog.dialect == "postgres":
        root = json.loads(plan)[0]["Plan"]
        assert set(job_scans(root)) == {"duetime_jobs_due_any"}, root
        assert sorted_scans(root) == [], root
    elif backlog.dialect == "sqlite":
        assert "USING INDEX duetime_jobs_next_due" in plan and "TEMP B-TREE" not in plan, plan
    else:
        assert '"key": "duetime_jobs_next_due"' in plan and "filesort" not in plan.lower(), plan
    soon = [NOW + timedelta(seconds=s) for s in (3, 1, 2)]
    for n, (at, priority) in enumerate(zip(soon, (7, 0, -2), strict=True)):
        sql = FILL[kit.name].format(c=COLUMNS).replace("'t', '{}', 0,", f"'t', '{{}}', {priority},")
        at_ = kit.instant(at)
        past = kit.instant(NOW - timedelta(days=30))
        values: Any = (DUE_FIRST + 50 + n, 1, at_, "scheduled", past)
        if kit.name != "sqlite":
            values = dict(zip(["first", "count", "due", "status", "at"], values, strict=True))
        _run(kit, filled[0], sql, values)
    queues = None if all_queues else ["default"]
    assert backlog.next_due(NOW, NOW + timedelta(seconds=60), queues, 2) == sorted(soon)[:2]


DUE_READS = [
    ("oldest_overdue", {"tenant": None}),
    ("oldest_overdue", {"tenant": "default"}),
    ("limit_waiting", {}),
    ("dispatch_outbox", {"limit": 10, "lease_seconds": 300.0}),
]


@pytest.mark.parametrize(
    ("name", "extra"), DUE_READS, ids=["overdue", "overdue of a tenant", "limits", "outbox"]
)
def test_reads_of_every_due_job_walk_each_priority_class(
    backlog: Store, name: str, extra: dict[str, Any]
) -> None:
    """The reads of the due jobs of every queue (the oldest overdue job, the due jobs per
    limit key, the relay's pick of outbox-mode queues): on PostgreSQL, since migration 23
    dropped the index on due_at alone, each walks the due rows of each priority class in the
    claim-order index (a tenant's: its tenant index), never the jobs due later; SQLite and
    MariaDB/MySQL read theirs through an index too."""
    params = {
        "now": NOW,
        "holder": DISPATCH_HOLDER,
        "moves": moves_json(Event.CLAIM),
        **extra,
    }
    plan = pick_plan(backlog, name, params)
    if backlog.dialect == "postgres":
        root = json.loads(plan)[0]["Plan"]
        found = set(job_scans(root))
        allowed = {"duetime_jobs_due_any", "duetime_jobs_tenant_due", "duetime_jobs_pkey"}
        allowed.add("ModifyTable")  # the outbox's update of the picked rows
        assert found - {"Bitmap Heap Scan"} <= allowed, plan
        assert "duetime_jobs_due_any" in found and sorted_scans(root) == [], plan
        # each class's own walk (of the claim-order index, or of a tenant's the tenant index)
        walk = r'"Index Cond": "\([^"]*\(priority = (c(_\d+)?|up)\.priority\)'
        assert re.search(walk, plan), plan
    elif backlog.dialect == "sqlite":
        assert "SCAN duetime_jobs\n" not in plan + "\n" and "INDEX" in plan, plan
    else:
        jobs = mysql_tables(json.loads(plan), ("duetime_jobs", "j"))
        assert all(access != "ALL" for _, access, _ in jobs), plan
        assert jobs or "Select tables optimized away" in plan, plan  # MIN from the index
    assert backlog.oldest_overdue(None, NOW) == NOW - timedelta(seconds=1)
    assert backlog.oldest_overdue("default", NOW) == NOW - timedelta(seconds=1)
    assert backlog.oldest_overdue("other", NOW) is None


def test_flow_counts_read_only_the_job_counts_index(kit: DialectKit, backlog: Store) -> None:
    """The counts per queue and tenant (docs/flow-control.md, "Visibility"), waiting and its
    oldest due_at included, come from one read of the job counts index (status, tenant,
    queue, due_at: migration 12), covering: no row of the table is read, none finished."""
    driver = backlog.driver  # type: ignore[attr-defined]
    [select] = driver.statements("flow_counts")
    if kit.name == "postgres":  # an index-only scan needs the visibility map autovacuum keeps
        with closing(kit.connect(kit.run_url())) as conn:
            conn.execute("VACUUM (INDEX_CLEANUP ON) duetime_jobs")
    prefix = {
        "postgres": "EXPLAIN (FORMAT JSON) ",
        "sqlite": "EXPLAIN QUERY PLAN ",
        "mysql": "EXPLAIN FORMAT=JSON ",
    }[backlog.dialect]
    with driver.transaction() as c:
        rows, _ = driver.execute(c.native, prefix + select, driver.encode({"now": NOW}))
    if backlog.dialect == "postgres":
        plan = json.dumps(rows[0]["QUERY PLAN"])
        assert "Seq Scan" not in plan and "Bitmap Heap Scan" not in plan, plan
        assert '"Node Type": "Index Only Scan"' in plan, plan
        assert '"Index Name": "duetime_jobs_status"' in plan, plan
    elif backlog.dialect == "sqlite":
        plan = "\n".join(str(tuple(r)) for r in rows)
        assert "USING COVERING INDEX duetime_jobs_status" in plan, plan
    else:
        plan = str(next(iter(rows[0].values())))
        assert '"key": "duetime_jobs_status"' in plan and '"using_index": true' in plan, plan
    [(queue, tenant, counts)] = backlog.flow_counts(NOW)
    assert (queue, tenant, counts.backlog, counts.waiting) == (
        "default",
        "default",
        BACKLOG + 50,
        50,
    )
    assert counts.waiting_seconds == 1.0  # the 50 due jobs were due a second before NOW


def listing_params(tenant: str | None, status: str) -> dict[str, Any]:
    """list_jobs' parameters for a page of one status (of one tenant, or of every one)."""
    names = ("task", "queue", "schedule_id", "before_id", "due_after", "due_before")
    rest = ("business_key", "idempotency_key", "args_like")
    return {"tenant": tenant, "status": status, **dict.fromkeys(names + rest), "limit": 51}


@pytest.mark.parametrize("status", ["running", "scheduled", "succeeded", "dead"])
def test_listing_jobs_by_status_reads_an_index(
    kit: DialectKit, backlog: Store, status: str
) -> None:
    """A page of one tenant's jobs in one status (`jobs list`, the dashboard) is read through
    an index whatever the status (SQLite: see below): on PostgreSQL the listing index leaves
    running jobs out (migration 16: a claim wrote an entry into it, a finish left it dead),
    and they come from the job counts index (status, tenant, ...) instead; the others from
    the listing index, newest first, without reading the backlog."""
    backlog.claim(worker_id="w", queues=None, limit=5, now=NOW)  # a few running jobs
    driver = backlog.driver  # type: ignore[attr-defined]
    [select] = driver.statements("list_jobs")
    params = listing_params("default", status)
    plan = plan_of(backlog, select, params)
    if backlog.dialect == "postgres":
        assert "Seq Scan" not in plan, plan
        if status == "running":
            assert '"Index Name": "duetime_jobs_status"' in plan, plan
    elif backlog.dialect == "sqlite":
        # SQLite walks each table newest first (rowid order, no sort) and stops at the page's
        # end: its statement's optional filters leave it no index to choose (not changed by
        # migration 16, which keeps SQLite's listing index as it was); only the merge of the
        # two tables' pages (at most twice the limit) is sorted
        rows = [r.strip("()").split(", ", 3) for r in plan.splitlines()]
        parts = {r[0] for r in rows if "CO-ROUTINE" in r[3]}
        assert len(parts) == 2, plan
        assert not [r for r in rows if r[1] in parts and "TEMP B-TREE" in r[3]], plan
    else:
        found = mysql_tables(json.loads(plan), ("duetime_jobs", "duetime_jobs_done"))
        assert {t for t, _, _ in found} == {"duetime_jobs", "duetime_jobs_done"}, plan
        assert all(access != "ALL" for _, access, _ in found), found
    jobs = backlog.list_jobs(JobFilter(tenant="default", status=JobStatus(status), limit=50))
    assert all(j.status is JobStatus(status) for j in jobs)


@pytest.mark.parametrize("status", ["dead", "cancelled"])
def test_listing_one_status_of_every_tenant_reads_an_index_of_each_table(
    kit: DialectKit, backlog: Store, status: str
) -> None:
    """An operator's dead letters of every tenant (`jobs list --status dead`, no tenant) read
    the history table through its index of the jobs that did not succeed (migration 27),
    not back through every success by id. The listing is planned for each call's values on
    PostgreSQL (never prepared: a generic plan could not prove the partial index's
    predicate). SQLite keeps its ended jobs in the jobs table (docs/history-plan.md, 6a),
    whose pages it reads newest first as the test above says."""
    driver = backlog.driver  # type: ignore[attr-defined]
    [select] = driver.statements("list_jobs")
    params = listing_params(None, status)
    plan = plan_of(backlog, select, params)
    if backlog.dialect == "postgres":
        assert select not in driver._prepared
        assert "Seq Scan" not in plan, plan
        assert '"Index Name": "duetime_jobs_done_unsuccessful"' in plan, plan
    elif backlog.dialect == "mysql":
        found = mysql_tables(json.loads(plan), ("duetime_jobs", "duetime_jobs_done"))
        # by the status (an index that leads with it: the one of migration 27, or the
        # retention's (status, updated_at)), not a walk of every row
        assert [a for t, a, _ in found if t == "duetime_jobs_done"] == ["ref"], found
        assert all(access != "ALL" for _, access, _ in found), found
    jobs = backlog.list_jobs(JobFilter(status=JobStatus(status), limit=50))
    assert all(j.status is JobStatus(status) for j in jobs)


RUNNING_READS = [
    "expired_leases",
    "held_leases",
    "lease_states",
    "renew_leases",
    "running_counts",
    "list_nodes",
    "dispatched_figures",
    "limit_running",
    "withdraw_dispatched",
]


def running_params(name: str, claims: list[Any]) -> dict[str, Any]:
    leases = Rows({"job_id": c.lease.job_id, "claim_token": c.lease.claim_token} for c in claims)
    return {
        "expired_leases": {"now": NOW, "limit": 100, "holder": DISPATCH_HOLDER},
        "held_leases": {"worker_id": "w"},
        "lease_states": {"leases": leases},
        "renew_leases": {"leases": leases, "now": NOW},
        "running_counts": {},
        "list_nodes": {"limit": 200},
        "dispatched_figures": {"holder": DISPATCH_HOLDER},
        "limit_running": {"now": NOW, "holder": DISPATCH_HOLDER},
        "withdraw_dispatched": {
            "ids": [claims[0].job.id],
            "direct": True,
            "moves": json.dumps({"running": "scheduled", "cancel_requested": "cancelled"}),
            "holder": DISPATCH_HOLDER,
            "now": NOW,
        },
    }[name]


def running_read(store: Store, name: str, params: dict[str, Any]) -> str:
    """The plan of the statement of `name` that reads the running attempts (of a script: the
    one that looks for the attempt on a job's row, migration 22; an INSERT ... SELECT: its
    SELECT)."""
    driver = store.driver  # type: ignore[attr-defined]
    [statement] = [
        s
        for s in driver.statements(name)
        if "attempt_id IS NOT NULL" in s and "DELETE" not in s.split()[0]
    ]
    if statement.startswith("INSERT INTO"):
        statement = statement.split("\n", 1)[1]
    return plan_of(store, statement, params)


def pick_plan(store: Store, name: str, params: dict[str, Any]) -> str:
    """As plan_of, for the named statement's first read of the jobs, after what runs before
    it in the same transaction (SET LOCAL, a temporary table); a pick written as INSERT INTO
    ... SELECT (the SQLite and MariaDB/MySQL scripts) is explained as its SELECT."""
    driver = store.driver  # type: ignore[attr-defined]
    statements = driver.statements(name)
    select = next(s for s in statements if "duetime_jobs" in s)
    if name in TAKES_CLASSES:
        params = with_classes(store, params)
    with driver.transaction() as c:
        for setting in statements[: statements.index(select)]:
            driver.execute(c.native, setting, driver.encode(params))
        if select.startswith("INSERT INTO"):
            select = select.split("\n", 1)[1]
        return plan_of(store, select, params, within=c)


def plan_of(store: Store, statement: str, params: dict[str, Any], within: Any = None) -> str:
    """The database's plan of `statement` with `params`, on the store's own connection, as
    text: PostgreSQL's and MariaDB/MySQL's JSON, SQLite's rows of EXPLAIN QUERY PLAN."""
    driver = store.driver  # type: ignore[attr-defined]
    prefix = {
        "postgres": "EXPLAIN (FORMAT JSON) ",
        "sqlite": "EXPLAIN QUERY PLAN ",
        "mysql": "EXPLAIN FORMAT=JSON ",
    }[store.dialect]
    if within is not None:  # a transaction under way (pick_plan's)
        rows, _ = driver.execute(within.native, prefix + statement, driver.encode(params))
    else:
        with driver.transaction() as c:
            rows, _ = driver.execute(c.native, prefix + statement, driver.encode(params))
    if store.dialect == "postgres":
        return json.dumps(rows[0]["QUERY PLAN"])
    if store.dialect == "sqlite":
        return "\n".join(str(tuple(r)) for r in rows)
    return str(next(iter(rows[0].values())))


def scans(node: dict[str, Any]) -> list[tuple[str, str]]:
    """PostgreSQL: (relation, index name or node type) of every scan of the jobs or the
    attempts under `node`."""
    found = []
    if node.get("Relation Name") in ("duetime_jobs", "duetime_attempts"):
        found.append((node["Relation Name"], node.get("Index Name") or node["Node Type"]))
    for child in node.get("Plans", []):
        found += scans(child)
    return found


def mysql_tables(
    node: Any, names: tuple[str, ...] = ("j", "a")
) -> list[tuple[str, str, str | None]]:
    """MariaDB/MySQL: (alias, access type, key) of every read of the tables called `names`
    (by default the jobs and the attempts, aliased j and a in these statements) in a JSON
    plan."""
    found = []
    if isinstance(node, dict):
        table = node.get("table")
        if isinstance(table, dict) and table.get("table_name") in names:
            found.append((table["table_name"], table.get("access_type", ""), table.get("key")))
        for value in node.values():
            found += mysql_tables(value, names)
    elif isinstance(node, list):
        for value in node:
            found += mysql_tables(value, names)
    return found


@pytest.mark.parametrize("name", RUNNING_READS)
def test_running_attempts_are_read_through_the_running_jobs(
    kit: DialectKit, backlog: Store, name: str
) -> None:
    """Migration 17 dropped the index on the running attempts' lease (on PostgreSQL it kept
    every finish and renewal from being a HOT update), and since migration 22 a running
    attempt is on its job's row: every statement that looks for running attempts (the
    reaper's, a worker's renewals and restart, flow control's counts, the nodes' holdings,
    the outbox's) reaches them through the running jobs, from an index of the jobs, and reads
    no attempt row: never a read of the whole jobs table, with BACKLOG future jobs and BACKLOG
    finished ones with their attempts."""
    claims = backlog.claim(worker_id="w", queues=None, limit=20, now=NOW)
    assert len(claims) == 20
    plan = running_read(backlog, name, running_params(name, claims))
    if kit.name == "postgres":
        found = scans(json.loads(plan)[0]["Plan"])
        assert found and all(table == "duetime_jobs" for table, _ in found), found
        assert all(how != "Seq Scan" for _, how in found), found
    elif kit.name == "sqlite":
        assert "duetime_attempts" not in plan and " a " not in plan, plan
        assert "SCAN j\n" not in plan + "\n" and "SCAN duetime_jobs\n" not in plan + "\n", plan
    else:
        found = mysql_tables(json.loads(plan))
        assert found and all(alias == "j" for alias, _, _ in found), found
        assert all(access != "ALL" for _, access, _ in found), found


SEQUENCE_READS = [
    ("sequence_busy", {"exclude": 0, "waiting": True}),
    ("sequence_next", {"after": 0}),
    ("sequence_ahead", {"id": 5}),
    ("job_by_unique", {"unique_key": "ab" * 32}),
]


@pytest.mark.parametrize(("name", "extra"), SEQUENCE_READS, ids=[n for n, _ in SEQUENCE_READS])
def test_sequence_and_unique_reads_never_scan_the_jobs(
    backlog: Store, name: str, extra: dict[str, Any]
) -> None:
    """What an enqueue or a release of a sequence (or a unique enqueue) reads goes through an
    index, whatever the backlog of plain jobs (docs/workflows.md): the sequence index, the
    unique index."""
    driver = backlog.driver  # type: ignore[attr-defined]
    [select] = driver.statements(name)
    params = {"tenant": "default", "sequence_key": "acct-1", **extra}
    plan = plan_of(backlog, select, params)
    if backlog.dialect == "postgres":
        assert "Seq Scan" not in plan, plan
    elif backlog.dialect == "sqlite":
        assert "SCAN duetime_jobs" not in plan, plan  # SEARCH: through an index
        assert "INDEX" in plan, plan
    else:
        assert '"access_type": "ALL"' not in plan, plan


def test_a_schedules_tick_history_reads_each_jobs_attempts_through_an_index(
    kit: DialectKit, backlog: Store
) -> None:
    """A schedule's tick history (API, CLI, dashboard) shows when each tick's job first
    started: of its attempts, the ended ones' rows and the running one on its job's row
    (migration 22). Each tick's job's attempts are reached through an index, as before
    migration 22: never a read of every attempt (up to BACKLOG of them here), which a view of every
    attempt costs where a correlated condition is not pushed into its UNION (SQLite,
    MariaDB)."""
    params = {"schedule_id": 1, "before_id": None, "limit": 50}
    driver = backlog.driver  # type: ignore[attr-defined]
    [statement] = driver.statements("list_ticks")
    plan = plan_of(backlog, statement, params)
    if kit.name == "postgres":
        found = scans(json.loads(plan)[0]["Plan"])
        assert all(how != "Seq Scan" for _, how in found), found
    elif kit.name == "sqlite":
        rows = plan.splitlines()
        assert not [r for r in rows if "'SCAN " in r and "duetime_ticks" not in r], plan
    else:
        found = mysql_tables(json.loads(plan))
        assert found and all(access != "ALL" for _, access, _ in found), found


HISTORY_READS = [
    ("select_attempts", {"id": BACKLOG + 7}),
    ("select_attempts", {"id": ON_ROWS_FIRST + 7}),
    ("select_attempts_of_jobs", {"ids": [BACKLOG + 7, BACKLOG + 9, ON_ROWS_FIRST + 7]}),
    ("attempt_samples", {"since": NOW - timedelta(minutes=5), "tenant": None, "limit": 500}),
    ("select_claim", {"job_id": BACKLOG + 7, "claim_token": BACKLOG + 7}),
]


def relation_scans(node: dict[str, Any], names: tuple[str, ...]) -> list[dict[str, Any]]:
    """PostgreSQL: every scan node of the relations `names` under `node`."""
    found = [node] if node.get("Relation Name") in names else []
    for child in node.get("Plans", []):
        found += relation_scans(child, names)
    return found


def test_the_recent_samples_read_the_successes_on_their_rows_through_an_index_to_the_limit(
    kit: DialectKit, backlog: Store
) -> None:
    """attempt_samples reads the successes kept on their jobs' rows (migration 24), in either
    table, through an index, not through the status index nor a scan of every succeeded job:
    on PostgreSQL the pruner's index of their end (duetime_jobs_finished,
    duetime_jobs_done_finished; its migration 29 dropped the index of their start), on SQLite
    the partial index of their start. Here every success of the fill (BACKLOG / 2 on rows,
    half of them moved) started since `since`, and each table's walk reads at most `limit`
    of them (PostgreSQL: the rows it returns and those its filter removed), as does the
    ended attempts' walk of their start."""
    if not kit.successes_on_rows:
        pytest.skip("MariaDB/MySQL keep no success on its job's row (docs/stores.md)")
    driver = backlog.driver  # type: ignore[attr-defined]
    [statement] = driver.statements("attempt_samples")
    params = {"since": NOW - timedelta(days=60), "tenant": None, "limit": 500}
    plan = plan_of(backlog, statement, params)
    if kit.name == "sqlite":
        assert "duetime_jobs_succeeded_started" in plan, plan
        assert "duetime_jobs_done_succeeded_started" in plan, plan
        rows = plan.splitlines()
        assert not [r for r in rows if "SCAN d" in r or "SCAN h" in r or "SCAN s" in r], plan
        return
    assert "duetime_jobs_finished" in plan and "duetime_jobs_done_finished" in plan, plan
    with driver.transaction(write=False) as c:
        rows, _ = driver.execute(
            c.native, "EXPLAIN (ANALYZE, FORMAT JSON) " + statement, driver.encode(params)
        )
    root = rows[0]["QUERY PLAN"][0]["Plan"]
    jobs = relation_scans(root, ("duetime_jobs", "duetime_jobs_done"))
    walks = [n for n in jobs if n.get("Index Name", "").endswith("_finished")]
    assert len(walks) == 2, jobs
    read = [
        (n["Actual Rows"] + n.get("Rows Removed by Filter", 0)) * n["Actual Loops"] for n in walks
    ]
    assert all(r <= 500 for r in read) and max(read) == 500, walks
    seen = [
        (n["Relation Name"], n.get("Index Name") or n["Node Type"], n["Actual Loops"]) for n in jobs
    ]
    assert not [n for n in jobs if n["Node Type"] == "Seq Scan"], seen
    # the ended attempts' part walks their start to the limit, and reads their jobs by key
    [attempts] = relation_scans(root, ("duetime_attempts",))
    assert attempts.get("Index Name") == "duetime_attempts_started", attempts
    assert attempts["Actual Rows"] * attempts["Actual Loops"] <= 500, attempts
    assert root["Actual Rows"] == 500


@pytest.mark.parametrize(("name", "params"), HISTORY_READS, ids=[n for n, _ in HISTORY_READS])
def test_attempt_history_reads_reach_the_attempts_through_an_index(
    kit: DialectKit, backlog: Store, name: str, params: dict[str, Any]
) -> None:
    """The reads of attempts through the view of every attempt (migration 22: the ended
    ones' rows and the running ones on their jobs' rows; migration 24: the successes on
    theirs) get their condition into each of its parts: a job's history, a page's, the
    recent samples and a dispatched claim read through indexes, never every attempt
    (up to BACKLOG of them) nor every job."""
    driver = backlog.driver  # type: ignore[attr-defined]
    [statement] = driver.statements(name)
    plan = plan_of(backlog, statement, params)
    if kit.name == "postgres":
        found = scans(json.loads(plan)[0]["Plan"])
        assert found and all(how != "Seq Scan" for _, how in found), found
    elif kit.name == "sqlite":
        rows = [r.strip("()").split(", ", 3) for r in plan.splitlines()]
        branches = {r[0] for r in rows if "SUBQUERY" in r[3] or "UNION ALL" in r[3]}
        inner = [r for r in rows if r[1] in branches and "SCAN" in r[3]]  # in the UNION
        # (a branch bounded by its own LIMIT is a subquery, read as its rows come)
        tables = [r for r in inner if "json_each" not in r[3] and "(subquery-" not in r[3]]
        assert not tables, plan
    else:
        found = mysql_tables(json.loads(plan))
        assert found and all(access != "ALL" for _, access, _ in found), found


DEPENDENTS = ("duetime_jobs", "duetime_jobs_done", "duetime_attempts", "duetime_job_parents")
ANALYZE_LINKS = {
    "postgres": "ANALYZE duetime_job_parents",
    "mysql": "ANALYZE TABLE duetime_job_parents",
}


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("prune", {"before": NOW, "limit": 1000}),
        ("prune_done", {"before": NOW, "limit": 1000}),
        ("delete_unstarted", {"schedule_id": 1}),
    ],
    ids=["prune", "prune_done", "delete_unstarted"],
)
def test_deleting_jobs_reaches_their_dependents_through_indexes(
    kit: DialectKit, backlog: Store, name: str, params: dict[str, Any]
) -> None:
    """Since migration 26 no foreign key cascades a job's deletion: the pruner's statement
    and the deletion of a schedule's unstarted occurrences delete the jobs' attempts and
    dependency links themselves (and their outbox events, and detach their ticks). Each of
    those reads goes through an index of its table, whatever the backlog (BACKLOG finished
    jobs with their attempts, half of them in the history table, one link per finished job):
    never a read of a whole table. (The outbox and ticks tables are empty here, where a plan
    of them says nothing.)"""
    driver = backlog.driver  # type: ignore[attr-defined]
    with driver.transaction() as c:
        driver.execute(
            c.native,
            "INSERT INTO duetime_job_parents (child_id, parent_id) "
            "SELECT id, id - 1 FROM duetime_all_jobs WHERE status = 'succeeded'",
            {},
        )
    if kit.name in ANALYZE_LINKS:
        with driver.transaction() as c:
            driver.execute(c.native, ANALYZE_LINKS[kit.name], {})
    plans = []
    with driver.transaction() as c:
        for statement in driver.statements(name):
            if statement.startswith(("CREATE", "INSERT")):  # a temporary table's candidates
                driver.execute(c.native, statement, driver.encode(params))
            else:
                plans.append(plan_of(backlog, statement, params, within=c))
    seen = set()
    for plan in plans:
        if kit.name == "postgres":
            found = table_scans(json.loads(plan)[0]["Plan"], DEPENDENTS)
            assert all(how != "Seq Scan" for _, how in found), found
            seen |= {table for table, _ in found}
        elif kit.name == "sqlite":
            for table in DEPENDENTS:
                assert f"SCAN {table}\n" not in plan + "\n", plan
                seen |= {table} if f"SEARCH {table} " in plan else set()
        else:
            jobs = "duetime_jobs_done" if name == "prune_done" else "duetime_jobs"
            aliases = {"j": jobs, "a": "duetime_attempts", "l": "duetime_job_parents"}
            found = mysql_tables(json.loads(plan), (*DEPENDENTS, *aliases))
            assert all(access != "ALL" for _, access, _ in found), found
            seen |= {aliases.get(alias, alias) for alias, _, _ in found}
    # the reads this test is about were planned (the attempts: only the pruner's)
    jobs = "duetime_jobs_done" if name == "prune_done" else "duetime_jobs"
    assert seen >= {jobs, "duetime_job_parents"} | (
        {"duetime_attempts"} if name.startswith("prune") else set()
    ), seen


def table_scans(node: dict[str, Any], tables: tuple[str, ...]) -> list[tuple[str, str]]:
    """PostgreSQL: (relation, index name or node type) of every scan of `tables` under
    `node`."""
    found = []
    if node.get("Relation Name") in tables:
        found.append((node["Relation Name"], node.get("Index Name") or node["Node Type"]))
    for child in node.get("Plans", []):
        found += table_scans(child, tables)
    return found
