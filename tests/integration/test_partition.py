"""A worker cut off from the database by a silent partition, on real network namespaces.

Worker A runs inside a network namespace (tests/integration/netns.py) joined to this host by
a veth pair; a private PostgreSQL listens on the host's end (and on 127.0.0.1); worker B runs
on the host. While A's handler is in progress the link is cut (iptables DROP inside the
namespace: packets vanish, nothing is refused) until A's lease lapses and B takes the job over
with a new attempt; then the link is healed. Either

- between statements: A's handler is outside any transaction when the link goes; or
- in the middle of a transaction: A's handler has opened its completion transaction and
  written its local effect, its row lock held, when the link goes. The server ends A's
  session after idle_in_transaction_session_timeout (given in the URL here, which also shows
  a URL's value winning over duetime's default), its lock is released and B's attempt, which
  writes the same row, goes through.

`make test` runs the cuts inside the completion transaction and inside a lease renewal (about
10 s each, plus 3-5 s for the namespace and the server); the cut between statements, inside a
claim, a busy worker on duetime's default timeouts, MariaDB's completion transaction and the
relay are under the `long` marker.

Asserted: the takeover comes within the lease plus the timeouts; A's late completion is
refused, its local effect rolled back, and it logs why; one effect is committed in all; A serves
the next job after the heal, without a restart. The figures go to the test's output.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import psycopg
import pytest

from amqpbroker import broker_url
from duetime import App, JobStatus
from duetime.chaos.pgcluster import Cluster, free_port
from integration.apps.partitionapp import LEASE_S, make_app
from integration.netns import NetNamespace, leftovers, missing_tools
from integration.procs import DUETIME, Processes, WorkerProcess, migrate, wait_until
from integration.tcpproxy import Proxy
from integration.test_outbox import delete_broker_queue
from kit import kit_named

APP = "partitionapp:app"
IDLE_IN_TXN_S = 3.0  # the URL's idle_in_transaction_session_timeout (duetime's default: 60s)
TCP_USER_TIMEOUT_MS = 4000
REAP_INTERVAL = "0.5s"
# libpq's client-side TCP settings and the session's server-side ones, short for the test
TIMEOUTS = urlencode(
    {
        "options": (
            f"-c idle_in_transaction_session_timeout={IDLE_IN_TXN_S:g}s "
            "-c tcp_keepalives_idle=2 -c tcp_keepalives_interval=1 -c tcp_keepalives_count=2 "
            f"-c tcp_user_timeout={TCP_USER_TIMEOUT_MS}"
        ),
        "keepalives_idle": "2",
        "keepalives_interval": "1",
        "keepalives_count": "2",
        "tcp_user_timeout": str(TCP_USER_TIMEOUT_MS),
    },
    quote_via=quote,  # libpq reads %20 as a space, not +
)
# from the cut to attempt 2's start on B: A's lease (its last renewal came before the cut) or
# the release of A's lock, then a reaper pass, the retry backoff (0.5 s at most) and B's start
TAKEOVER_BOUND_S = max(LEASE_S, IDLE_IN_TXN_S) + 0.5 + 0.5 + 4.0


class _VethCluster(Cluster):
    """A private PostgreSQL listening on 127.0.0.1 and the veth's host address, trusting the
    namespace's /30."""

    def __init__(self, root: Path, ns: NetNamespace) -> None:
        super().__init__(root)
        self.ns = ns

    def start(self) -> None:
        done = self._run(
            str(self.bin / "initdb"),
            *("-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8"),
            *("--locale=C", "--no-sync"),
        )
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {(done.stderr or done.stdout).strip()[-2000:]}")
        with open(self.data / "pg_hba.conf", "a") as hba:
            hba.write(f"host all all {self.ns.network} trust\n")
        for _ in range(5):
            self.port = free_port()
            self.options = (
                f"-p {self.port} -k {self.root} "
                f"-c listen_addresses=127.0.0.1,{self.ns.host_ip} -c fsync=off "
                "-c max_connections=100"
            )
            done = self._pg_ctl("-l", str(self.log), "-o", self.options, "-w", "-t", "60", "start")
            if done.returncode == 0:
                return
            self._pg_ctl("-m", "immediate", "-w", "stop")
        raise RuntimeError(f"could not start PostgreSQL: {self.tail()}")


