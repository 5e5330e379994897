"""Failover drills on a real replicated PostgreSQL pair (tests/pgreplica.py): a primary and a
streaming standby started by the test, the primary killed (`pg_ctl stop -m immediate`) while
handlers run, the standby promoted (`pg_ctl promote`). Every duetime process is given the
multi-host URL with target_session_attrs=read-write and must find the new primary by itself.

The figures each drill asserts (docs/production.md quotes them):
- synchronous replication: 0 acknowledged enqueues lost; every acknowledged job ran, and a
  job that ran twice is counted with its cause (more than one attempt in the store);
- enqueues while no primary is reachable fail with StoreUnavailable within REFUSAL_BOUND s
  (the App's pool_timeout plus the connection attempt), never hang, never succeed falsely;
- the first job starts on the new primary within RESUME_BOUND s of the promotion, in the same
  worker processes (no restart);
- the CLI exits 1 with one line during the outage; `duetime serve` answers 503 with
  Retry-After, then 201 again after the promotion;
- asynchronous replication, deterministic (test_a_stale_worker_from_the_lost_history_is_fenced):
  a worker whose claim vanished with the old primary cannot complete, heartbeat, or write
  into another job's attempt on the new one.
"""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from duetime import App
from duetime.admin.tokens import create_token
from duetime.core.errors import StoreUnavailable
from integration.apps.failoverapp import executions, make_app
from integration.procs import (
    Processes,
    WorkerProcess,
    base_env,
    migrate,
    query,
    run_cli,
    scalar,
    start_server,
    wait_until,
)
from pgautofailover import AutoFailoverPair, available
from pgreplica import ReplicatedPair

APP = "failoverapp:app"
POOL_TIMEOUT = 3.0  # the enqueuing App's pool_timeout (the server uses 5 s)
REFUSAL_BOUND = POOL_TIMEOUT + 3.0  # an enqueue during the outage fails within this (s)
RESUME_BOUND = 10.0  # the first start on the new primary, after the promotion (s)
SERVE_RECOVERY_BOUND = 10.0  # the API's first 201 after the promotion (s)
RECONNECT_BOUND = 4.0  # one pool's first connection to the new primary, after the promotion (s)

log = logging.getLogger("tests.failover")  # the figures: pytest -o log_cli=true


@pytest.fixture(autouse=True)
def _quiet_pool() -> Iterator[None]:
    """The test's own Apps' pools warn at every failed reconnection during the outage."""
    pool_log = logging.getLogger("psycopg.pool")
    level = pool_log.level
    pool_log.setLevel(logging.ERROR)
    yield
    pool_log.setLevel(level)


@pytest.fixture
def sync_pair() -> Iterator[ReplicatedPair]:
    pair = ReplicatedPair(synchronous=True).start()
    try:
        yield pair
    finally:
        pair.close()


@pytest.fixture
def async_pair() -> Iterator[ReplicatedPair]:
    pair = ReplicatedPair(synchronous=False).start()
    try:
        yield pair
    finally:
        pair.close()


# -- the load ---------------------------------------------------------------------------------


