"""The chaos driver: run duetime on a private PostgreSQL under faults, then check the history.

    python -m duetime.chaos.run [--jobs N] [--duration S] [--workers K] [--seed X] [--report FILE]
                                [--outbox [--broker-url URL] [--relays R]]

1. initdb + pg_ctl a private cluster on a free port in a temporary directory (as root, the
   server runs as the `postgres` OS user), migrate, create the chaos tables;
2. start K `duetime worker --app duetime.chaos.app:app` processes (JSON logs per process);
3. enqueue N jobs spread over the first part of the run (immediate, delayed, failing then
   succeeding, permanently failing, slow, external-provider, with deadlines, cancelled right
   after enqueue) plus an every-2-seconds schedule; with --dependencies a share come as groups
   and chains, with --sequences a share go into sequences (a thread dismisses dead jobs that
   hold theirs) and a few are unique enqueues made twice;
4. for `duration` seconds: SIGKILL a random worker every few seconds and start a replacement,
   SIGSTOP a worker past its lease and SIGCONT it, restart PostgreSQL (pg_ctl restart -m fast)
   at least twice;
   with --outbox (docs/outbox.md), every job goes through RabbitMQ: R `duetime relay`
   processes are SIGKILLed at random and replaced, and RabbitMQ is stopped and restarted;
   with --failover sync|async (docs/production.md), PostgreSQL is a primary and a streaming
   standby (duetime.chaos.pgpair) on a multi-host URL, and instead of restarts the primary is
   killed (pg_ctl stop -m immediate), the standby promoted after --outage s, and the dead node
   rebuilt as the new standby (so the next failover goes the other way);
5. stop the faults, pause the schedule, wait (bounded) until every job is terminal, SIGTERM the
   workers, and run duetime.chaos.checker. Exit 1 on any violation.

Longer than most modules: it is one script, read top to bottom as the run it drives.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import psycopg

from duetime import Step, step
from duetime.chaos import checker
from duetime.chaos.app import app as chaos_app
from duetime.chaos.app import create_tables
from duetime.chaos.netns import NetNamespace, missing_tools
from duetime.chaos.pgcluster import Cluster
from duetime.chaos.pgpair import ReplicatedPair
from duetime.chaos.skew import missing as skew_missing
from duetime.chaos.skew import skewed_env

APP_SPEC = "duetime.chaos.app:app"
T = TypeVar("T")
SCHEDULE = "chaos-every-2s"
TERMINAL = ("succeeded", "dead", "cancelled", "expired", "parked")


def say(text: str) -> None:
    sys.stdout.write(f"[chaos {datetime.now(UTC):%H:%M:%S}] {text}\n")
    sys.stdout.flush()


# -- workers --------------------------------------------------------------------------------


def _duetime_command() -> list[str]:
    script = Path(sys.executable).with_name("duetime")
    if script.exists():
        return [str(script)]
    found = shutil.which("duetime")
    if found:
        return [found]
    return [sys.executable, "-c", "import sys; from duetime.cli import main; sys.exit(main())"]


@dataclass
class Workers:
    url: str
    logs: Path
    concurrency: int
    target: int = 0  # how many should be running; top_up() restores it
    respawned: int = 0  # started because one had exited (e.g. it could not connect)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    started: int = 0
    broker_url: str | None = None  # the outbox variant: broker-fed workers
    role: str = "worker"  # or "relay" (the outbox variant's relays)
    name: str = "worker"  # its log files: {name}{n}.log
    prefix: list[str] = field(default_factory=list)  # e.g. ip netns exec NS
    env: dict[str, str] | None = None  # e.g. libfaketime's (duetime.chaos.skew)

    def spawn(self) -> subprocess.Popen[bytes]:
        self.started += 1
        if self.role == "relay":
            assert self.broker_url is not None
            command = [
                *_duetime_command(),
                "relay",
                "--database-url",
                self.url,
                "--broker-url",
                self.broker_url,
                "--dispatch-lease",
                "20s",
                "--log-format",
                "json",
            ]
            return self._start(command, f"relay{self.started}.log")
        command = [
            *self.prefix,
            *_duetime_command(),
            "worker",
            "--app",
            APP_SPEC,
            "--database-url",
            self.url,
            "--reap-interval",
            "1s",
            "--poll-interval",
            "0.2s",
            "--grace",
            "10s",
            "--concurrency",
            str(self.concurrency),
            "--log-format",
            "json",
        ]
        if self.broker_url is not None:
            command += ["--broker-url", self.broker_url]
        return self._start(command, f"{self.name}{self.started}.log")

    def _start(self, command: list[str], log_name: str) -> subprocess.Popen[bytes]:
        env = {**(self.env if self.env is not None else os.environ), "PYTHONUNBUFFERED": "1"}
        env.pop("DUETIME_DATABASE_URL", None)
        env.pop("DUETIME_BROKER_URL", None)
        with open(self.logs / log_name, "wb") as log:
            proc = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env
            )
        self.procs.append(proc)
        return proc

    def top_up(self) -> None:
        """Start workers until `target` run (a replacement started during an outage exits:
        a worker does not wait for a database it cannot reach at startup)."""
        while len(self.alive()) < self.target:
            self.respawned += 1
            self.spawn()

    def alive(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in self.procs if p.poll() is None]

    def kill_all(self) -> None:
        for p in self.alive():
            try:
                p.send_signal(signal.SIGCONT)
                p.kill()
            except ProcessLookupError:
                pass
            p.wait(10)


# -- the workload ---------------------------------------------------------------------------

KINDS: list[tuple[str, float]] = [
    ("immediate", 0.38),
    ("delayed", 0.15),
    ("flaky", 0.10),
    ("doomed", 0.05),
    ("slow", 0.06),
    ("provider", 0.14),
    ("deadline", 0.06),
    ("cancelled", 0.06),
]


def _job_for(kind: str, n: int, rng: random.Random) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(task, args, enqueue options) for job number n of this kind."""
    args: dict[str, Any] = {"n": n, "kind": kind}
    options: dict[str, Any] = {"key": f"chaos-{n}"}
    task = "chaos.effect"
    if kind == "delayed":
        options["delay"] = rng.uniform(1, 6)
    elif kind == "flaky":
        task = "chaos.flaky"
    elif kind == "doomed":
        task = "chaos.doomed"
    elif kind == "slow":
        task = "chaos.slow"
        args["seconds"] = round(rng.uniform(1, 3), 2)
    elif kind == "provider":
        task = "chaos.provider"
        args["pause"] = round(rng.uniform(0.2, 1.5), 2)
    elif kind == "deadline":
        # seconds from the enqueue call: a call retried through an outage takes its deadline
        # from its own time (a deadline fixed at the first try could pass before a retry is
        # accepted, and the request would then be refused as invalid at every retry)
        options["deadline_in"] = rng.uniform(0.5, 20)
    elif kind == "cancelled":
        options["delay"] = 2
    return task, args, options


