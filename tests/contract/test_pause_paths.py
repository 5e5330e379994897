"""A pause made by another process holds at once, on every claim path and every dialect
(docs/flow-control.md, Pause and resume; issue 20, section 2).

The worker's store here has claimed before the pause, so its copy of the control rows
(CONTROLS_SECONDS) still says the queue runs: what it then starts must be decided by the
queue's row as it is when the claim starts jobs, not by that copy. Each path is set up the way
a worker meets it: the plain claim (every queue, one or several named queues), the controlled
claim (a cap elsewhere, a weight, a priority share), the limited claim (a limit per dependency
exists) and both together, and the relay's dispatch of an outbox-mode queue (plain and
controlled). The scenario is the issue's: a job of the queue is running at the pause, jobs are
enqueued in bulk right after it, and the running attempt finishes before the next claim. Last,
an in-process worker claiming ahead of its slots and on the timer's due instants.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime

import pytest

import duetime
from duetime.core.clock import ManualClock
from duetime.core.limits import LimitSettings
from duetime.core.models import Claim, JobFilter, Outcome
from duetime.core.outbox import Dispatch
from duetime.core.requests import TaskDefaults, build_new_jobs
from duetime.core.states import Event
from duetime.runtime.fairness import ClaimFairness
from duetime.runtime.worker import Worker
from duetime.store.base import Store
from jobhelpers import enqueue, new, run_until
from kit import DialectKit

BULK = 5


@dataclass(frozen=True)
class Path:
    name: str
    queues: list[str] | None = None  # the worker's queues (None: all)
    cap_elsewhere: bool = False  # a queue cap: the controlled claim
    weight: bool = False  # a queue weight: the controlled claim
    share: float = 0.0  # a priority share: the controlled detour, then the plain claim
    limit: bool = False  # a limit per dependency: the limited claim
    keyed: bool = False  # the jobs carry the limit's key


PATHS = [
    Path("plain"),
    Path("plain, the queue named", queues=["held"]),
    Path("plain, queues named", queues=["held", "other"]),
    Path("controlled (cap)", cap_elsewhere=True),
    Path("controlled (weight)", weight=True),
    Path("controlled, queues named", queues=["held", "other"], cap_elsewhere=True),
    Path("priority share", share=0.5),
    Path("limited", limit=True),
    Path("limited, jobs keyed", limit=True, keyed=True),
    Path("limited and controlled", limit=True, keyed=True, cap_elsewhere=True),
]


def bulk(store: Store, clock: ManualClock, queue: str, count: int, **kw: object) -> list[int]:
    """`count` jobs in one enqueue_many-like batch (the bulk insert of enqueue --from-file)."""
    template = new(clock, queue=queue, **kw)  # type: ignore[arg-type]
    jobs = build_new_jobs(template, [{"i": i} for i in range(count)])
    return [e.job.id for e in store.enqueue(jobs, clock.now())]


@pytest.mark.parametrize("path", PATHS, ids=[p.name for p in PATHS])
def test_a_pause_made_elsewhere_holds_every_claim_path_at_once(
    make_store: Callable[[], Store], clock: ManualClock, path: Path
) -> None:
    operator, worker = make_store(), make_store()
    if path.cap_elsewhere:
        operator.set_queue("capped", clock.now(), concurrency=5)
    if path.weight:
        operator.set_queue("other", clock.now(), weight=2)
    if path.limit:
        operator.set_limit(LimitSettings("api", concurrency=100), clock.now())
    # the worker's claims as its slots make them: through its claim policy (runtime/fairness.py)
    fairness = ClaimFairness(path.share) if path.share else ClaimFairness()

    def take(limit: int) -> list[Claim]:
        return fairness.claim(
            worker, worker_id="w", queues=path.queues, limit=limit, now=clock.now()
        ).claims

    kw: dict[str, object] = {"defaults": TaskDefaults(limits=("api",))} if path.keyed else {}
    running = enqueue(operator, clock, queue="held", **kw)
    # the worker claims the job that runs through the pause: its copy of the control rows is
    # fresh and says `held` runs
    [claim] = take(1)
    assert claim.job.id == running.id
    operator.set_queue("held", clock.now(), paused=True)
    held = bulk(operator, clock, "held", BULK, **kw)
    held += bulk(operator, clock, "held", BULK, priority=5, **kw)  # ahead in claim order
    other = enqueue(operator, clock, queue="other")
    low = enqueue(operator, clock, queue="other", priority=-5)  # a lower class (share)
    wanted = {other.id, low.id} if path.queues in (None, ["held", "other"]) else set()

    started: set[int] = set()
    for _ in range(3):  # claims right after the pause, as the enqueue's wake-ups bring them
        claims = take(20)
        started |= {c.job.id for c in claims}
    assert not started & set(held), f"{path.name}: started jobs of a paused queue"
    # the attempt running at the pause finishes; the claim after it holds too
    assert worker.finish(claim.lease, Outcome(Event.SUCCEED), clock.now())
    claims = take(20)
    started |= {c.job.id for c in claims}
    assert not started & set(held), f"{path.name}: started jobs of a paused queue"
    assert started == wanted, "the other queue's jobs were held back"
    # a resume made elsewhere lets them start (at once too)
    operator.set_queue("held", clock.now(), paused=False)
    claims = take(20)
    assert {c.job.id for c in claims} == set(held)


@pytest.mark.parametrize("controlled", [False, True], ids=["plain", "controlled"])
def test_a_pause_made_elsewhere_holds_the_relays_dispatch_at_once(
    make_store: Callable[[], Store], clock: ManualClock, controlled: bool
) -> None:
    """The relay's dispatch of an outbox-mode queue: its single statement (which reads the
    pause itself) and the controlled dispatch (a tenant cap: the controlled choice)."""
    operator, relay = make_store(), make_store()
    operator.set_queue("held", clock.now(), dispatch=Dispatch.OUTBOX)
    if controlled:
        operator.set_tenant("default", clock.now(), concurrency=50)
    enqueue(operator, clock, queue="held")
    assert len(relay.dispatch_outbox(clock.now(), 1, 30.0)) == 1  # its copy: fresh, running
    operator.set_queue("held", clock.now(), paused=True)
    bulk(operator, clock, "held", BULK)
    assert relay.dispatch_outbox(clock.now(), 20, 30.0) == []
    operator.set_queue("held", clock.now(), paused=False)
    assert len(relay.dispatch_outbox(clock.now(), 20, 30.0)) == BULK


@pytest.fixture
def app(store_url: str, make_store: Callable[[], Store]) -> Iterator[duetime.App]:
    application = duetime.App(database_url=store_url)
    yield application
    application.close()


def test_a_worker_claiming_ahead_and_on_due_instants_starts_nothing_after_a_pause(
    app: duetime.App, make_store: Callable[[], Store]
) -> None:
    """An in-process worker claiming ahead of its slots (prefetch) through a backlog of short
    jobs of `qy`, with more of them due 0.3 s later (claimed on their due instant, the timer's
    near future): a pause from another store while it runs. No claim that began after the
    pause returned starts a job of `qy` (an attempt's started_at is its claim's `now`, read
    before the claim); jobs claimed before it still run; the other queue's due jobs start."""
    operator = make_store()
    done: list[int] = []
    paused_at: list[datetime] = []

    @app.task(name="quick")
    async def quick(i: int) -> None:
        await asyncio.sleep(0.002)
        done.append(i)
        if i == 20 and not paused_at:
            operator.set_queue("qy", app.clock.now(), paused=True)
            paused_at.append(app.clock.now())
            app.enqueue_many("quick", [{"i": 1000 + n} for n in range(BULK)], queue="qy")
            app.enqueue("quick", {"i": -1}, queue="other")

    app.enqueue_many("quick", [{"i": i} for i in range(200)], queue="qy")
    app.enqueue_many("quick", [{"i": 500 + i} for i in range(10)], queue="qy", delay=0.3)
    worker = Worker(app, concurrency=4, poll_interval=0.05)
    worker.slots.ahead = lambda: 8  # type: ignore[method-assign]
    watched: list[float] = []  # until when (monotonic): 0.6 s past the pause

    def over() -> bool:
        if paused_at and not watched:
            watched.append(time.monotonic() + 0.6)  # the delayed jobs fell due meanwhile
        return bool(watched) and time.monotonic() > watched[0] and -1 in done

    asyncio.run(run_until(worker, over, timeout=30))
    late = [
        (j.id, a.started_at)
        for j in app.store.list_jobs(JobFilter(queue="qy", limit=1000, with_attempts=True))
        for a in j.attempt_history
        if a.started_at > paused_at[0]
    ]
    assert late == [], f"claims begun after the pause started jobs of qy: {late[:5]}"
    assert -1 in done
    assert all(i < 500 for i in done if i >= 0), "a job due after the pause started"