@dataclass
class Load:
    """Enqueues fo.record with idempotency keys at `rate` per second from a thread; every call
    is recorded: acknowledged (key -> job id) or refused (key, error type, seconds taken)."""

    url: str
    rate: float = 20.0
    slow_every: int = 20  # every n-th enqueue is also a fo.slow job (a handler to kill)
    acked: dict[str, int] = field(default_factory=dict)
    acked_at: dict[str, float] = field(default_factory=dict)  # key -> time.time() of the ack
    args: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    refused: list[tuple[str, str, float, float]] = field(default_factory=list)  # key, error, s, at
    other: list[str] = field(default_factory=list)
    ack_max_s: float = 0.0  # the longest an acknowledged enqueue took (it waited for a primary)
    stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.app = make_app(self.url)
        self.app.pool_timeout = POOL_TIMEOUT
        self.thread = threading.Thread(target=self._run, name="load", daemon=True)

    def start(self) -> Load:
        self.thread.start()
        return self

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(60)
        self.app.close()

    def _run(self) -> None:
        n = 0
        next_at = time.monotonic()
        while not self.stop.is_set():
            n += 1
            task, args = (
                ("fo.slow", {"seconds": 3.0})
                if n % self.slow_every == 0
                else ("fo.record", {"n": n})
            )
            key = f"load-{n}"
            started = time.monotonic()
            try:
                job = self.app.enqueue(task, args, key=key)
            except StoreUnavailable as exc:
                self.refused.append(
                    (key, type(exc).__name__, time.monotonic() - started, time.time())
                )
            except Exception as exc:  # anything else is a finding: counted, asserted empty
                self.other.append(f"{key}: {type(exc).__name__}: {exc}")
            else:
                self.acked[key] = job.id
                self.acked_at[key] = time.time()
                self.args[key] = (task, args)
                self.ack_max_s = max(self.ack_max_s, time.monotonic() - started)
            next_at += 1 / self.rate
            self.stop.wait(max(0.0, next_at - time.monotonic()))
            next_at = max(next_at, time.monotonic() - 1)


@dataclass
class Figures:
    no_primary_s: float
    acked: int
    lost: int
    lag_s: float
    refused: int
    refused_max_s: float
    ack_max_s: float
    duplicates: dict[str, str]
    resume_s: float
    worker_resume_s: dict[str, float | None]
    api_recovery_s: float | None
    cli_outage: str

    def line(self) -> str:
        return json.dumps(vars(self), default=str)