# --dependencies: this share of the jobs' numbers makes a graph instead of one job
GRAPH_SHARE = 0.3
GRAPH_STEP_KINDS: list[tuple[str, float]] = [  # a graph's steps, of _job_for's kinds
    ("immediate", 0.5),
    ("flaky", 0.2),
    ("slow", 0.12),
    ("doomed", 0.08),
    ("delayed", 0.1),
]


def _graph_for(n: int, rng: random.Random) -> tuple[str, Callable[[], list[Any]]]:
    """(shape, the enqueue call) of graph number n: a group of 2 to 6 steps with a callback
    (on_parent_failure "cancel" or "run"), or a chain of 2 to 4 steps, in one transaction
    (app.group, app.chain). Steps that wait for nothing carry keys (a retried call returns
    them); the others cannot, so a call retried after its commit makes a second callback or
    tail on the same roots: another graph, judged like the first."""
    names = [k for k, _ in GRAPH_STEP_KINDS]
    weights = [w for _, w in GRAPH_STEP_KINDS]

    def one(i: int, first: bool) -> Step:
        task, args, options = _job_for(rng.choices(names, weights)[0], n, rng)
        options = {k: v for k, v in options.items() if k != "key"}
        if first:
            options["key"] = f"chaos-{n}-{i}"
        return step(task, args, **options)

    if rng.random() < 0.5:
        members = [one(i, True) for i in range(rng.randint(2, 6))]
        policy = rng.choice(["cancel", "run"])
        then = step(
            "chaos.effect", {"n": n, "kind": f"callback-{policy}"}, on_parent_failure=policy
        )

        def group() -> list[Any]:
            made = chaos_app.group(members, then=then)
            return [*made.jobs, made.callback]

        return "group", group
    steps = [one(i, i == 0) for i in range(rng.randint(2, 4))]
    return "chain", lambda: chaos_app.chain(*steps)


# --sequences: this share of the jobs' numbers makes a job of a sequence instead, of one of
# `sequence_keys` keys ("acct-K"): most are enqueued with `sequence=` per enqueue, of these kinds
# of _job_for; a share (POSTING_SHARE) are chaos.posting jobs, in the key by the task's template
# ("{account}"), whose dead jobs hold their sequence until the run's operator dismisses them
SEQUENCE_SHARE = 0.4
SEQUENCE_KINDS: list[tuple[str, float]] = [
    ("immediate", 0.45),
    ("flaky", 0.15),
    ("provider", 0.1),
    ("doomed", 0.05),
    ("slow", 0.05),
    ("delayed", 0.05),
    ("deadline", 0.1),
    ("cancelled", 0.05),
]
POSTING_SHARE = 0.3
POSTING_KINDS: list[tuple[str, float]] = [("posting", 0.6), ("flaky", 0.3), ("doomed", 0.1)]
UNIQUE_SHARE = 0.02  # --sequences: numbers enqueued twice with unique_for (one job expected)


def _sequence_job_for(
    n: int, rng: random.Random, keys: int
) -> tuple[str, str, dict[str, Any], dict[str, Any]]:
    """(kind, task, args, enqueue options) of number n as a job of a sequence."""
    account = f"acct-{rng.randrange(keys)}"
    if rng.random() < POSTING_SHARE:
        kind = "seq-posting-" + rng.choices(*zip(*POSTING_KINDS, strict=True))[0]
        args = {"n": n, "kind": kind, "account": account}
        return kind, "chaos.posting", args, {"key": f"chaos-{n}"}
    kind = rng.choices(*zip(*SEQUENCE_KINDS, strict=True))[0]
    task, args, options = _job_for(kind, n, rng)
    args["kind"] = "seq-" + kind
    return "seq-" + kind, task, args, {**options, "sequence": account}


@dataclass
class Stats:
    enqueued: int = 0
    graphs: int = 0  # --dependencies: graphs enqueued (their jobs count in enqueued)
    sequence_jobs: int = 0  # --sequences: jobs enqueued into sequences
    unique_enqueues: int = 0  # --sequences: numbers enqueued twice with unique_for
    unique_duplicates: int = 0  # ... whose second enqueue made a second job (must stay 0)
    holds_dismissed: int = 0  # --sequences: dead jobs holding a sequence, cancelled
    enqueue_retries: int = 0
    cancelled: int = 0
    kills: int = 0
    pauses: int = 0
    pg_restarts: int = 0
    relay_kills: int = 0
    broker_restarts: int = 0
    promotions: list[float] = field(default_factory=list)  # time.time() of each promotion
    outages: list[tuple[float, float]] = field(default_factory=list)  # primary killed, promoted
    refused: list[float] = field(default_factory=list)  # seconds each refused enqueue took
    accepted: list[int] = field(default_factory=list)  # job ids enqueue returned, in memory
    faults: list[tuple[str, int | None, datetime, str]] = field(default_factory=list)


def _retrying(what: str, fn: Callable[[], T], stop_at: float) -> tuple[T, int]:
    """Call fn() until it works (the database may be restarting); give up at stop_at.
    Returns its value and how many calls it took."""
    delay = 0.1
    tries = 0
    while True:
        tries += 1
        try:
            return fn(), tries
        except Exception as exc:
            if time.monotonic() > stop_at:
                raise RuntimeError(f"{what} kept failing: {exc!r}") from exc
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