@dataclass
class Site:
    ns: NetNamespace
    cluster: _VethCluster

    def url(self, dbname: str, *, inside: bool) -> str:
        host = self.ns.host_ip if inside else "127.0.0.1"
        return f"postgresql://postgres@{host}:{self.cluster.port}/{dbname}?{TIMEOUTS}"


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    why = missing_tools()
    if why:
        pytest.fail(why)
    ns = NetNamespace()
    root = Path(tempfile.mkdtemp(prefix="duetime-partition-"))
    try:
        ns.open()
        cluster = _VethCluster(root, ns)
        try:
            cluster.start()
            yield Site(ns, cluster)
        finally:
            cluster.stop()
    finally:
        ns.close()
        shutil.rmtree(root, ignore_errors=True)
    assert ns.name not in leftovers(), f"namespace {ns.name} was left behind"


@dataclass
class Scene:
    site: Site
    dbname: str
    app: App
    procs: Processes

    @property
    def host_url(self) -> str:
        return self.site.url(self.dbname, inside=False)

    @property
    def blocker_url(self) -> str:
        """For the test's own lock holder: the server default timeouts (no 3 s idle limit)."""
        return f"postgresql://postgres@127.0.0.1:{self.site.cluster.port}/{self.dbname}"

    @property
    def ns_url(self) -> str:
        return self.site.url(self.dbname, inside=True)

    def marker(self, kind: str, job_id: int, attempt: int) -> dict[str, Any] | None:
        path = self.procs.out_dir / f"{kind}-{job_id}-{attempt}"
        return json.loads(path.read_text()) if path.exists() else None

    def go(self, job_id: int) -> None:
        (self.procs.out_dir / f"go-{job_id}").touch()

    def effect(self, job_id: int) -> tuple[int, int, int] | None:
        with psycopg.connect(self.host_url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT n, attempt, pid FROM partition_effects WHERE job_id = %s", (job_id,)
            ).fetchone()
        return None if row is None else (row[0], row[1], row[2])

    def waits_of_the_namespace(self) -> list[str]:
        """What the server's sessions of the namespace's clients wait on (Lock, Client...)."""
        with psycopg.connect(self.host_url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT coalesce(wait_event_type, '') FROM pg_stat_activity WHERE client_addr = %s",
                (self.site.ns.ns_ip,),
            ).fetchall()
        return [r[0] for r in rows]

    def activity(self) -> list[tuple[Any, ...]]:
        """The namespace's sessions: state, wait event type, query (for failure messages)."""
        with psycopg.connect(self.host_url, autocommit=True) as conn:
            return conn.execute(
                "SELECT state, wait_event_type, left(query, 300) FROM pg_stat_activity "
                "WHERE client_addr = %s",
                (self.site.ns.ns_ip,),
            ).fetchall()

    def sessions_of_the_namespace(self) -> list[str]:
        """The states of the server's sessions whose client is inside the namespace."""
        with psycopg.connect(self.host_url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT coalesce(state, '') FROM pg_stat_activity WHERE client_addr = %s",
                (self.site.ns.ns_ip,),
            ).fetchall()
        return [r[0] for r in rows]