def drill(
    pair: ReplicatedPair | AutoFailoverPair,
    procs: Processes,
    tmp_path: Path,
    *,
    before: float,
    outage: float,
    after: float,
    lag: float = 0.0,
    resume_bound: float = RESUME_BOUND,
) -> Figures:
    """Load for `before` s, kill the primary while a fo.slow handler runs, stay down `outage`
    s (probing the CLI and the API), promote, load `after` s more, drain; return the figures
    after asserting what must hold. With `lag` (asynchronous mode), WAL stops reaching the
    standby `lag` s before the kill: what the primary acknowledged meanwhile is lost."""
    url = pair.url()
    migrate(url)
    admin = App(url)
    try:
        secret = create_token(admin, "default", "write")[1]
    finally:
        admin.close()
    auth = {"Authorization": f"Bearer {secret}"}
    workers = [procs.worker(url, "--concurrency", "8", app=APP, name=f"w{i}") for i in (1, 2)]
    server, base = start_server(url, tmp_path)
    load = Load(url).start()
    try:
        time.sleep(before)
        # kill while a fo.slow handler runs (one is enqueued every second)
        wait_until(
            lambda: scalar(
                url,
                "SELECT count(*) FROM duetime_jobs WHERE task = 'fo.slow' AND status = 'running'",
            ),
            15,
            "no fo.slow handler running",
        )
        held_at = time.time()
        if lag:
            assert pair.proxy is not None, "lag needs the asynchronous pair's proxy"
            pair.proxy.hold()
            time.sleep(lag)
        pair.kill_primary()
        killed_at = time.time()
        killed = time.monotonic()
        # the CLI during the outage: exit 1, one line, no traceback, in bounded time
        started = time.monotonic()
        cli = run_cli(
            ["enqueue", "fo.record", "--app", APP, "--database-url", url, "--key", "cli-outage"],
            env=base_env(tmp_path),
            timeout=60,
        )
        cli_s = time.monotonic() - started
        assert cli.returncode == 1, cli
        assert cli.stderr.count("\n") == 1 and cli.stderr.startswith("duetime: error:"), cli
        assert cli_s < REFUSAL_BOUND + 10, f"the CLI took {cli_s:.1f} s"
        # the API during the outage: 503 with Retry-After, nothing committed
        r = httpx.post(
            f"{base}/v1/jobs",
            json={"task": "fo.record"},
            headers={**auth, "Idempotency-Key": "api-outage"},
            timeout=30,
        )
        assert r.status_code == 503, r.text
        assert r.headers.get("retry-after"), r.headers
        time.sleep(max(0.0, outage - (time.monotonic() - killed)))
        pair.promote()
        promoted = pair.promoted_at
        assert promoted is not None
        # the API comes back by itself
        api_recovery: float | None = None
        deadline = time.monotonic() + 30
        while api_recovery is None and time.monotonic() < deadline:
            r = httpx.post(
                f"{base}/v1/jobs",
                json={"task": "fo.record"},
                headers={**auth, "Idempotency-Key": "api-after"},
                timeout=30,
            )
            if r.status_code in (200, 201):
                api_recovery = time.time() - promoted
            else:
                assert r.status_code == 503, r.text
                time.sleep(0.1)
        assert api_recovery is not None, "the API never answered 201 after the promotion"
        time.sleep(after)
    finally:
        load.finish()
        server.send_signal(signal.SIGTERM)
        server.wait(30)
    new = pair.primary_url()  # the promoted standby
    assert not load.other, load.other[:5]
    # lost: acknowledged keys the new primary does not have
    present = {
        k: i
        for k, i in query(
            new,
            "SELECT idempotency_key, id FROM duetime_all_jobs "
            "WHERE starts_with(idempotency_key, 'load-')",
        )
    }
    lost = sorted(set(load.acked) - set(present), key=lambda k: int(k.split("-")[1]))
    # every acknowledged job the new primary has runs to success, in the same processes
    wanted = sorted(present[k] for k in load.acked if k in present)
    wait_until(
        lambda: (
            all(w.alive() for w in workers)
            and not scalar(
                new,
                "SELECT count(*) FROM duetime_all_jobs WHERE id = ANY(?) AND status <> 'succeeded'",
                (wanted,),
            )
        ),
        120,
        lambda: (
            "jobs not succeeded: "
            + str(
                query(
                    new,
                    "SELECT status, count(*) FROM duetime_all_jobs WHERE id = ANY(?) "
                    "GROUP BY status",
                    (wanted,),
                )
            )
            + "\n"
            + workers[0].tail()
        ),
    )
    # executions per idempotency key (a lost job's id may be handed out again)
    done = executions(procs.out_dir)
    runs = Counter(str(e["key"]) for e in done)
    never = [k for k in load.acked if k in present and runs[k] == 0]
    duplicates: dict[str, str] = {}
    for key, n in runs.items():
        if n > 1 and key in present:
            attempts = query(
                new,
                "SELECT generation, status, worker_id, error_category, "
                "left(coalesce(error_message, ''), 120) FROM duetime_all_attempts WHERE job_id = ? "
                "ORDER BY generation",
                (present[key],),
            )
            in_lost_history = [
                e
                for e in done
                if e["key"] == key and held_at <= float(e["start"]) <= killed_at  # type: ignore[arg-type]
            ]
            if len(attempts) > 1:
                cause = "retried after a lost attempt: " + "; ".join(
                    f"gen {g} {st} by {w} {cat or ''} {msg}".strip()
                    for g, st, w, cat, msg in attempts
                )
            elif lag and in_lost_history:
                cause = "its first claim was lost with the old primary (asynchronous)"
            else:
                cause = "UNEXPLAINED: one attempt in the store"
            duplicates[key] = f"ran {n} times; {cause}"
    # a lost enqueue, retried with its key, is created again; a kept one is not duplicated
    again = make_app(url)
    try:
        for key in lost:
            task, args = load.args[key]
            assert again.submit(task, args, key=key).created, key
        for key in list(present)[:5]:
            task, args = load.args[key]
            resubmitted = again.submit(task, args, key=key)
            assert not resubmitted.created and resubmitted.job.id == present[key], key
    finally:
        again.close()
    # resume: the first start on the new primary after the promotion
    first = min(
        (float(e["start"]) for e in executions(procs.out_dir) if float(e["start"]) > promoted),  # type: ignore[arg-type]
        default=None,
    )
    assert first is not None, "nothing started after the promotion"
    # and each worker's own first start after it (None: it started nothing)
    worker_resume: dict[str, float | None] = {}
    for w in workers:
        assert w.alive()
        starts_after = [
            float(e["start"])  # type: ignore[arg-type]
            for e in executions(procs.out_dir)
            if e["pid"] == w.pid and float(e["start"]) > promoted  # type: ignore[arg-type]
        ]
        worker_resume[w.name] = round(min(starts_after) - promoted, 2) if starts_after else None
    # the schedule kept ticking on the new primary: no occurrence twice
    ticks_after = [
        e
        for e in executions(procs.out_dir)
        if e["task"] == "fo.tick" and float(e["start"]) > promoted
    ]  # type: ignore[arg-type]
    assert ticks_after, "the schedule did not tick after the promotion"
    twice = query(
        new,
        "SELECT nominal_at, count(*) FROM duetime_all_jobs WHERE schedule_name = 'fo.tick' "
        "GROUP BY nominal_at HAVING count(*) > 1",
    )
    assert not twice, twice
    figures = Figures(
        acked=len(load.acked),
        no_primary_s=round(promoted - (pair.killed_at or promoted), 2),
        lost=len(lost),
        lag_s=lag,
        refused=len(load.refused),
        refused_max_s=round(max((s for _, _, s, _ in load.refused), default=0.0), 2),
        ack_max_s=round(load.ack_max_s, 2),
        duplicates=duplicates,
        resume_s=round(first - promoted, 2),
        worker_resume_s=worker_resume,
        api_recovery_s=round(api_recovery, 2),
        cli_outage=f"exit {cli.returncode} in {cli_s:.1f}s: {cli.stderr.strip()}",
    )
    log.warning("failover figures: %s", figures.line())
    (tmp_path / "figures.json").write_text(figures.line())
    assert not never, f"{len(never)} acknowledged jobs never ran: {never[:10]}"
    assert not [d for d in duplicates.values() if "UNEXPLAINED" in d], duplicates
    assert figures.refused_max_s <= REFUSAL_BOUND, load.refused
    assert figures.ack_max_s <= REFUSAL_BOUND, figures  # none waited past the bound either
    assert {e for _, e, _, _ in load.refused} <= {"StoreUnavailable"}
    assert figures.resume_s <= resume_bound, figures
    for w in workers:
        resumed = worker_resume[w.name]
        assert resumed is not None, f"{w.name} ran nothing after the promotion\n{w.tail()}"
    assert api_recovery <= SERVE_RECOVERY_BOUND, figures
    if pair.synchronous:
        assert not lost, f"{len(lost)} acknowledged enqueues lost: {lost[:10]}"
    else:  # only what was acknowledged after WAL stopped reaching the standby
        early = [k for k in lost if load.acked_at[k] < held_at]
        assert not early, f"lost though acknowledged before the lag began: {early[:10]}"
        if lag:
            assert lost, "WAL was held back and yet nothing acknowledged was lost"
    for w in workers:
        assert not [line for line in w.lines() if "nothing kept" in line], w.tail()
    return figures