def _enqueue(task: str, args: dict[str, Any], options: dict[str, Any]) -> Any:
    """One enqueue call; a `deadline_in` option becomes a deadline that many seconds from now."""
    options = dict(options)
    if (span := options.pop("deadline_in", None)) is not None:
        options["deadline"] = datetime.now(UTC) + timedelta(seconds=span)
    return chaos_app.enqueue(task, args, **options)


def _timed(stats: Stats, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """fn(...) (an enqueue, keyed: safe to repeat); a refusal's duration goes in stats."""
    started = time.monotonic()
    try:
        return fn(*args, **kwargs)
    except Exception:
        stats.refused.append(time.monotonic() - started)
        raise


# the partition's reserve: the last jobs of a run with --partition are enqueued once the cut
# worker's link is healed, over this many seconds, so that there is work for it to serve again
PARTITION_RESERVE = 60
RESERVE_SPREAD = 8.0


def enqueue_all(
    url: str,
    jobs: int,
    spread: float,
    seed: int,
    stats: Stats,
    stop_at: float,
    dependencies: bool = False,
    sequence_keys: int = 0,
    reserve: tuple[int, threading.Event] | None = None,
) -> None:
    """Enqueue `jobs` jobs evenly over `spread` seconds; record each accepted job. With
    `reserve` (n, event), the last n wait for the event, then go evenly over RESERVE_SPREAD
    seconds (the partition's heal: work is there to serve once it ends, however late). With
    `dependencies`, a share of the numbers (GRAPH_SHARE) each enqueue a graph (_graph_for)
    instead, whose first job is sometimes cancelled at once (a cascade by an operator). With
    `sequence_keys`, a share (SEQUENCE_SHARE) each enqueue a job into one of that many
    sequences (_sequence_job_for), and a few (UNIQUE_SHARE) a job enqueued twice with
    `unique_for` (the second call must return the first job)."""
    rng = random.Random(seed)
    names = [k for k, _ in KINDS]
    weights = [w for _, w in KINDS]
    side = psycopg.connect(url, autocommit=True)
    started = time.monotonic()
    held_back, after = reserve if reserve is not None else (0, None)
    first_held = jobs - held_back
    try:
        for n in range(jobs):
            pace = started + spread * n / max(jobs, 1)
            if after is not None and n >= first_held:
                if n == first_held:
                    after.wait(timeout=max(0.0, stop_at - time.monotonic()))
                    resumed = time.monotonic()
                pace = resumed + RESERVE_SPREAD * (n - first_held) / held_back
            if (wait := pace - time.monotonic()) > 0:
                time.sleep(wait)
            if dependencies and rng.random() < GRAPH_SHARE:
                kind, make = _graph_for(n, rng)
                made, tries = _retrying(
                    f"enqueue graph {n}", functools.partial(_timed, stats, make), stop_at
                )
                stats.graphs += 1
                if rng.random() < 0.1:
                    kind += "-cancelled"
            elif sequence_keys and rng.random() < UNIQUE_SHARE:
                kind, args = "unique", {"n": n, "kind": "unique"}
                # no idempotency key (refused with unique_for): a call retried after its
                # commit returns the first job, as the second call must
                enqueue = functools.partial(
                    _timed, stats, _enqueue, "chaos.effect", args, {"unique_for": 600}
                )
                job, tries = _retrying(f"enqueue {n}", enqueue, stop_at)
                again, more = _retrying(f"enqueue {n} again", enqueue, stop_at)
                tries += more - 1
                stats.unique_enqueues += 1
                made = [job] if again.id == job.id else [job, again]
                stats.unique_duplicates += len(made) - 1
            else:
                if sequence_keys and rng.random() < SEQUENCE_SHARE:
                    kind, task, args, options = _sequence_job_for(n, rng, sequence_keys)
                    stats.sequence_jobs += 1
                else:
                    kind = rng.choices(names, weights)[0]
                    task, args, options = _job_for(kind, n, rng)
                job, tries = _retrying(
                    f"enqueue {n}",
                    functools.partial(_timed, stats, _enqueue, task, args, options),
                    stop_at,
                )
                made = [job]
            stats.enqueue_retries += tries - 1
            stats.enqueued += len(made)
            stats.accepted.extend(job.id for job in made)

            def accept(made: list[Any] = made, kind: str = kind) -> None:
                nonlocal side
                if side.closed or side.broken:
                    side = psycopg.connect(url, autocommit=True, connect_timeout=5)
                for job in made:
                    side.execute(
                        "INSERT INTO chaos_accepted (job_id, kind, task, due_at, deadline_at,"
                        " accepted_at) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                        (job.id, kind, job.task, job.due_at, job.deadline_at, datetime.now(UTC)),
                    )

            _retrying(f"record job {made[0].id}", accept, stop_at)
            if kind.endswith("cancelled"):
                try:
                    chaos_app.cancel(made[0].id)  # a graph's: its blocked descendants with it
                    stats.cancelled += 1
                except Exception:
                    pass  # an outage or it started already: it runs; either way it is checked
    finally:
        side.close()


def dismiss_holds(url: str, stats: Stats, stop: threading.Event) -> None:
    """The run's operator (--sequences): every second, cancel each dead job that holds its
    sequence (chaos.posting's sequence_on_dead="hold"), which dismisses it and lets the next
    job of its key run (docs/workflows.md). Runs until `stop` is set; an outage just skips a
    round."""
    while not stop.wait(1.0):
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=2) as conn:
                rows = conn.execute(
                    "SELECT id FROM duetime_all_jobs WHERE status = 'dead' AND sequence_hold = 1"
                ).fetchall()
            for (job_id,) in rows:
                chaos_app.cancel(int(job_id))
                stats.holds_dismissed += 1
        except Exception:
            continue  # the database restarting: the next round tries again


# -- the partition ---------------------------------------------------------------------------