@pytest.fixture
def scene(site: Site, tmp_path: Path) -> Iterator[Scene]:
    dbname = f"duetime_partition_{int(time.time() * 1000) % 10**9}"
    admin = f"postgresql://postgres@127.0.0.1:{site.cluster.port}/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {dbname}")
    host_url = site.url(dbname, inside=False)
    migrate(host_url)
    with psycopg.connect(host_url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE partition_effects (job_id bigint PRIMARY KEY, n int NOT NULL, "
            "attempt int NOT NULL, pid int NOT NULL)"
        )
    procs = Processes(tmp_path)
    app = make_app(host_url)
    try:
        yield Scene(site, dbname, app, procs)
    finally:
        if site.ns.cut_now:
            site.ns.heal()
        procs.finish()
        app.close()


def _worker(scene: Scene, name: str, *, inside: bool) -> WorkerProcess:
    return scene.procs.worker(
        scene.ns_url if inside else scene.host_url,
        "--reap-interval",
        REAP_INTERVAL,
        "--concurrency",
        "2",
        name=name,
        app=APP,
        prefix=scene.site.ns.prefix() if inside else (),
    )


def _partition_drill(
    scene: Scene, hold: str, capsys: pytest.CaptureFixture[str], *, in_heartbeat: bool = False
) -> dict[str, float]:
    """The drill of every case; returns its figures (seconds). With in_heartbeat, the cut
    comes while A's lease renewal is inside its transaction: the test holds the job's row
    so the renewal's UPDATE waits, cuts the link, and lets it go; the renewal then holds its
    locks, its answer lost, while the server waits for A's next statement."""
    ns = scene.site.ns
    a = _worker(scene, "A-partitioned", inside=True)
    job = scene.app.enqueue("partition.effect", {"hold": hold})
    wait_until(
        lambda: a.alive() and scene.marker("started", job.id, 1),
        30,
        lambda: f"A never started the job\n{a.tail()}",
    )
    # B starts now, warm by the cut: it cannot take the job while A's lease stands
    b = _worker(scene, "B-host", inside=False)
    wait_until(lambda: b.alive() and b.events("worker.started"), 30, b.tail)
    at_hold = "intxn" if hold == "inside" else "started"
    if hold == "inside":  # A opens its transaction and writes its effect; the cut follows
        (scene.procs.out_dir / f"enter-{job.id}").touch()
        wait_until(
            lambda: a.alive() and scene.marker(at_hold, job.id, 1),
            10,
            lambda: f"A never reached its hold ({at_hold})\n{a.tail()}",
            interval=0.01,
        )
        # A's session holds the effect's row lock, idle in its transaction
        assert any(s.startswith("idle in transaction") for s in scene.sessions_of_the_namespace())
    blocker = None
    if in_heartbeat:  # held for a renewal's wait at most (1 s): A's lease stays valid
        blocker = psycopg.connect(scene.blocker_url)
        blocker.execute("SELECT 1 FROM duetime_jobs WHERE id = %s FOR UPDATE", (job.id,))
        wait_until(
            lambda: "Lock" in scene.waits_of_the_namespace(),
            10,
            "A's lease renewal never waited on the job's row",
            interval=0.02,
        )

    cut_at = time.time()
    ns.cut()
    figures: dict[str, float] = {}
    if blocker is not None:  # the renewal goes on at the server; its answer is lost
        blocker.commit()
        blocker.close()
        wait_until(
            lambda: any(
                s.startswith("idle in transaction") for s in scene.sessions_of_the_namespace()
            ),
            5,
            "A's renewal did not stay open at the server",
            interval=0.02,
        )
    if hold == "inside" or blocker is not None:
        wait_until(
            lambda: (
                not any(
                    s.startswith("idle in transaction") for s in scene.sessions_of_the_namespace()
                )
            ),
            IDLE_IN_TXN_S + 10,
            "the server kept A's session idle in its transaction",
            interval=0.1,
        )
        figures["lock_released_s"] = time.time() - cut_at
        last = scene.marker(at_hold, job.id, 1) if hold == "inside" else None
        if last is not None:  # the idle time counts from A's last statement
            figures["lock_released_after_last_statement_s"] = time.time() - last["at"]
    done = wait_until(
        lambda: (
            b.alive()
            and (j := scene.app.get_job(job.id)) is not None
            and j.status is JobStatus.SUCCEEDED
            and j
        ),
        TAKEOVER_BOUND_S + 20,
        lambda: f"B did not take the job over: {scene.app.get_job(job.id)}\n{b.tail()}",
        interval=0.1,
    )
    started_2 = scene.marker("started", job.id, 2)
    committed_2 = scene.marker("committed", job.id, 2)
    assert started_2 and committed_2 and started_2["pid"] == b.pid, (started_2, b.pid)
    figures["takeover_s"] = started_2["at"] - cut_at
    assert done.attempts == 2
    assert scene.marker("refused", job.id, 1) is None  # A has not come back yet

    # heal; A's handler goes on: its completion is refused and its effect rolled back
    ns.heal()
    healed_at = time.time()
    scene.go(job.id)
    refused = wait_until(
        lambda: a.alive() and scene.marker("refused", job.id, 1),
        30,
        lambda: f"A's late completion was not refused\n{a.tail()}",
    )
    rejected = a.wait_event("outcome.rejected_stale", 30, job_id=job.id)
    figures["refused_after_heal_s"] = refused["at"] - healed_at
    assert scene.marker("committed", job.id, 1) is None, "A's completion must not commit"
    assert len(a.events("outcome.rejected_stale", job_id=job.id)) == 1, a.tail()
    assert a.events("job.succeeded", job_id=job.id) == [], a.tail()
    assert scene.effect(job.id) == (1, 2, b.pid), "one effect, attempt 2's, committed"
    final = scene.app.get_job(job.id)
    assert final is not None and final.status is JobStatus.SUCCEEDED and final.attempts == 2
    first, second = final.attempt_history
    assert first.late_outcome is not None, first  # A's report is kept on its lost attempt
    assert second.status.value == "succeeded"

    # A serves again without a restart: with B gone, the next job is A's
    assert b.terminate_and_wait() == 0, b.tail()
    after = scene.app.enqueue("partition.effect", {})
    served = wait_until(
        lambda: a.alive() and scene.marker("committed", after.id, 1),
        30,
        lambda: f"A did not serve again after the heal\n{a.tail()}",
    )
    assert served["pid"] == a.pid
    figures["serving_again_s"] = served["at"] - healed_at
    assert scene.effect(after.id) == (1, 1, a.pid)
    assert a.terminate_and_wait() == 0, a.tail()
    with capsys.disabled():
        sys.stdout.write(
            f"\n[partition {'in a lease renewal' if in_heartbeat else hold}] "
            + ", ".join(f"{k}={v:.2f}" for k, v in figures.items())
            + f"; A's error: {refused['error'][:100]}; rejected: {rejected.get('reason', '')}\n"
        )
    return figures


def test_a_cut_inside_the_completion_transaction_releases_its_locks_in_bounded_time(
    scene: Scene, capsys: pytest.CaptureFixture[str]
) -> None:
    figures = _partition_drill(scene, "inside", capsys)
    # the server ended A's session: its idle time counts from A's last statement, before the cut
    assert figures["lock_released_after_last_statement_s"] < IDLE_IN_TXN_S + 3, figures
    assert figures["takeover_s"] < TAKEOVER_BOUND_S, figures


@pytest.mark.long
def test_a_cut_between_statements_fences_the_late_completion(
    scene: Scene, capsys: pytest.CaptureFixture[str]
) -> None:
    figures = _partition_drill(scene, "before", capsys)
    assert figures["takeover_s"] < TAKEOVER_BOUND_S, figures


def test_a_cut_inside_a_lease_renewal_releases_its_locks_in_bounded_time(
    scene: Scene, capsys: pytest.CaptureFixture[str]
) -> None:
    figures = _partition_drill(scene, "before", capsys, in_heartbeat=True)
    assert figures["lock_released_s"] < IDLE_IN_TXN_S + 3, figures
    assert figures["takeover_s"] < TAKEOVER_BOUND_S + IDLE_IN_TXN_S, figures


@pytest.mark.long
def test_a_cut_inside_a_claim_holds_up_nothing(
    scene: Scene, capsys: pytest.CaptureFixture[str]
) -> None:
    """A claim held at the server (a table lock of the test's makes its write wait) when the
    link goes: when the lock is let go, the claim either commits there (the plain claim is one
    pipeline, its COMMIT already sent: only the answer is lost, and the lease lapses) or sits
    idle in its transaction waiting for A's next statement, and the server ends it (the
    controlled claim: pick, then start) and rolls it back. Either way no session of A's holds
    locks past the timeouts, A never runs the job, and B runs it once."""
    ns = scene.site.ns
    blocker = psycopg.connect(scene.blocker_url)
    job = scene.app.enqueue("partition.effect", {})
    # claims wait to write (a claim writes the job's row alone: migration 22)
    blocker.execute("LOCK TABLE duetime_jobs IN SHARE MODE")
    a = _worker(scene, "A-partitioned", inside=True)
    wait_until(
        lambda: a.alive() and "Lock" in scene.waits_of_the_namespace(),
        30,
        lambda: f"A's claim never waited on the lock\n{a.tail()}",
        interval=0.02,
    )
    waiting = scene.activity()
    cut_at = time.time()
    ns.cut()
    blocker.commit()
    blocker.close()
    wait_until(
        lambda: (
            not any(
                s.startswith(("idle in transaction", "active"))
                for s in scene.sessions_of_the_namespace()
            )
        ),
        IDLE_IN_TXN_S + 3,
        lambda: f"A's claim kept its transaction: {waiting} then {scene.activity()}",
        interval=0.05,
    )
    settled_s = time.time() - cut_at
    after_cut = scene.app.get_job(job.id)
    assert after_cut is not None
    committed_at_server = after_cut.status is JobStatus.RUNNING
    b = _worker(scene, "B-host", inside=False)
    wait_until(lambda: b.alive() and b.events("worker.started"), 30, b.tail)
    b_up = time.time()  # B could only start after the cut here: its start-up is not counted
    done = wait_until(
        lambda: (
            b.alive()
            and (j := scene.app.get_job(job.id)) is not None
            and j.status is JobStatus.SUCCEEDED
            and j
        ),
        TAKEOVER_BOUND_S + 20,
        lambda: f"B did not run the job: {scene.app.get_job(job.id)}\n{b.tail()}",
        interval=0.1,
    )
    started = scene.marker("started", job.id, done.attempts)
    assert started is not None and started["pid"] == b.pid, started
    takeover_s = started["at"] - cut_at
    takeover_once_up_s = started["at"] - max(cut_at, b_up)
    ns.heal()
    healed_at = time.time()
    assert b.terminate_and_wait() == 0, b.tail()
    after = scene.app.enqueue("partition.effect", {})
    served = wait_until(
        lambda: a.alive() and scene.marker("committed", after.id, 1),
        30,
        lambda: f"A did not serve again after the heal\n{a.tail()}",
    )
    assert served["pid"] == a.pid
    assert scene.effect(job.id) == (1, done.attempts, b.pid), "one effect, B's"
    if committed_at_server:  # A's attempt 1 was reaped
        assert done.attempts == 2
        assert done.attempt_history[0].status.value == "lost", done.attempt_history[0]
    else:  # rolled back: B's is the first attempt
        assert done.attempts == 1
    assert a.terminate_and_wait() == 0, a.tail()
    with capsys.disabled():
        sys.stdout.write(
            f"\n[partition in a claim] claim "
            f"{'committed at the server' if committed_at_server else 'rolled back'}, "
            f"settled_s={settled_s:.2f}, takeover_s={takeover_s:.2f} "
            f"({takeover_once_up_s:.2f} once B was up), "
            f"serving_again_s={served['at'] - healed_at:.2f}\n"
        )
    assert takeover_once_up_s < TAKEOVER_BOUND_S


@pytest.mark.long
def test_a_busy_worker_cut_off_with_the_default_timeouts(
    site: Site, scene: Scene, capsys: pytest.CaptureFixture[str]
) -> None:
    """duetime's own defaults (no timeout in the URL): A claims, heartbeats and completes a
    stream of jobs when the link goes, one of them held inside its completion transaction, so
    the cut also lands on statements in flight (a claim's pipeline, a heartbeat, a commit).
    The server ends A's lost sessions by its keepalives and tcp_user_timeout (30 s) or, at
    the latest, idle_in_transaction_session_timeout (60 s); every job ends with exactly one
    effect; A serves again after the heal."""
    plain = f"postgresql://postgres@{{}}:{site.cluster.port}/{scene.dbname}"
    a = scene.procs.worker(
        plain.format(site.ns.host_ip),
        *("--reap-interval", REAP_INTERVAL, "--concurrency", "4"),
        name="A-partitioned",
        app=APP,
        prefix=site.ns.prefix(),
    )
    stop = threading.Event()
    enqueued: list[int] = []

    def stream() -> None:
        while not stop.is_set():
            enqueued.append(scene.app.enqueue("partition.effect", {}).id)
            time.sleep(0.05)

    feeder = threading.Thread(target=stream, daemon=True)
    feeder.start()
    try:
        held = scene.app.enqueue("partition.effect", {"hold": "inside"})
        (scene.procs.out_dir / f"enter-{held.id}").touch()  # straight into its transaction
        wait_until(
            lambda: a.alive() and scene.marker("intxn", held.id, 1),
            30,
            lambda: f"A never held its transaction\n{a.tail()}",
        )
        time.sleep(1.0)  # A busy with the stream
        cut_at = time.time()
        site.ns.cut()
        b = scene.procs.worker(
            plain.format("127.0.0.1"),
            *("--reap-interval", REAP_INTERVAL, "--concurrency", "4"),
            name="B-host",
            app=APP,
        )
        wait_until(
            lambda: (
                not any(
                    s.startswith("idle in transaction") for s in scene.sessions_of_the_namespace()
                )
            ),
            75,
            "the server kept A's session idle in its transaction past 60 s",
            interval=0.2,
        )
        released_s = time.time() - cut_at
        wait_until(
            lambda: b.alive() and scene.marker("committed", held.id, 2),
            30,
            lambda: f"B did not take the held job over\n{b.tail()}",
        )
        started_2 = scene.marker("started", held.id, 2)
        committed_2 = scene.marker("committed", held.id, 2)
        assert started_2 is not None and committed_2 is not None
        takeover_s = started_2["at"] - cut_at
        committed_s = committed_2["at"] - cut_at  # its write waited for A's lock
        gone = wait_until(
            lambda: (time.time() - cut_at) if not scene.sessions_of_the_namespace() else None,
            75,
            "the server kept sessions of the lost worker",
            interval=0.2,
        )
    finally:
        stop.set()
        feeder.join(10)
    site.ns.heal()
    healed_at = time.time()
    scene.go(held.id)
    wait_until(
        lambda: a.alive() and scene.marker("refused", held.id, 1),
        60,
        lambda: f"A's late completion was not refused\n{a.tail()}",
    )
    jobs = [held.id, *enqueued]
    wait_until(
        lambda: all(
            (j := scene.app.get_job(i)) is not None and j.status is JobStatus.SUCCEEDED
            for i in jobs
        ),
        120,
        "not every job succeeded",
        interval=0.5,
    )
    with psycopg.connect(scene.host_url, autocommit=True) as conn:
        effects = dict(conn.execute("SELECT job_id, n FROM partition_effects").fetchall())
    assert {i: effects.get(i) for i in jobs} == dict.fromkeys(jobs, 1), "one effect per job"
    assert b.terminate_and_wait() == 0, b.tail()
    after = scene.app.enqueue("partition.effect", {})
    served = wait_until(
        lambda: a.alive() and scene.marker("committed", after.id, 1),
        90,
        lambda: f"A did not serve again after the heal\n{a.tail()}",
    )
    assert served["pid"] == a.pid
    assert a.terminate_and_wait() == 0, a.tail()
    stale = len(a.events("outcome.rejected_stale"))
    with capsys.disabled():
        sys.stdout.write(
            f"\n[partition busy, defaults] {len(jobs)} jobs, lock_released_s={released_s:.1f}, "
            f"sessions_gone_s={gone:.1f}, takeover_s={takeover_s:.1f}, "
            f"taken_over_committed_s={committed_s:.1f}, "
            f"serving_again_s={served['at'] - healed_at:.1f}, A's refused outcomes={stale}\n"
        )
    assert released_s < 60 + 5 and committed_s < LEASE_S + 60 + 6


class _ProxyThread:
    """tcpproxy.Proxy on its own event loop in a thread, listening on `host`."""

    def __init__(self, host: str, target: tuple[str, int]) -> None:
        self.loop = asyncio.new_event_loop()
        self.proxy = Proxy(*target, host=host)
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.proxy.start(), self.loop).result(10)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.proxy.stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def _relay(scene: Scene, broker: str) -> WorkerProcess:
    """`duetime relay` inside the namespace, logging JSON lines to its own file."""
    procs = scene.procs
    log_path = procs.logs_dir / "relay.log"
    command = [
        *scene.site.ns.prefix(),
        str(DUETIME),
        "relay",
        *("--database-url", scene.ns_url, "--broker-url", broker, "--log-format", "json"),
    ]
    with open(log_path, "wb") as log:
        popen = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=procs.env(),
            cwd=procs.root,
        )
    proc = WorkerProcess(popen, log_path, "relay")
    procs.started.append(proc)
    return proc