def test_synchronous_failover_under_load_loses_nothing(
    sync_pair: ReplicatedPair, procs: Processes, tmp_path: Path
) -> None:
    """The short drill of `make test`: 5 s of load, the primary killed while a handler runs,
    2 s without a primary, promotion, 4 s more load."""
    drill(sync_pair, procs, tmp_path, before=5, outage=2, after=4)


@pytest.mark.long
def test_synchronous_failover_under_load_long(
    sync_pair: ReplicatedPair, procs: Processes, tmp_path: Path
) -> None:
    """The drill of the issue: 20 s of load at 20/s, 3 s without a primary, 20 s after."""
    drill(sync_pair, procs, tmp_path, before=20, outage=3, after=20)


@pytest.mark.long
def test_asynchronous_failover_under_load(
    async_pair: ReplicatedPair, procs: Processes, tmp_path: Path
) -> None:
    """Asynchronous replication, the standby 2 s behind when the primary dies (WAL held back by
    the proxy): the enqueues acknowledged in those 2 s are lost (counted: none acknowledged
    before them), retried with their keys they are created again; everything else holds:
    refusals bounded, resume bounded, no wedged batch, every surviving job ran, and a job run
    twice is explained (its claim was lost with the old primary)."""
    drill(async_pair, procs, tmp_path, before=10, outage=3, after=10, lag=2.0)