@dataclass
class Partition:
    """One worker in its own network namespace (duetime.chaos.netns), reaching the pair on the
    host end of its veth pair; at a random moment of the run, once that worker holds a running
    attempt (or after 20 s of waiting for one), every packet on its link is dropped for `hold`
    seconds (longer than a lease), then let through again."""

    ns: NetNamespace
    pool: Workers
    url: str  # the driver's (127.0.0.1) URL, to see what the cut worker holds
    hold: float
    cut_at: float | None = None  # time.time()
    healed_at: float | None = None
    held_jobs: list[tuple[int, int]] = field(default_factory=list)  # (job id, generation)
    cut_pid: int | None = None
    over: threading.Event = field(default_factory=threading.Event)  # healed, or never cut

    def run(self, at: float, note: Callable[[str, int | None, str], None]) -> None:
        """The partition thread's body: wait until monotonic `at`, cut, hold, heal; `over`
        is set at the end whatever happened (the enqueuer's reserve waits for it)."""
        try:
            self._cut_and_heal(at, note)
        finally:
            self.over.set()

    def _cut_and_heal(self, at: float, note: Callable[[str, int | None, str], None]) -> None:
        while time.monotonic() < at:
            time.sleep(0.1)
        give_up = time.monotonic() + 20
        while True:
            pids = {p.pid for p in self.pool.alive()}
            held = _held_by(self.url, pids) or []
            if held or time.monotonic() > give_up:
                break
            time.sleep(0.05)
        self.ns.cut()
        self.cut_at = time.time()
        # what it holds once cut off: read again after the packets in flight have landed (a
        # job it held a moment before may have ended just before the cut, and nothing needs
        # to take that one over; one claimed meanwhile counts)
        time.sleep(0.5)
        after = _held_by(self.url, pids, tries=10)
        held = held if after is None else after  # unreadable: what it held before the cut
        self.cut_pid = next(iter(pids), None)
        self.held_jobs = held
        note("partition_cut", self.cut_pid, f"{self.hold:g}s, holding jobs {held}")
        say(
            f"partition: cut worker {self.cut_pid} off (holding {len(held)} jobs) for "
            f"{self.hold:g}s"
        )
        time.sleep(self.hold)
        self.ns.heal()
        self.healed_at = time.time()
        note("partition_healed", self.cut_pid, "")
        say("partition: healed")

    def figures(self, url: str) -> dict[str, Any]:
        """When the cut happened, when another worker began executing a job the cut worker
        held claimed it again (its attempt's started_at), when a worker in the namespace
        executed a job it claimed after the heal (the execution log's db_started_at); seconds
        after the cut or the heal."""
        result: dict[str, Any] = {
            "cut_at": _iso(self.cut_at),
            "healed_at": _iso(self.healed_at),
            "cut_s": round(self.healed_at - self.cut_at, 2)
            if self.cut_at is not None and self.healed_at is not None
            else None,
            "cut_worker_pid": self.cut_pid,
            "jobs_held_at_cut": len(self.held_jobs),
        }
        if self.cut_at is None or self.healed_at is None:
            return result
        pids = [p.pid for p in self.pool.procs]
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            # taken over: the first claim of a held job by a later generation (the worker's
            # estimate of the database's clock as it began the claim)
            rows = conn.execute(
                "SELECT a.worker_id, extract(epoch FROM a.started_at), a.job_id"
                " FROM duetime_all_attempts a"
                " JOIN unnest(%s::bigint[], %s::bigint[]) AS h(job_id, generation)"
                " ON a.job_id = h.job_id AND a.generation > h.generation"
                " ORDER BY a.started_at",
                ([j for j, _ in self.held_jobs], [g for _, g in self.held_jobs]),
            ).fetchall()
            taken = [(checker.pid_of(str(w)), float(t)) for w, t, _ in rows]
            claimed_again = len({int(j) for _, _, j in rows})
            # held jobs the reaper ended instead (its deadline passed, or a cancel the driver
            # asked for): nothing takes those over
            ended = conn.execute(
                "SELECT count(*) FROM duetime_all_jobs j"
                " JOIN unnest(%s::bigint[], %s::bigint[]) AS h(job_id, generation)"
                " ON j.id = h.job_id AND j.generation = h.generation"
                " WHERE j.status IN ('expired', 'cancelled', 'dead')",
                ([j for j, _ in self.held_jobs], [g for _, g in self.held_jobs]),
            ).fetchone()
            # a claim made after the heal (an execution logged late, blocked by the cut, is not
            # serving again), timed by the execution log's database stamp
            rows = conn.execute(
                "SELECT e.pid, extract(epoch FROM e.db_started_at) FROM chaos_executions e"
                " JOIN duetime_all_attempts a"
                " ON a.job_id = e.job_id AND a.generation = e.generation"
                " WHERE a.started_at > to_timestamp(%s) AND e.pid = ANY(%s)"
                " ORDER BY e.db_started_at LIMIT 1",
                (self.healed_at, pids),
            ).fetchall()
            again = [(int(pid), float(t)) for pid, t in rows]
        result["taken_over_at"] = _iso(taken[0][1]) if taken else None
        result["taken_over_after_cut_s"] = round(taken[0][1] - self.cut_at, 2) if taken else None
        result["taken_over_by_another_worker"] = bool(taken) and taken[0][0] not in pids
        result["held_jobs_claimed_again"] = claimed_again
        result["held_jobs_ended_by_the_reaper"] = int(ended[0]) if ended else 0
        result["served_again_at"] = _iso(again[0][1]) if again else None
        result["served_again_after_heal_s"] = (
            round(again[0][1] - self.healed_at, 2) if again else None
        )
        result["served_again_by_same_process"] = bool(again) and again[0][0] == self.cut_pid
        result["ns_workers_started"] = self.pool.started
        # what the cut worker's own log says: leases it lost, late outcomes refused as stale
        events: dict[str, int] = {"lease.lost": 0, "outcome.rejected_stale": 0}
        for path in self.pool.logs.glob(f"{self.pool.name}*.log"):
            for line in path.read_text(errors="replace").splitlines():
                with contextlib.suppress(ValueError, AttributeError):
                    event = json.loads(line).get("event")
                    if event in events:
                        events[event] += 1
        result["cut_worker_log"] = events
        return result


def _iso(at: float | None) -> str | None:
    return (
        None if at is None else datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds")
    )


# the running attempts (a), with their jobs (j): on the running jobs' rows (migration 22,
# duetime_all_attempts)
_RUNNING_ATTEMPTS = (
    " FROM duetime_jobs j JOIN duetime_all_attempts a ON a.job_id = j.id"
    " AND a.generation = j.generation AND a.claim_token = j.claim_token"
    " WHERE j.status IN ('running', 'cancel_requested') AND a.status = 'running'"
)