@pytest.mark.long
@pytest.mark.parametrize("cut", ["broker", "database", "both"])
def test_a_relay_cut_off_loses_nothing_and_resumes(
    scene: Scene, cut: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The relay (outbox mode) runs inside the namespace: RabbitMQ is reached through a TCP
    proxy on the veth's host end. A stream of jobs goes through it to a broker-fed worker on
    the host while its link to the broker, to the database or to both is cut for 8 s (longer
    than the test's 4 s tcp_user_timeout), then healed. Every job succeeds with one effect;
    duplicates are only what at-least-once allows (a republished message whose attempt
    was already accepted is dropped by the worker); the relay resumes without a restart."""
    amqp = broker_url()
    parts = urlsplit(amqp)
    proxy = _ProxyThread(scene.site.ns.host_ip, (parts.hostname or "127.0.0.1", parts.port or 5672))
    through_proxy = parts._replace(
        netloc=f"{parts.netloc.rpartition('@')[0]}@{scene.site.ns.host_ip}:{proxy.proxy.port}"
    ).geturl()
    queue = f"part{uuid.uuid4().hex[:10]}"
    scene.app.set_queue(queue, dispatch="outbox")
    stop = threading.Event()
    enqueued: list[int] = []
    try:
        relay = _relay(scene, through_proxy)
        worker = scene.procs.worker(
            scene.host_url, "--broker-url", amqp, "--queues", queue, name="B-host", app=APP
        )

        def stream() -> None:
            while not stop.is_set():
                enqueued.append(scene.app.enqueue("partition.effect", {}, queue=queue).id)
                time.sleep(0.05)

        feeder = threading.Thread(target=stream, daemon=True)
        feeder.start()

        def succeeded() -> int:
            with psycopg.connect(scene.host_url, autocommit=True) as conn:
                row = conn.execute(
                    "SELECT count(*) FROM duetime_all_jobs WHERE status = 'succeeded'"
                ).fetchone()
            return int(row[0]) if row else 0

        wait_until(
            lambda: relay.alive() and worker.alive() and succeeded() >= 20,
            60,
            lambda: f"the outbox did not get going\n{relay.tail()}\n{worker.tail()}",
        )
        ports = {
            "broker": [proxy.proxy.port],
            "database": [scene.site.cluster.port],
            "both": [],
        }[cut]
        scene.site.ns.cut(ports)
        time.sleep(8.0)
        during = succeeded()
        scene.site.ns.heal()
        healed_at = time.time()
        time.sleep(2.0)
        stop.set()
        feeder.join(10)
        jobs = list(enqueued)
        drained = wait_until(
            lambda: relay.alive() and succeeded() >= len(jobs) and time.time(),
            120,
            lambda: f"{succeeded()} of {len(jobs)} jobs succeeded\n{relay.tail()}",
            interval=0.2,
        )
        with psycopg.connect(scene.host_url, autocommit=True) as conn:
            effects = dict(conn.execute("SELECT job_id, n FROM partition_effects").fetchall())
            attempts = dict(
                conn.execute(
                    "SELECT id, attempts FROM duetime_all_jobs WHERE id = ANY(%s)", (jobs,)
                )
            )
            published = int(
                conn.execute("SELECT count(*) FROM duetime_outbox").fetchone()[0]  # type: ignore[index]
            )
        assert {i: effects.get(i) for i in jobs} == dict.fromkeys(jobs, 1), "one effect per job"
        again = sum(1 for n in attempts.values() if n > 1)
        dropped = len(worker.events("broker.message_dropped"))  # redelivered, already run
        publish_failed = len(relay.events("relay.publish_failed"))
        assert relay.terminate_and_wait() == 0, relay.tail()
        assert worker.terminate_and_wait() == 0, worker.tail()
        with capsys.disabled():
            sys.stdout.write(
                f"\n[partition relay, cut from {cut}] {len(jobs)} jobs, {during} succeeded "
                f"by the end of the cut, drained {drained - healed_at:.1f}s after the heal, "
                f"jobs with a second attempt: {again}, outbox events: {published}, "
                f"messages dropped as already run: {dropped}, failed publishes: {publish_failed}\n"
            )
    finally:
        stop.set()
        proxy.close()
        asyncio.run(delete_broker_queue(amqp, queue))


@pytest.mark.long
def test_mariadb_a_cut_inside_the_completion_transaction(
    site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same cut on MariaDB: worker A (in the namespace) reaches the server through a TCP
    proxy on the veth's host end, and is cut off right after its write in the completion
    transaction. MariaDB's idle_transaction_timeout (3 s here, from the URL) ends A's
    session and releases its row lock; B on the host takes the job over; A's late outcome is
    refused and its write rolled back; A serves again after the heal."""
    kit = kit_named("mysql")
    url = kit.fresh_url(tmp_path)
    migrate(url)
    kit.execute(
        url,
        "CREATE TABLE IF NOT EXISTS partition_effects (job_id BIGINT PRIMARY KEY, "
        "n INT NOT NULL, attempt INT NOT NULL, pid INT NOT NULL)",
    )
    kit.execute(url, "DELETE FROM partition_effects")
    parts = urlsplit(url)
    proxy = _ProxyThread(site.ns.host_ip, (parts.hostname or "127.0.0.1", parts.port or 3306))
    query = (
        f"idle_transaction_timeout={IDLE_IN_TXN_S:g}&keepalives_idle=2&keepalives_interval=1"
        f"&keepalives_count=2&tcp_user_timeout={TCP_USER_TIMEOUT_MS}"
    )
    userinfo = parts.netloc.rpartition("@")[0]
    ns_url = parts._replace(
        netloc=f"{userinfo}@{site.ns.host_ip}:{proxy.proxy.port}", query=query
    ).geturl()
    host_url = parts._replace(query=query).geturl()
    procs = Processes(tmp_path)
    app = make_app(url)

    def marker(kind: str, job_id: int, attempt: int) -> dict[str, Any] | None:
        path = procs.out_dir / f"{kind}-{job_id}-{attempt}"
        return json.loads(path.read_text()) if path.exists() else None

    def effect(job_id: int) -> tuple[Any, ...] | None:
        rows = kit.execute(
            url, "SELECT n, attempt, pid FROM partition_effects WHERE job_id = ?", [job_id]
        )
        return rows[0] if rows else None

    def worker(name: str, database_url: str, inside: bool) -> WorkerProcess:
        return procs.worker(
            database_url,
            *("--reap-interval", REAP_INTERVAL, "--concurrency", "2"),
            name=name,
            app=APP,
            prefix=site.ns.prefix() if inside else (),
        )

    try:
        a = worker("A-partitioned", ns_url, inside=True)
        job = app.enqueue("partition.effect", {"hold": "inside"})
        wait_until(lambda: a.alive() and marker("started", job.id, 1), 30, a.tail)
        b = worker("B-host", host_url, inside=False)
        wait_until(lambda: b.alive() and b.events("worker.started"), 30, b.tail)
        (procs.out_dir / f"enter-{job.id}").touch()
        wait_until(lambda: a.alive() and marker("intxn", job.id, 1), 10, a.tail, interval=0.01)
        cut_at = time.time()
        site.ns.cut()
        wait_until(
            lambda: b.alive() and marker("committed", job.id, 2),
            TAKEOVER_BOUND_S + 20,
            lambda: f"B did not take the job over\n{b.tail()}",
        )
        started_2 = marker("started", job.id, 2)
        committed_2 = marker("committed", job.id, 2)
        assert started_2 is not None and committed_2 is not None
        assert started_2["pid"] == b.pid
        site.ns.heal()
        healed_at = time.time()
        (procs.out_dir / f"go-{job.id}").touch()
        refused = wait_until(
            lambda: a.alive() and marker("refused", job.id, 1),
            60,
            lambda: f"A's late completion was not refused\n{a.tail()}",
        )
        a.wait_event("outcome.rejected_stale", 30, job_id=job.id)
        assert marker("committed", job.id, 1) is None
        assert len(a.events("outcome.rejected_stale", job_id=job.id)) == 1, a.tail()
        assert effect(job.id) == (1, 2, b.pid), "one effect, attempt 2's, committed"
        assert b.terminate_and_wait() == 0, b.tail()
        after = app.enqueue("partition.effect", {})
        served = wait_until(
            lambda: a.alive() and marker("committed", after.id, 1),
            60,
            lambda: f"A did not serve again after the heal\n{a.tail()}",
        )
        assert served["pid"] == a.pid
        assert a.terminate_and_wait() == 0, a.tail()
        takeover_s = started_2["at"] - cut_at
        committed_s = committed_2["at"] - cut_at  # B's write waited for A's row lock
        with capsys.disabled():
            sys.stdout.write(
                f"\n[partition mariadb inside] takeover_s={takeover_s:.2f}, "
                f"taken_over_committed_s={committed_s:.2f}, "
                f"serving_again_s={served['at'] - healed_at:.2f}; "
                f"A's error: {refused['error'][:120]}\n"
            )
        assert committed_s < TAKEOVER_BOUND_S + IDLE_IN_TXN_S, committed_s
    finally:
        if site.ns.cut_now:
            site.ns.heal()
        procs.finish()
        app.close()
        proxy.close()