# not the controlled claim: it locks the capped queues' rows (FOR UPDATE), which on MariaDB
# waits for every queue row it scans, as it always did (claims take turns on those rows)
LOCK_PATHS = [p for p in PATHS if p.name in ("plain", "limited, jobs keyed")]


@pytest.mark.parametrize("kit", ["postgres", "mysql"], indirect=True)
@pytest.mark.parametrize("path", LOCK_PATHS, ids=[p.name for p in LOCK_PATHS])
def test_a_claim_reads_the_pause_without_waiting_for_the_queues_row(
    kit: DialectKit,
    store_url: str,
    make_store: Callable[[], Store],
    clock: ManualClock,
    path: Path,
) -> None:
    """On the row-locking dialects the claim's look at the pause takes no lock: while another
    transaction holds the paused queue's row (an operator's change not yet committed), a
    claim neither waits for it nor starts the queue's jobs. (A DELETE joining the queues
    share-locked their rows on MariaDB, so a claim waited for any change of a paused queue.)"""
    operator, worker = make_store(), make_store()
    if path.cap_elsewhere:
        operator.set_queue("capped", clock.now(), concurrency=5)
    if path.limit:
        operator.set_limit(LimitSettings("api", concurrency=100), clock.now())
    kw: dict[str, object] = {"defaults": TaskDefaults(limits=("api",))} if path.keyed else {}
    assert worker.claim(worker_id="w", queues=None, limit=1, now=clock.now()) == []  # fresh copy
    operator.set_queue("held", clock.now(), paused=True)
    bulk(operator, clock, "held", BULK, **kw)
    other = enqueue(operator, clock, queue="other", **kw)
    found: list[set[int]] = []
    with closing(kit.connect(store_url)) as holder:
        kit.execute_on(holder, "BEGIN")  # the kit's connections autocommit
        kit.execute_on(holder, "SELECT * FROM duetime_queues WHERE queue = ? FOR UPDATE", ["held"])
        thread = threading.Thread(
            target=lambda: found.append(
                {
                    c.job.id
                    for c in worker.claim(worker_id="w", queues=None, limit=20, now=clock.now())
                }
            ),
            daemon=True,
        )
        thread.start()
        thread.join(timeout=5)
        waited = thread.is_alive()
        kit.execute_on(holder, "ROLLBACK")
    thread.join(timeout=30)
    assert not waited, f"{path.name}: the claim waited for the paused queue's row lock"
    assert found == [{other.id}]
