"""A worker whose clock is 30 s off, under libfaketime, on PostgreSQL and MariaDB/MySQL.

One real `duetime worker` process runs with LD_PRELOAD=libfaketime and FAKETIME="+30s" (or
"-30s"), beside no other worker; this test process runs on the true clock (the database's,
on this machine). The database itself stamps, in triggers this test adds, the instant by its
own clock at which each job and each attempt row is inserted (BEFORE INSERT on PostgreSQL:
clock_timestamp(), as the row goes in; AFTER INSERT on MariaDB/MySQL: UTC_TIMESTAMP(6), the
start of the inserting statement); those stamps are the truth every figure is judged by:

- jobs due 3-6 s ahead never start before due_at by the database's clock; each attempt's
  started_at is within 0.5 s of the stamp, its lease ends lease_seconds after it;
- a schedule ticking every second creates each occurrence at or after its nominal instant
  and starts it at or after it;
- a lease this test holds on the true clock is never reaped by the skewed worker, and the
  skewed worker's lease is never reaped by a reaper on the true clock;
- `duetime nodes` shows the worker live (with --dead-after 10s), last seen a few seconds
  ago, its clock offset about 30 s (marked), and the worker warned once (node.clock_offset)
  and exports duetime_clock_offset_seconds.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from duetime import App
from duetime.chaos.skew import missing as skew_missing
from duetime.chaos.skew import skewed_env as skew_env
from duetime.core.clock import CorrectedClock
from duetime.runtime.reaper import Reaper
from integration.apps.itapp import make_app
from integration.procs import Processes, WorkerProcess, describe, query, run_cli, wait_until
from kit import DialectKit, kit_named

SKEW = 30.0
JOBS = 20


# make test runs PostgreSQL's; MariaDB/MySQL's (the same run on the other SQL dialect, its
# stamps by AFTER INSERT triggers) are `long`: make test-long and CI run them
@pytest.fixture(params=["postgres", pytest.param("mysql", marks=pytest.mark.long)])
def kit(request: pytest.FixtureRequest) -> DialectKit:
    return kit_named(request.param)


def skewed_env(procs: Processes, skew: float) -> dict[str, str]:
    """The worker's environment: libfaketime shifts the wall clock (time.time(), datetime.now)
    by `skew` seconds; the monotonic clock (asyncio's timers) is left true."""
    why = skew_missing()
    if why is not None:
        raise AssertionError(f"{why}, to run the clock skew tests")
    return skew_env(procs.env(), procs.root / "faketime-site", skew)


def test_libfaketime_moves_the_clock_python_reads(procs: Processes) -> None:
    for skew in (SKEW, -SKEW):
        done = subprocess.run(
            [sys.executable, "-c", "import time; time.sleep(0.01); print(time.time())"],
            env=skewed_env(procs, skew),
            capture_output=True,
            text=True,
            check=True,
        )
        assert float(done.stdout) - time.time() == pytest.approx(skew, abs=1.0)


# -- the database's own stamps ------------------------------------------------------------------

PROBE_PG = [
    "CREATE TABLE duetime_clock_probe (kind text NOT NULL, id bigint NOT NULL, "
    "db_at timestamptz NOT NULL)",
    """CREATE OR REPLACE FUNCTION duetime_clock_probe_f() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  BEGIN
    INSERT INTO duetime_clock_probe VALUES (TG_ARGV[0], NEW.id, clock_timestamp());
  EXCEPTION WHEN undefined_table THEN NULL;  -- left over by a test that died: harmless
  END;
  RETURN NEW;
END $$""",
    "CREATE TRIGGER duetime_clock_probe_jobs BEFORE INSERT ON duetime_jobs "
    "FOR EACH ROW EXECUTE FUNCTION duetime_clock_probe_f('job')",
    # an attempt starts on its job's row (migration 22): the claim's update gives it its id
    """CREATE OR REPLACE FUNCTION duetime_clock_probe_start_f() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.attempt_id IS NOT NULL AND NEW.attempt_id IS DISTINCT FROM OLD.attempt_id THEN
    BEGIN
      INSERT INTO duetime_clock_probe VALUES ('attempt', NEW.attempt_id, clock_timestamp());
    EXCEPTION WHEN undefined_table THEN NULL;  -- left over by a test that died: harmless
    END;
  END IF;
  RETURN NEW;
END $$""",
    "CREATE TRIGGER duetime_clock_probe_attempts BEFORE UPDATE ON duetime_jobs "
    "FOR EACH ROW EXECUTE FUNCTION duetime_clock_probe_start_f()",
]
UNPROBE_PG = [
    "DROP TRIGGER IF EXISTS duetime_clock_probe_jobs ON duetime_jobs",
    "DROP TRIGGER IF EXISTS duetime_clock_probe_attempts ON duetime_jobs",
    "DROP FUNCTION IF EXISTS duetime_clock_probe_f()",
    "DROP FUNCTION IF EXISTS duetime_clock_probe_start_f()",
    "DROP TABLE IF EXISTS duetime_clock_probe",
]
# AFTER INSERT: an AUTO_INCREMENT id is known only then; UTC_TIMESTAMP(6) is the statement's
# start, so the stamp is never later than the row's insertion
PROBE_MYSQL = [
    "CREATE TABLE duetime_clock_probe (kind VARCHAR(10) NOT NULL, id BIGINT NOT NULL, "
    "db_at DATETIME(6) NOT NULL)",
    "CREATE TRIGGER duetime_clock_probe_jobs AFTER INSERT ON duetime_jobs "
    "FOR EACH ROW BEGIN "
    "DECLARE CONTINUE HANDLER FOR SQLSTATE '42S02' BEGIN END; "
    "INSERT INTO duetime_clock_probe VALUES ('job', NEW.id, UTC_TIMESTAMP(6)); END",
    # an attempt starts on its job's row (migration 22): the claim's update gives it its id
    "CREATE TRIGGER duetime_clock_probe_attempts AFTER UPDATE ON duetime_jobs "
    "FOR EACH ROW BEGIN "
    "DECLARE CONTINUE HANDLER FOR SQLSTATE '42S02' BEGIN END; "
    "IF NEW.attempt_id IS NOT NULL AND NOT (NEW.attempt_id <=> OLD.attempt_id) THEN "
    "INSERT INTO duetime_clock_probe VALUES ('attempt', NEW.attempt_id, UTC_TIMESTAMP(6)); "
    "END IF; END",
]
UNPROBE_MYSQL = [
    "DROP TRIGGER IF EXISTS duetime_clock_probe_jobs",
    "DROP TRIGGER IF EXISTS duetime_clock_probe_attempts",
    "DROP TABLE IF EXISTS duetime_clock_probe",
]


def run_sql(kit: DialectKit, url: str, statements: list[str]) -> None:
    conn = kit.connect(url)  # autocommit
    try:
        if kit.name == "postgres":
            for sql in statements:
                conn.execute(sql)
        else:
            cur = conn.cursor()
            for sql in statements:
                cur.execute(sql)
    finally:
        conn.close()


@pytest.fixture
def probed(kit: DialectKit, db_url: str) -> Iterator[str]:
    """db_url with the stamping triggers, removed after the test."""
    undo = UNPROBE_PG if kit.name == "postgres" else UNPROBE_MYSQL
    run_sql(kit, db_url, undo)
    run_sql(kit, db_url, PROBE_PG if kit.name == "postgres" else PROBE_MYSQL)
    try:
        yield db_url
    finally:
        run_sql(kit, db_url, undo)


def utc(value: Any) -> datetime:
    """An instant as either driver returns it (aware, or naive UTC from MariaDB/MySQL)."""
    assert isinstance(value, datetime)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def stamps(url: str, kind: str) -> dict[int, datetime]:
    rows = query(url, "SELECT id, db_at FROM duetime_clock_probe WHERE kind = ?", (kind,))
    found: dict[int, datetime] = {}
    for job_id, at in rows:
        found.setdefault(int(job_id), utc(at))  # the first insertion (a retried one: later)
    return found


def attempts(url: str) -> list[dict[str, Any]]:
    rows = query(
        url,
        "SELECT a.id, a.job_id, a.status, a.started_at, a.lease_expires_at, a.worker_id, "
        "j.due_at, j.nominal_at, j.schedule_id, j.queue FROM duetime_all_attempts a "
        "JOIN duetime_all_jobs j ON j.id = a.job_id ORDER BY a.id",
    )
    keys = [
        "id",
        "job_id",
        "status",
        "started_at",
        "lease_expires_at",
        "worker_id",
        "due_at",
        "nominal_at",
        "schedule_id",
        "queue",
    ]
    return [dict(zip(keys, row, strict=True)) for row in rows]


# -- the run ------------------------------------------------------------------------------------


def scrape_offset(worker: WorkerProcess) -> float:
    serving = worker.wait_event("metrics.serving", 15)
    body = urllib.request.urlopen(f"http://127.0.0.1:{serving['port']}/metrics", timeout=5).read()
    match = re.search(rb"^duetime_clock_offset_seconds (\S+)$", body, re.MULTILINE)
    assert match, body[-2000:]
    return float(match.group(1))


@pytest.mark.parametrize("skew", [SKEW, -SKEW], ids=["ahead", "behind"])
def test_a_worker_30s_off_starts_nothing_early_records_true_times_and_shows_its_offset(
    probed: str, procs: Processes, skew: float
) -> None:
    url = probed
    app = make_app(url)  # this process: the true clock (corrected by the database's: ~0)
    try:
        run(url, app, procs, skew)
    finally:
        app.close()


def run(url: str, app: App, procs: Processes, skew: float) -> None:
    store = app.store
    assert isinstance(app.clock, CorrectedClock) and abs(app.clock.offset or 9) < 0.05
    # a lease held on the true clock (30 s, the task's), that the skewed reaper must leave
    held = app.enqueue("noop", queue="held")
    [holding] = store.claim(worker_id="holder", queues=["held"], limit=1, now=app.clock.now())
    worker = procs.worker(
        url,
        "--queues",
        "default",
        "--reap-interval",
        "0.5",
        "--plan-interval",
        "0.2",
        "--metrics-port",
        "0",
        env=skewed_env(procs, skew),
    )
    wait_until(
        lambda: worker.alive() and any(n.pid == worker.pid for n in store.list_nodes()),
        20,
        lambda: f"the worker never registered\n{worker.tail()}",
    )
    base = store.database_now()
    due = [base + timedelta(seconds=3 + 3 * i / (JOBS - 1)) for i in range(JOBS)]
    on_time = [app.enqueue("on_time", at=at).id for at in due]
    sleeper = app.enqueue("sleep", {"seconds": 4.0}).id
    schedule = app.add_schedule("every-second", task="on_time", timezone="UTC", every=1)

    # while the sleeper runs on the skewed worker, a reaper on the true clock finds no lease over
    wait_until(
        lambda: worker.alive() and (Path(procs.out_dir) / f"started-{sleeper}-1").exists(),
        10,
        lambda: f"the sleep job never started\n{worker.tail()}",
    )
    time.sleep(1.0)
    assert Reaper(store, app.clock).run_once().reaped == 0

    def all_done() -> bool:
        done = {j.id for j in app.list_jobs(status="succeeded", limit=100)}
        return worker.alive() and set(on_time) | {sleeper} <= done

    wait_until(all_done, 15, lambda: f"jobs did not all succeed\n{worker.tail()}")
    wait_until(
        lambda: len([a for a in attempts(url) if a["schedule_id"] is not None]) >= 3,
        10,
        lambda: f"the schedule did not run 3 ticks\n{worker.tail()}",
    )
    listed_from = store.database_now()
    nodes_json = run_cli(["nodes", "--json", "--dead-after", "10s", "--database-url", url])
    listed_until = store.database_now()
    nodes_table = run_cli(["nodes", "--dead-after", "10s", "--database-url", url])
    offset_metric = scrape_offset(worker)
    held_now = [a for a in attempts(url) if a["job_id"] == held.id]
    assert worker.terminate_and_wait() == 0, worker.tail()

    # -- every start: never before due by the database's clock, stamped with true times
    started = stamps(url, "attempt")
    created = stamps(url, "job")
    ours = [a for a in attempts(url) if a["worker_id"] != "holder"]
    assert len(ours) >= JOBS + 1 + 3
    early, off, leases = [], [], []
    for a in ours:
        at = started[int(a["id"])]
        if at < utc(a["due_at"]):
            early.append((a["job_id"], (utc(a["due_at"]) - at).total_seconds()))
        off.append(abs((utc(a["started_at"]) - at).total_seconds()))
        leases.append((utc(a["lease_expires_at"]) - at).total_seconds())
    assert early == [], f"started before due by the database's clock (job, seconds): {early}"
    margins = [(started[int(a["id"])] - utc(a["due_at"])).total_seconds() for a in ours]
    assert max(off) < 0.5, f"started_at off the database's clock by up to {max(off):.3f}s"
    # each lease ends lease_seconds (30) after the start, renewed ones later: never sooner
    assert min(leases) > 29.5, f"a lease ended {min(leases):.2f}s after its start"
    assert [a["status"] for a in ours] == ["succeeded"] * len(ours)  # none lost, none reaped

    # -- schedule ticks: created and started at or after their nominal instants
    ticks = [a for a in ours if a["schedule_id"] == schedule.id]
    assert ticks
    tick_lags = []
    for a in ticks:
        nominal = utc(a["nominal_at"])
        assert created[int(a["job_id"])] >= nominal, "a tick was planned before its instant"
        assert started[int(a["id"])] >= nominal, "a tick started before its instant"
        lag = (started[int(a["id"])] - nominal).total_seconds()
        assert lag < 1.5, f"a tick started {lag:.2f}s after its instant"
        tick_lags.append(lag)

    # -- the lease this test held on the true clock was left alone by the skewed reaper
    assert [a["status"] for a in held_now] == ["running"] and holding.job.id == held.id

    # -- the node: live, last seen on the database's time, its offset shown and warned about
    assert nodes_json.returncode == 0, describe(nodes_json)
    [node] = [n for n in json.loads(nodes_json.stdout) if n["pid"] == worker.pid]
    assert node["state"] == "live", node
    seen = datetime.fromisoformat(node["last_seen_at"])
    # a heartbeat every 5 s, written on the database's time: never ahead, never 6 s behind
    assert listed_from - timedelta(seconds=6) < seen <= listed_until, (seen, listed_from)
    assert node["clock_offset_seconds"] == pytest.approx(skew, abs=0.5)
    assert f"{skew:+.1f}s !" in nodes_table.stdout or f"{skew:+.0f}." in nodes_table.stdout
    assert offset_metric == pytest.approx(skew, abs=0.5)
    [warning] = worker.events("node.clock_offset")
    assert warning["level"] == "warning" and warning["offset_s"] == pytest.approx(skew, abs=0.5)
    assert worker.problems() == [], worker.tail()
    # the figures, for a run with -s (kept out of the assertions above)
    sys.stderr.write(
        f"\nclock skew {skew:+.0f}s: {len(ours)} starts, start - due by the database's clock "
        f"min {min(margins) * 1000:.1f} ms; |started_at - database| max {max(off) * 1000:.1f} "
        f"ms; tick lag max {max(tick_lags) * 1000:.0f} ms; offset shown "
        f"{node['clock_offset_seconds']:+.3f}s, metric {offset_metric:+.3f}s\n"
    )