# -- reconnecting after a long outage ----------------------------------------------------------


def test_the_pool_reconnects_promptly_after_a_long_outage(async_pair: ReplicatedPair) -> None:
    """One process's pool, asked for a connection every 0.1 s, while the primary is dead for
    OUTAGE s, then the standby promoted: the pool must hand out a connection to the new
    primary within RECONNECT_BOUND s of the promotion, however long the outage was.

    psycopg_pool retries a failed connection with a doubling delay (1, 2, 4, 8, 16 s ... after
    the first failure); left at that, after a 16 s outage its next attempt comes 31 s after the
    first failure, about 15 s after the promotion (after the 52 s of the pg_auto_failover
    drill, 63 s after it: 11 s late)."""
    from duetime.store.postgres.driver import PostgresDriver

    outage = 16.0
    pair = async_pair
    driver = PostgresDriver(pair.url(), pool_timeout=1.0)
    try:
        with driver.single() as c:
            c.native.execute("SELECT 1")
        pair.kill_primary()
        killed = time.monotonic()

        def probe() -> bool:
            try:
                with driver.single() as c, driver.translated():  # as duetime's statements are
                    c.native.execute("SELECT 1")
            except StoreUnavailable:
                return False
            return True

        while time.monotonic() - killed < outage:
            assert not probe(), "a connection during the outage"
            time.sleep(0.1)
        pair.promote()
        promoted = time.monotonic()
        wait_until(probe, 60, "no connection to the new primary", interval=0.1)
        took = time.monotonic() - promoted
        log.warning("reconnected %.2f s after the promotion (outage %.1f s)", took, outage)
        assert took <= RECONNECT_BOUND, f"reconnected {took:.1f} s after the promotion"
    finally:
        driver.close()