def _held_by(url: str, pids: set[int], tries: int = 1) -> list[tuple[int, int]] | None:
    """The (job id, generation) of the running attempts of these worker pids; None if the
    database did not answer in `tries` attempts half a second apart (a failover)."""
    for attempt in range(tries):
        if attempt:
            time.sleep(0.5)
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=2) as conn:
                rows = conn.execute(
                    "SELECT a.job_id, a.generation, a.worker_id" + _RUNNING_ATTEMPTS
                ).fetchall()
        except psycopg.Error:
            continue
        return sorted((int(j), int(g)) for j, g, w in rows if checker.pid_of(str(w)) in pids)
    return None


# -- the run --------------------------------------------------------------------------------


def count_open(url: str) -> int:
    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        row = conn.execute(
            "SELECT count(*) FROM duetime_jobs WHERE status <> ALL(%s)", (list(TERMINAL),)
        ).fetchone()
    return int(row[0]) if row else 0


def worker_log_counts(logs: Path) -> dict[str, int]:
    wanted = (
        "lease.lost",
        "outcome.rejected_stale",
        "job.succeeded",
        "job.retry_scheduled",
        "job.dead",
        "job.reconciled",
    )
    counts = dict.fromkeys(wanted, 0)
    errors = 0
    for path in sorted(logs.glob("worker*.log")):
        for line in path.read_text(errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if not isinstance(record, dict):
                continue
            if record.get("event") in counts:
                counts[record["event"]] += 1
            if record.get("level") in ("error", "critical"):
                errors += 1
    counts["error_log_lines"] = errors
    return counts


def run(
    *,
    jobs: int,
    duration: float,
    workers: int,
    seed: int,
    concurrency: int = 8,
    drain_timeout: float = 120,
    outage: float = 4.0,
    keep: bool = False,
    broker_url: str | None = None,
    relays: int = 2,
    failover: str | None = None,
    skews: tuple[float, ...] = (),
    partition: bool = False,
    partition_hold: float = 10.0,
    dependencies: bool = False,
    sequence_keys: int = 0,
) -> dict[str, Any]:
    """With broker_url: the outbox variant (docs/outbox.md). Every chaos job goes through
    RabbitMQ: `relays` relay processes dispatch and publish, the workers are broker-fed, and
    the faults also SIGKILL relays and stop and restart the broker. skews: one more worker per
    value, whose wall clock is that many seconds off (libfaketime), never killed or paused.
    partition (with failover): one more worker in its own network namespace, cut off from the
    database once for partition_hold seconds (Partition). dependencies: a share of the jobs
    come as graphs (groups with a callback, chains: enqueue_all), judged by the checker's
    dependency checks. sequence_keys: a share of the jobs go into that many sequences
    (enqueue_all), dead holds dismissed by dismiss_holds, judged by the checker's sequence
    checks."""
    logging.getLogger("psycopg.pool").setLevel(logging.CRITICAL)  # outages are expected here
    rng = random.Random(seed)
    root = Path(tempfile.mkdtemp(prefix="duetime-chaos-"))
    logs = root / "logs"
    logs.mkdir()
    os.chmod(root, 0o755)
    ns = NetNamespace() if partition else None
    pair = (
        ReplicatedPair(
            synchronous=failover == "sync",
            also_listen=(ns.host_ip, ns.network) if ns is not None else None,
        )
        if failover
        else None
    )
    cluster = Cluster(root)
    stats = Stats()
    pool: Workers | None = None
    relay_pool: Workers | None = None
    extras: list[Workers] = []
    cut: Partition | None = None
    cutter: threading.Thread | None = None
    stop_dismissing = threading.Event()
    t0 = time.monotonic()
    try:
        if ns is not None:
            ns.open()
        if pair is not None:
            say(f"starting a primary and a {failover}hronous standby in {pair.root}")
            pair.start()
            url = pair.url()
            chaos_app.pool_timeout = 5.0  # an enqueue in the outage is refused within seconds
        else:
            say(f"starting PostgreSQL in {root}")
            cluster.start()
            url = cluster.url
        chaos_app.database_url = url
        chaos_app.migrate()
        create_tables(url)
        chaos_app.add_schedule(
            SCHEDULE,
            task="chaos.tick",
            every="2s",
            timezone="UTC",
            overlap="allow",
            args={"kind": "recurring"},
        )
        if broker_url is not None:
            chaos_app.set_queue("default", dispatch="outbox")
            _empty_broker_queue(broker_url, "default")
            relay_pool = Workers(
                url, logs, concurrency, target=relays, broker_url=broker_url, role="relay"
            )
            for _ in range(relays):
                relay_pool.spawn()
            say(f"outbox variant: {relays} relays publishing to {broker_url}")
        pool = Workers(url, logs, concurrency, target=workers, broker_url=broker_url)
        for _ in range(workers):
            pool.spawn()
        say(f"{workers} workers started on {url}; {jobs} jobs over {duration:g}s of faults")
        for skew in skews:
            env = skewed_env(os.environ, root / "faketime-site", skew)
            name = f"worker-skew{skew:+.0f}s-"
            extras.append(Workers(url, logs, concurrency, target=1, name=name, env=env))
            say(f"one more worker whose clock is {skew:+.0f}s off (libfaketime)")
        if ns is not None and pair is not None:
            ns_pool = Workers(
                pair.url(host=ns.host_ip), logs, concurrency, target=1, name="worker-netns-",
                prefix=ns.prefix(),
            )  # fmt: skip
            extras.append(ns_pool)
            cut = Partition(ns, ns_pool, url, partition_hold)
            cut_start = time.monotonic() + rng.uniform(0.1, 0.4) * duration
            cutter = threading.Thread(
                target=cut.run,
                args=(cut_start, lambda k, p, d: stats.faults.append((k, p, datetime.now(UTC), d))),
                name="chaos-partition",
                daemon=True,
            )
            say(
                f"one more worker in network namespace {ns.name}, reaching the pair on "
                f"{ns.host_ip}; cut for {partition_hold:g}s at a random moment"
            )
        for extra in extras:
            extra.spawn()
        if cutter is not None:
            cutter.start()

        stop_at = time.monotonic() + duration + drain_timeout
        enqueuer = threading.Thread(
            target=enqueue_all,
            args=(url, jobs, duration * 0.6, seed, stats, stop_at, dependencies, sequence_keys),
            kwargs={
                "reserve": None if cut is None else (min(PARTITION_RESERVE, jobs // 4), cut.over)
            },
            name="chaos-enqueue",
            daemon=True,
        )
        enqueuer.start()
        if sequence_keys:
            dismisser = threading.Thread(
                target=dismiss_holds,
                args=(url, stats, stop_dismissing),
                name="chaos-dismiss",
                daemon=True,
            )
            dismisser.start()
        inject_faults(cluster, pool, rng, duration, stats, outage, relay_pool, pair, extras)
        if cutter is not None:
            cutter.join(timeout=partition_hold + 30)
        enqueuer.join(timeout=max(1.0, stop_at - time.monotonic()))
        if enqueuer.is_alive():
            raise RuntimeError("the enqueuer did not finish")

        say("faults stopped; pausing the schedule and draining")
        _retrying("pause schedule", lambda: chaos_app.pause_schedule(SCHEDULE), stop_at)
        drain_deadline = time.monotonic() + drain_timeout
        remaining = -1
        while time.monotonic() < drain_deadline:
            pool.top_up()
            for extra in extras:
                extra.top_up()
            if relay_pool is not None:
                relay_pool.top_up()
            try:
                remaining = count_open(url)
            except psycopg.Error:
                remaining = -1
            if remaining == 0:
                break
            time.sleep(0.5)
        stop_dismissing.set()
        say(f"drained: {remaining} jobs not terminal")
        everyone = pool.procs + (relay_pool.procs if relay_pool is not None else [])
        everyone += [p for extra in extras for p in extra.procs]
        for proc in everyone:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in everyone:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        chaos_app.close()
        with psycopg.connect(url, autocommit=True) as conn:
            for kind, pid, at, detail in stats.faults:
                conn.execute(
                    "INSERT INTO chaos_faults (kind, pid, at, detail) VALUES (%s, %s, %s, %s)",
                    (kind, pid, at, detail),
                )
        report = checker.check(url)
        result: dict[str, Any] = {
            "ok": report.ok,
            "seed": seed,
            "jobs_requested": jobs,
            "duration_s": duration,
            "workers": workers,
            "elapsed_s": round(time.monotonic() - t0, 1),
            "driver": {
                "enqueued": stats.enqueued,
                "graphs": stats.graphs,
                "sequence_keys": sequence_keys,
                "sequence_jobs": stats.sequence_jobs,
                "sequence_holds_dismissed": stats.holds_dismissed,
                "unique_enqueues": stats.unique_enqueues,
                "unique_duplicates": stats.unique_duplicates,
                "enqueue_retries": stats.enqueue_retries,
                "cancelled_after_enqueue": stats.cancelled,
                "sigkills": stats.kills,
                "sigstops": stats.pauses,
                "pg_restarts": stats.pg_restarts,
                "outbox": broker_url is not None,
                "relays": relays if broker_url is not None else 0,
                "relay_sigkills": stats.relay_kills,
                "broker_restarts": stats.broker_restarts,
                "workers_started": pool.started,
                "workers_respawned_after_exit": pool.respawned,
                "skewed_workers_s": list(skews),
                "extra_workers_started": {x.name: x.started for x in extras},
                "not_terminal_after_drain": remaining,
            },
            "worker_logs": worker_log_counts(logs),
            "check": report.as_dict(),
            "run_dir": str(root) if keep else None,
        }
        if pair is not None:
            counts = {
                **report.counts,
                "accepted_missing": report.totals.get("accepted_job_missing", 0),
            }
            result["failover"] = failover_figures(url, failover or "", stats, counts)
            if cut is not None:
                result["failover"]["partition"] = cut.figures(url)
            say("failover: " + json.dumps(result["failover"]))
            say(failover_text(result["failover"]))
        say(report.text())
        return result
    finally:
        stop_dismissing.set()
        if pool is not None:
            pool.kill_all()
        if relay_pool is not None:
            relay_pool.kill_all()
        for extra in extras:
            extra.kill_all()
        chaos_app.close()
        cluster.stop()
        if pair is not None:
            pair.close()
        if ns is not None:
            ns.close()
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def inject_faults(
    cluster: Cluster,
    pool: Workers,
    rng: random.Random,
    duration: float,
    stats: Stats,
    outage: float = 4.0,
    relay_pool: Workers | None = None,
    pair: ReplicatedPair | None = None,
    extras: list[Workers] | None = None,
) -> None:
    """SIGKILL a worker every ~4 s (and start another), SIGSTOP one past its lease every ~12 s,
    restart PostgreSQL at 30% and 65% of the run (and every 60 s more on long runs); every
    second restart keeps the server down for `outage` seconds, longer than the leases.
    With relays (the outbox variant): also SIGKILL a relay every ~5 s (and start another), and
    stop RabbitMQ at 45% of the run for `outage` seconds and restart it."""
    start = time.monotonic()
    end = start + duration
    next_kill = start + 3
    next_pause = start + 6
    restarts = [start + duration * 0.30, start + duration * 0.65]
    restarts += [start + t for t in range(90, int(duration), 60)]
    restarts.sort()
    paused: list[tuple[subprocess.Popen[bytes], float]] = []
    next_relay_kill = start + 2
    broker_stops = [start + duration * 0.45] if relay_pool is not None else []

    def note(kind: str, pid: int | None, detail: str = "") -> None:
        stats.faults.append((kind, pid, datetime.now(UTC), detail))

    next_top_up = start + 1
    while (now := time.monotonic()) < end:
        if now >= next_top_up:
            pool.top_up()
            for extra in extras or []:
                extra.top_up()
            next_top_up = now + 1
        for proc, until in list(paused):
            if now >= until:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGCONT)
                note("sigcont", proc.pid)
                paused.remove((proc, until))
        stopped = {p.pid for p, _ in paused}
        if now >= next_kill:
            candidates = [p for p in pool.alive() if p.pid not in stopped]
            if candidates:
                victim = rng.choice(candidates)
                victim.kill()
                victim.wait(10)
                stats.kills += 1
                note("sigkill", victim.pid)
                replacement = pool.spawn()
                say(f"SIGKILL worker {victim.pid}; replacement {replacement.pid}")
            next_kill = now + rng.uniform(2.5, 5)
        if now >= next_pause and not paused:
            candidates = pool.alive()
            if candidates:
                busy = _busiest_pid(pool.url, {p.pid for p in candidates})
                victim = next((p for p in candidates if p.pid == busy), rng.choice(candidates))
                victim.send_signal(signal.SIGSTOP)
                stats.pauses += 1
                hold = rng.uniform(5, 7)  # past the 2-3 s leases, and past a reap interval
                note("sigstop", victim.pid, f"{hold:.1f}s")
                paused.append((victim, now + hold))
                say(f"SIGSTOP worker {victim.pid} for {hold:.1f}s")
            next_pause = now + rng.uniform(10, 14)
        if relay_pool is not None and now >= next_relay_kill:
            relay_pool.top_up()
            candidates = relay_pool.alive()
            if candidates:
                victim = rng.choice(candidates)
                victim.kill()
                victim.wait(10)
                stats.relay_kills += 1
                note("sigkill", victim.pid, "relay")
                replacement = relay_pool.spawn()
                say(f"SIGKILL relay {victim.pid}; replacement {replacement.pid}")
            next_relay_kill = now + rng.uniform(3, 7)
        if broker_stops and now >= broker_stops[0]:
            broker_stops.pop(0)
            say(f"stopping RabbitMQ (rabbitmqctl stop_app) for {outage:g}s")
            restart_broker(outage)
            stats.broker_restarts += 1
            note("broker_restart", None, f"down {outage:g}s")
            say("RabbitMQ is back")
        if pair is not None and restarts and now >= restarts[0]:
            restarts.pop(0)
            say(f"killing the primary (pg_ctl stop -m immediate); promotion in {outage:g}s")
            pair.kill_primary()
            killed = time.time()
            note("primary_killed", None)
            time.sleep(outage)
            pair.promote()
            assert pair.promoted_at is not None
            stats.promotions.append(pair.promoted_at)
            stats.outages.append((killed, pair.promoted_at))
            note("promotion", None, f"after {outage:g}s without a primary")
            say("standby promoted; rebuilding the old primary as the new standby")
            pair.rebuild_standby()
            note("standby_rebuilt", None)
            say("standby streaming again")
        elif restarts and now >= restarts[0]:
            restarts.pop(0)
            # every other restart keeps the server down past the leases (an outage)
            down = outage if stats.pg_restarts % 2 == 1 else 0.0
            say(f"restarting PostgreSQL (pg_ctl -m fast), down for {down:g}s more")
            cluster.restart(down)
            stats.pg_restarts += 1
            note("pg_restart", None, f"down {down:g}s")
            say("PostgreSQL is back")
        time.sleep(0.1)
    for proc, _ in paused:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
        note("sigcont", proc.pid)


def failover_figures(url: str, mode: str, stats: Stats, counts: dict[str, Any]) -> dict[str, Any]:
    """The figures of a failover run: what the checker found that a promotion could cause, how
    soon after each promotion a job started again, and the enqueues refused meanwhile."""
    resume: list[float | None] = []
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        # the driver's own list, not chaos_accepted: a lossy promotion would take both
        row = conn.execute(
            "SELECT count(*) FROM unnest(%s::bigint[]) AS a(id) "
            "WHERE NOT EXISTS (SELECT 1 FROM duetime_all_jobs j WHERE j.id = a.id)",
            (stats.accepted,),
        ).fetchone()
        lost = int(row[0]) if row else 0
        for promoted in stats.promotions:
            row = conn.execute(
                "SELECT extract(epoch FROM min(started_at)) FROM duetime_all_attempts "
                "WHERE started_at > to_timestamp(%s)",
                (promoted,),
            ).fetchone()
            first = row[0] if row else None
            resume.append(None if first is None else round(float(first) - promoted, 2))
    return {
        "replication": mode,
        "promotions": len(stats.promotions),
        "outage_s": [round(b - a, 2) for a, b in stats.outages],
        "acknowledged": len(stats.accepted),
        "lost_acknowledged": lost,
        "not_terminal": counts.get("lost_jobs", 0) - counts.get("accepted_missing", 0),
        "stale_completions_accepted": counts.get("stale_completions_accepted", 0),
        "double_effects": counts.get("double_effects", 0),
        "early_starts": counts.get("early_starts", 0),
        "worker_clock_offsets_s": counts.get("worker_clock_offsets_s", {}),
        "skewed_worker_executions": counts.get("executions_by_skewed_worker", {}),
        "resume_after_promotion_s": resume,
        "enqueues_refused": len(stats.refused),
        "refused_max_s": round(max(stats.refused, default=0.0), 2),
    }


def failover_text(f: dict[str, Any]) -> str:
    """The failover figures as a few lines a person reads."""
    lines = [
        f"failover figures ({f['replication']}hronous replication):",
        f"  promotions {f['promotions']} (outages {f['outage_s']} s); first start after each"
        f" {f['resume_after_promotion_s']} s",
        f"  acknowledged {f['acknowledged']}, lost acknowledged {f['lost_acknowledged']},"
        f" not terminal {f['not_terminal']}",
        f"  stale completions accepted {f['stale_completions_accepted']}, double effects"
        f" {f['double_effects']}, early starts (database clock) {f['early_starts']}",
        f"  enqueues refused {f['enqueues_refused']} (slowest {f['refused_max_s']} s);"
        f" skewed workers' clocks {f['worker_clock_offsets_s']} s, their executions"
        f" {f['skewed_worker_executions']}",
    ]
    cut = f.get("partition")
    if cut is not None:
        lines.append(
            f"  partition: cut {cut['cut_at']} for {cut['cut_s']} s holding"
            f" {cut['jobs_held_at_cut']} jobs; taken over {cut.get('taken_over_at')}"
            f" (+{cut.get('taken_over_after_cut_s')} s, {cut.get('held_jobs_claimed_again')} of"
            f" them claimed again, first by another worker:"
            f" {cut.get('taken_over_by_another_worker')}); cut worker served again"
            f" {cut.get('served_again_at')} (+{cut.get('served_again_after_heal_s')} s after"
            f" the heal, same process: {cut.get('served_again_by_same_process')}); its log:"
            f" {cut.get('cut_worker_log')}"
        )
    return "\n".join(lines)


def restart_broker(down: float) -> None:
    """Stop the local RabbitMQ application, keep it down `down` seconds, start it again (its
    durable quorum queues and persistent messages survive)."""
    ctl = shutil.which("rabbitmqctl") or "/usr/sbin/rabbitmqctl"
    subprocess.run([ctl, "stop_app"], check=True, capture_output=True, timeout=120)
    try:
        time.sleep(down)
    finally:  # interrupted or not, the broker comes back: other users of it depend on that
        subprocess.run([ctl, "start_app"], check=True, capture_output=True, timeout=120)


def _empty_broker_queue(broker_url: str, queue: str) -> None:
    """Purge the broker queue a previous run may have left messages in. Not a delete: a quorum
    queue declared again just after its delete can keep consumers of the deleted one (workers
    of a previous run killed a moment before), which take its messages and never run them."""
    import asyncio

    from duetime.runtime.outbox.broker import Broker

    async def purge() -> None:
        async with Broker(broker_url) as broker:
            await broker.purge(queue)

    asyncio.run(purge())


def _busiest_pid(url: str, pids: set[int]) -> int | None:
    """The worker pid holding the most running attempts (slow ones first), so that a pause
    really outlives leases; None when the database cannot tell right now."""
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=2) as conn:
            rows = conn.execute(
                "SELECT a.worker_id, count(*) FILTER (WHERE j.task = 'chaos.slow'), count(*)"
                + _RUNNING_ATTEMPTS
                + " GROUP BY a.worker_id ORDER BY 2 DESC, 3 DESC"
            ).fetchall()
    except psycopg.Error:
        return None
    for worker_id, _, _ in rows:
        pid = checker.pid_of(str(worker_id))
        if pid in pids:
            return pid
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m duetime.chaos.run",
        description="run duetime on a private PostgreSQL under faults and check the history",
    )
    parser.add_argument("--jobs", type=int, default=2000, help="jobs to enqueue (2000)")
    parser.add_argument("--duration", type=float, default=45, help="seconds of faults (45)")
    parser.add_argument("--workers", type=int, default=3, help="worker processes (3)")
    parser.add_argument("--concurrency", type=int, default=8, help="jobs per worker (8)")
    parser.add_argument("--seed", type=int, default=None, help="random seed (random)")
    parser.add_argument("--drain-timeout", type=float, default=120, help="bounded drain (120s)")
    parser.add_argument(
        "--outage", type=float, default=4.0, help="seconds the second restart stays down (4)"
    )
    parser.add_argument(
        "--outbox",
        action="store_true",
        help="the outbox variant: jobs go through RabbitMQ (relays killed, broker restarted)",
    )
    parser.add_argument(
        "--broker-url",
        default=os.environ.get("DUETIME_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672/"),
        help="the RabbitMQ of the outbox variant (a local one: it is stopped and restarted)",
    )
    parser.add_argument("--relays", type=int, default=2, help="relay processes (outbox: 2)")
    parser.add_argument(
        "--failover",
        choices=["sync", "async"],
        default=None,
        help="PostgreSQL as a primary and a streaming standby (synchronous or asynchronous "
        "replication); the faults kill the primary and promote the standby",
    )
    parser.add_argument(
        "--skew",
        type=float,
        action="append",
        default=[],
        metavar="S",
        help="one more worker whose clock is S seconds off, under libfaketime (repeatable; "
        "--skew=-30 for a slow one)",
    )
    parser.add_argument(
        "--partition",
        action="store_true",
        help="with --failover: one more worker in its own network namespace, cut off from the "
        "database once, silently, past its leases, then healed (needs root, ip, iptables)",
    )
    parser.add_argument(
        "--partition-hold", type=float, default=10.0, help="seconds the cut lasts (10)"
    )
    parser.add_argument(
        "--dependencies",
        action="store_true",
        help="a share of the jobs come as graphs: groups with a callback and chains "
        "(docs/workflows.md), judged by the checker's dependency checks",
    )
    parser.add_argument(
        "--sequences",
        action="store_true",
        help="a share of the jobs go into sequences (docs/workflows.md), some held when dead "
        "and dismissed by the run; judged by the checker's sequence checks",
    )
    parser.add_argument(
        "--sequence-keys", type=int, default=16, help="with --sequences: how many keys (16)"
    )
    parser.add_argument("--report", help="write the run's report as JSON to this file")
    parser.add_argument("--keep", action="store_true", help="keep the cluster dir and logs")
    args = parser.parse_args(argv)
    if args.partition and args.failover is None:
        parser.error("--partition needs --failover sync|async (the pair listens for the namespace)")
    why = missing_tools() if args.partition else None
    if why is None and args.skew:
        why = skew_missing()
    if why is not None:
        leave_out = "--partition" if args.partition and missing_tools() else "--skew"
        sys.stderr.write(
            f"chaos: {why}; or leave out {leave_out} (make chaos-failover: "
            f"{'CHAOS_PARTITION=0' if leave_out == '--partition' else 'CHAOS_SKEW='})\n"
        )
        return 2
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    result = run(
        jobs=args.jobs,
        duration=args.duration,
        workers=args.workers,
        seed=seed,
        concurrency=args.concurrency,
        drain_timeout=args.drain_timeout,
        outage=args.outage,
        keep=args.keep,
        broker_url=args.broker_url if args.outbox else None,
        relays=args.relays,
        failover=args.failover,
        skews=tuple(args.skew),
        partition=args.partition,
        partition_hold=args.partition_hold,
        dependencies=args.dependencies,
        sequence_keys=args.sequence_keys if args.sequences else 0,
    )
    summary = {k: v for k, v in result.items() if k != "check"}
    sys.stdout.write(json.dumps(summary, indent=2, default=str) + "\n")
    if args.report:
        Path(args.report).write_text(json.dumps(result, indent=2, default=str) + "\n")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