def test_connections_left_on_a_node_turned_read_only_are_replaced(
    async_pair: ReplicatedPair,
) -> None:
    """The pool's connections are on the primary; it is fenced in place (still running, made
    read-only with default_transaction_read_only, as a failover manager that demotes a
    reachable old primary does) and the standby is promoted. The pooled sessions stay open
    on the fenced node and their writes fail with SQLSTATE 25006 (cannot execute ... in a
    read-only transaction): duetime must report that as StoreUnavailable, as a lost primary,
    and drop those connections, so that the next write reconnects (libpq skips the read-only
    node) and lands on the new primary, not keep failing on the old one."""
    from duetime.store.postgres.driver import PostgresDriver

    pair = async_pair
    old = pair.primary
    with psycopg.connect(pair.primary_url(), autocommit=True) as conn:
        conn.execute("CREATE TABLE fenced (n int)")
    pair.wait_replayed()
    driver = PostgresDriver(pair.url(), pool_timeout=5.0)
    try:
        # three connections in the pool, all on the old primary
        with driver.transaction() as a, driver.transaction() as b, driver.transaction() as c:
            for x in (a, b, c):
                x.native.execute("SELECT 1")
        with psycopg.connect(pair.primary_url(), autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET default_transaction_read_only = on")
            conn.execute("SELECT pg_reload_conf()")
        pair.promote()  # the old primary keeps running, read-only

        def write(n: int) -> None:
            with driver.transaction() as c, driver.translated():  # as duetime's statements are
                c.native.execute("INSERT INTO fenced VALUES (%s)", (n,))

        errors: list[BaseException] = []
        written = None
        for n in range(1, 6):
            try:
                write(n)
            except Exception as exc:
                errors.append(exc)
                time.sleep(0.2)
            else:
                written = n
                break
        assert all(isinstance(e, StoreUnavailable) for e in errors), errors
        assert written is not None, f"every write failed: {errors}"
        assert len(errors) <= 1, errors  # one failed write, then the new primary
        assert scalar(pair.primary_url(), "SELECT count(*) FROM fenced WHERE n = ?", (written,))
    finally:
        driver.close()
        old.stop()


def test_a_listener_on_a_node_turned_read_only_moves_to_the_new_primary(
    async_pair: ReplicatedPair,
) -> None:
    """A worker's LISTEN connection never writes, so it never meets 25006: left on a primary
    fenced in place (read-only) after the standby's promotion, it would hear nothing of the
    new primary's NOTIFYs until the process restarted. It must find its node read-only
    itself (every LISTENER_CHECK_EVERY s) and fail with StoreUnavailable; the worker opens it
    again (runtime/wakeups.py), on the new primary, whose wake-ups it then hears."""
    from duetime.store.postgres.driver import CHANNEL, PostgresDriver

    pair = async_pair
    old = pair.primary
    driver = PostgresDriver(pair.url(), pool_timeout=5.0)
    listener = driver.listener()
    try:
        assert listener.wait(0.1) == []
        with psycopg.connect(pair.primary_url(), autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET default_transaction_read_only = on")
            conn.execute("SELECT pg_reload_conf()")
        pair.promote()  # the old primary keeps running, read-only
        failures: list[BaseException] = []
        heard = False
        deadline = time.monotonic() + 60  # no fix: the old node's listener hears nothing
        while not heard and time.monotonic() < deadline:
            with psycopg.connect(pair.primary_url(), autocommit=True) as conn:
                conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, "fenced\t0"))
            try:
                heard = any(w.queue == "fenced" for w in listener.wait(0.5))
            except StoreUnavailable as exc:  # as the worker does: closed, opened again
                failures.append(exc)
                listener.close()
                listener = driver.listener()
        assert heard, "no wake-up from the new primary reached the listener"
        assert len(failures) == 1, failures
        assert "read-only" in str(failures[0])
    finally:
        listener.close()
        driver.close()
        old.stop()


# -- fencing across a promotion ----------------------------------------------------------------


def hold_marker(out_dir: Path, job_id: int, worker: WorkerProcess) -> dict[str, Any] | None:
    path = out_dir / f"hold-{job_id}-{worker.pid}"
    if not path.exists():
        return None
    try:
        found: dict[str, Any] = json.loads(path.read_text())
    except ValueError:
        return None
    return found


def test_a_stale_worker_from_the_lost_history_is_fenced(
    async_pair: ReplicatedPair, procs: Processes
) -> None:
    """Asynchronous replication, WAL held back: worker A claims J on the old primary, a claim
    the standby never receives. A is paused (SIGSTOP); the primary dies; the standby is
    promoted; on the new primary C claims K (given the attempt id A's claim had) and B claims
    J (the same generation A had). A resumes (SIGCONT) while B and C still run: A's heartbeats
    and completion must be refused, K's attempt untouched, B's outcome must stand, no batch
    may wedge, and A carries on serving."""
    pair = async_pair
    url = pair.url()
    migrate(url)
    hold = 20.0  # every fo.hold handler's sleep
    enqueuer = make_app(url)
    a = procs.worker(url, "--queues", "a", "--no-planner", app=APP, name="A")
    # Use up the attempt ids the standby knows of: PostgreSQL logs a sequence 32 values ahead,
    # so once log_cnt is 0 the next id (A's claim) is logged after the hold, lost with the old
    # primary, and handed out again by the new one (as in the drill of issue 23).
    for _ in range(5):
        (left,) = query(url, "SELECT log_cnt FROM duetime_attempts_id_seq")[0]
        if int(left) == 0 and int(scalar(url, "SELECT count(*) FROM duetime_all_attempts")) > 0:
            break
        warm = enqueuer.enqueue_many("fo.record", [{} for _ in range(max(1, int(left)))], queue="a")
        ids = {w.id for w in warm}
        wait_until(
            lambda ids=ids: ids <= {e["job"] for e in executions(procs.out_dir)} and a.alive(),
            30,
            lambda: a.tail(),
        )
    else:
        raise AssertionError("could not use up the attempt ids' logged range")
    j = enqueuer.enqueue("fo.hold", {"seconds": hold}, queue="a", delay=1.5)
    enqueuer.close()
    pair.wait_replayed()
    assert pair.proxy is not None
    pair.proxy.hold()  # from here on, nothing the primary commits reaches the standby
    start_a = wait_until(lambda: hold_marker(procs.out_dir, j.id, a), 30, lambda: a.tail())
    a_attempt = query(
        pair.primary_url(),
        "SELECT id, generation FROM duetime_all_attempts WHERE job_id = ?",
        (j.id,),
    )
    assert len(a_attempt) == 1, a_attempt
    a_attempt_id, a_generation = a_attempt[0]
    a.stop()  # SIGSTOP
    pair.kill_primary()
    pair.promote()
    new = pair.primary_url()  # the promoted standby
    assert scalar(
        new, "SELECT status FROM duetime_all_jobs WHERE id = ?", (j.id,)
    ) == "scheduled" or (
        scalar(new, "SELECT count(*) FROM duetime_all_attempts WHERE job_id = ?", (j.id,)) == 0
    ), "A's claim reached the standby: the drill did not lose it"
    # C takes K first, so K's attempt gets the id the lost history gave A's attempt
    after = make_app(url)
    k = after.enqueue("fo.hold", {"seconds": hold}, queue="b")
    c = procs.worker(url, "--queues", "b", "--no-planner", app=APP, name="C")
    wait_until(lambda: hold_marker(procs.out_dir, k.id, c), 30, lambda: c.tail())
    b = procs.worker(url, "--queues", "a", "--no-planner", app=APP, name="B")
    wait_until(lambda: hold_marker(procs.out_dir, j.id, b), 30, lambda: b.tail())
    ((k_attempt_id, k_generation, k_worker),) = query(
        new, "SELECT id, generation, worker_id FROM duetime_all_attempts WHERE job_id = ?", (k.id,)
    )
    ((b_attempt_id, b_generation, b_worker),) = query(
        new, "SELECT id, generation, worker_id FROM duetime_all_attempts WHERE job_id = ?", (j.id,)
    )
    log.warning(
        f"A: attempt {a_attempt_id} gen {a_generation}; new primary: K attempt {k_attempt_id} "
        f"gen {k_generation}, J attempt {b_attempt_id} gen {b_generation}"
    )
    # A resumes while B and C still hold their attempts; its handler has some seconds left
    a.cont()
    # B's and C's handlers end `hold` s after they started; wait for both outcomes
    wait_until(
        lambda: (
            scalar(
                new,
                "SELECT count(*) FROM duetime_all_jobs WHERE id IN (?, ?) AND status = 'succeeded'",
                (j.id, k.id),
            )
            == 2
            and a.alive()
        ),
        hold + 30,
        lambda: (
            "J/K not both succeeded: "
            + str(
                query(
                    new,
                    "SELECT id, status, generation FROM duetime_all_jobs WHERE id IN (?, ?)",
                    (j.id, k.id),
                )
            )
            + "\n"
            + b.tail()
            + "\n"
            + c.tail()
            + "\n"
            + a.tail()
        ),
    )
    time.sleep(2)  # let A's completion retries reach the new primary (refused, or not)
    a_runs = [e for e in executions(procs.out_dir) if e["job"] == j.id and e["pid"] == a.pid]
    assert a_runs, f"A's handler never finished\n{a.tail()}"
    # B's outcome stands, in B's attempt; K's attempt is C's, untouched by A
    j_attempts = query(
        new,
        "SELECT id, generation, worker_id, status FROM duetime_all_attempts WHERE job_id = ?",
        (j.id,),
    )
    assert j_attempts == [(b_attempt_id, b_generation, b_worker, "succeeded")], j_attempts
    k_attempts = query(
        new,
        "SELECT id, generation, worker_id, status FROM duetime_all_attempts WHERE job_id = ?",
        (k.id,),
    )
    assert k_attempts == [(k_attempt_id, k_generation, k_worker, "succeeded")], k_attempts
    # every attempt's finish came from its own worker: B finished J after its handler ended,
    # not at A's resumption
    b_end = max(
        float(e["end"])
        for e in executions(procs.out_dir)  # type: ignore[arg-type]
        if e["job"] == j.id and e["pid"] == b.pid
    )
    j_finished = scalar(
        new,
        "SELECT extract(epoch FROM finished_at) FROM duetime_all_attempts WHERE id = ?",
        (b_attempt_id,),
    )
    assert float(j_finished) >= b_end - 0.5, (
        f"J's attempt finished at {j_finished}, before B's handler ended at {b_end}: "
        f"A's stale outcome was accepted\n{a.tail()}"
    )
    # A said why: its heartbeat found the lease gone, or its outcome was refused as stale
    said = a.events("lease.lost", job_id=j.id) + a.events("outcome.rejected_stale", job_id=j.id)
    assert said, f"A logged no refusal for job {j.id}\n{a.tail()}"
    # no batch wedged: "nothing kept" never logged (let alone repeated)
    for w in (a, b, c):
        kept = [line for line in w.lines() if "nothing kept" in line]
        assert not kept, f"{w.name} wedged a batch: {kept[:3]}"
    # A refused, said so, and serves on: a new job on queue a (B stopped first) runs in A
    assert b.terminate_and_wait() == 0, b.tail()
    more = make_app(url)
    extra = more.enqueue("fo.record", queue="a")
    more.close()
    after.close()
    wait_until(
        lambda: any(e["job"] == extra.id and e["pid"] == a.pid for e in executions(procs.out_dir)),
        30,
        lambda: f"A did not serve again\n{a.tail()}",
    )
    assert a.alive()
    del start_a


@pytest.mark.long
def test_automatic_failover_with_pg_auto_failover(procs: Processes, tmp_path: Path) -> None:
    """pg_auto_failover (a monitor and two nodes, each under its pg_autoctl keeper): the
    primary's keeper and server stop at once (a lost machine), and the monitor promotes the
    secondary by itself: with its default settings the node is promoted about 20 s later and
    takes writes after the old primary's demote timeout (30 s more). The drill's figures hold:
    nothing acknowledged lost (it replicates synchronously), refusals bounded, the workers
    resume within RESUME_BOUND s of the promotion, without a restart."""
    why = available()
    if why is not None:
        pytest.fail(f"the automatic-failover drill needs pg_auto_failover: {why}")
    pair = AutoFailoverPair().start()
    try:
        # the bound of the other drills: once psycopg_pool's reconnection delay doubled
        # without bound, and after these 50 s the workers started again 6 to 20 s after the
        # promotion; at most 2 s apart now (RECONNECT_DELAY_MAX), they start within a second
        figures = drill(pair, procs, tmp_path, before=10, outage=0, after=10)
    finally:
        pair.close()
    assert figures.no_primary_s < 120
