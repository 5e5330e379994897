"""The worker's slots: the claim loop that fills free slots with due jobs, one attempt each.

Slots is one of the worker's services (runtime/worker.py assembles them): it claims due jobs
through its ClaimFairness (runtime/fairness.py), holds some ready ahead of the free slots, and
runs one attempt (runtime/attempt.py) per claim; the broker feed (runtime/outbox/feed.py) runs
the attempts it accepted in the same slots. Past 450 lines because the claim loop, the
slots' count (free, ready, running, recording) and the start of each attempt share that state,
each read beside the others.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from duetime.core.claim_floor import ClaimFloor
from duetime.core.clock import Instant
from duetime.core.flow.share import PRIORITY_SHARE
from duetime.core.models import Claim, Lease, Wakeup
from duetime.logs import log_event
from duetime.runtime.attempt import AttemptRunner, RunningAttempt
from duetime.runtime.fairness import ClaimFairness
from duetime.runtime.node import loop_name
from duetime.runtime.service import Pulse, Service
from duetime.runtime.timer import DueTimes
from duetime.tasks import AnyTask

log = logging.getLogger("duetime.worker")


class Slots(Service):
    """The worker's slots: while some are free, claims due jobs and runs one attempt per claim.

    A slot is taken while a handler runs; once it is over, its outcome is recorded by the
    completer while the slot takes the next job. Claims take up to the number of free slots in
    one transaction, plus jobs held ready beyond them (`ready`): a slot that frees takes the
    next ready job at once, without waiting for a round trip to the store, while the loop
    claims the next batch. How many are held ready follows the pace: the jobs the slots
    started per second times the duration of `claims_ahead` claims (both averaged over the
    last claims), at most `prefetch`; short jobs under a backlog get large claims, long jobs
    none ahead (so a worker busy with long jobs does not hold due work other workers could
    start). Prefetched jobs are claimed like the others: their attempts hold leases, renewed
    by the heartbeats (they are in `running` from their claim), and they are due (the claim
    takes only due jobs). One whose cancellation was requested or whose lease was lost before
    it started is not run (runtime/attempt.py).

    After a claim that took all it asked for (more work is likely due), the loop claims again as
    soon as its room (the free slots and the jobs wanted ahead, less those ready) reaches half
    the slots, or after `claim_linger` seconds with any room, so claims come in batches rather
    than one job at a time; after a claim that found less, it waits for the poll interval or
    until woken (the planner made work due, a wake-up or the timer). A sync handler thread that
    outlived its attempt keeps its slot taken. Stopping ends claiming, lets a claim already sent
    to the store return (its jobs start in free slots, the rest wait ready), gives every job
    still waiting ready back to the store (due again now, recorded as interrupted before it
    started), then drains the attempts in flight within the grace period; those still running
    then are interrupted (recorded as such within 10 more seconds). A claim that failed may
    have committed before its answer was lost: the next claim's loop then gives back the
    attempts running under this worker that its slots do not know of (`recover`).
    """

    name = "slots"
    # claims' worth held ready under a backlog (docs/performance.md, "Larger claims and finish
    # batches": four, with the completer's batches of 400, drained 7% to 20% faster than two)
    claims_ahead = 4
    claim_linger = 0.005
    spin = 0.0015  # the event loop's timers fire up to 1 ms late: the last stretch is watched
    # uvloop's timers count whole milliseconds: one may fire up to 1.5 ms early, and the
    # stretch watched before a due instant is then that much longer
    timer_early = 0.002

    def __init__(
        self,
        runner: AttemptRunner,
        *,
        registry: Mapping[str, AnyTask],
        worker_id: str,
        queues: list[str] | None,
        concurrency: int,
        poll_interval: float,
        grace: float,
        prefetch: int = 0,
        due: DueTimes | None = None,
        share: Callable[[], float] = lambda: PRIORITY_SHARE,
        max_unrecorded: int | None = None,
        floor: ClaimFloor | None = None,
    ) -> None:
        super().__init__()
        self.runner = runner
        self.registry = registry  # the app's tasks: what its slots run (runtime/host.py)
        self.share = share  # the host's priority share, read at each claim (runtime/host.py)
        self.worker_id = worker_id
        self.queues = queues
        self.concurrency = concurrency
        self.prefetch = prefetch
        self.poll_interval = poll_interval
        self.grace = grace
        self.claim_batch = max(1, concurrency // 2)
        self.started = 0  # attempts started in slots, in all
        self._pace = 0.0  # attempts started per second, averaged over the last claims
        self._claim_seconds = 0.0  # how long a claim takes, averaged
        self._last_claim = time.monotonic()
        self._started_then = 0
        self.tasks: list[str] = []  # the tasks it claims: its app's, set when it starts
        # by attempt id, from the claim until recorded (prefetched ones too: leases renewed)
        self.running: dict[int, RunningAttempt] = {}
        self.ready: deque[RunningAttempt] = deque()  # claimed ahead, waiting for a free slot
        self.controlled = False  # limits per dependency exist: nothing is claimed ahead
        self.busy = 0  # slots whose handler runs
        # attempts whose handler ended and whose outcome is not recorded yet: past
        # `max_unrecorded` of them (default: the concurrency), each holds a slot (free), so a
        # store slow to record outcomes (a finish waiting on a lock) stops the claims instead
        # of piling up held attempts
        self.recording = 0
        self.max_unrecorded = concurrency if max_unrecorded is None else max_unrecorded
        self.reserved = 0  # slots held for a broker message being accepted (runtime/outbox/feed.py)
        self.more_due = False  # the last claim filled every free slot
        # the loop looked for work with no room: the next free slot claims
        self.owed = False
        # the last claim may have been cut short by flow controls or limits per dependency, so
        # an attempt ending (its queue's or key's slot free again) is a reason to claim again
        self.restricted = False
        # a claim (or a broker message's acceptance) failed without an answer: it may have
        # committed attempts for this worker that it does not know of (see recover)
        self.unsure = False
        self._giving_back: set[asyncio.Task[None]] = set()
        self.due = due  # the timer's near future (runtime/timer.py), when a timer keeps one
        # when a limit per dependency that held back the last claim allows a start again
        # (Claimed.next_start): the loop claims then, not at its next poll
        self.limit_at: datetime | None = None
        # the claims' policy: priority share, tenant rotation, queue credit, and where their
        # walks start (runtime/fairness.py)
        self.fairness = ClaimFairness(floor=floor)  # its share: the App's, read at each claim
        self.idle = Pulse()  # the claim loop waits: no free slot, or nothing more was due
        self.finished = Pulse()  # an attempt ended (recorded, refused as stale, or given up)
        self.draining = Pulse()  # shutdown began with attempts in flight
        # the context each attempt's task starts from (a copy each: an async handler runs in
        # its attempt's task, runtime/attempt.py AttemptRunner._inline, and what it sets there
        # must not reach an attempt started from that task); the service's, once it starts
        self._context = contextvars.copy_context()

    def free(self) -> int:
        """Slots free for a handler now."""
        unrecorded = max(0, self.recording - self._unrecorded_allowed())
        return (
            self.concurrency - self.busy - self.reserved - self.runner.threads.orphans - unrecorded
        )

    def _unrecorded_allowed(self) -> int:
        """Outcomes that may wait to be written before each more holds a slot: a finish batch
        while the store answers, only the concurrency while its writes fail (an outage: no
        claim is worth making then, and each would hold a store thread until the pool gives
        up, delaying the first claims once the store is back)."""
        if self.runner.completer.failing:
            return self.concurrency
        return self.max_unrecorded

    def ahead(self) -> int:
        """How many claimed jobs to hold ready: what the slots start during `claims_ahead`
        claims."""
        if not self.more_due or self.controlled:
            return 0
        return min(self.prefetch, int(self._pace * self._claim_seconds * self.claims_ahead))

    def room(self) -> int:
        """How many jobs the next claim may take: the free slots not promised to a ready
        job, and the prefetch room left."""
        return self.free() + self.ahead() - len(self.ready)

    def _claim(self, limit: int, now: Instant) -> list[Claim]:
        """One claim (in a store thread) at `now`: the clock's `now`, read once the claim's
        connection is held (Store.claim's), not before it waited for one. While limits
        per dependency exist (docs/flow-control.md) nothing is held ahead: held jobs started
        together could outrun a rate limit, and a breaker's probe must start when it is let
        through."""
        store = self.runner.store
        self.fairness.set_share(self.share())  # it may change while we run
        claimed = self.fairness.claim(
            store,
            worker_id=self.worker_id,
            queues=self.queues,
            limit=limit,
            now=now,
            tasks=self.tasks,  # only what it has handlers for
        )
        self.controlled = bool(store.limit_names())
        self.restricted = self.controlled or store.flow_controls().restricts_claim
        self.limit_at = claimed.next_start
        return claimed.claims

    def _paced(self, began: float, ended: float) -> None:
        """Note a claim's duration and the pace at which slots started jobs since the last."""
        self._claim_seconds += 0.3 * ((ended - began) - self._claim_seconds)
        elapsed = began - self._last_claim
        if elapsed > 0:
            pace = (self.started - self._started_then) / elapsed
            self._pace += 0.3 * (pace - self._pace)
        self._last_claim, self._started_then = began, self.started

    def heard(self, wakeups: Sequence[Wakeup]) -> None:
        """Wake-ups from the store: work due before the claims' floor lowers it (the timer
        decides when to claim)."""
        self.fairness.heard(wakeups)

    def reserve(self) -> None:
        """Hold a free slot for a broker message while its attempt is being accepted
        (runtime/outbox/feed.py): no claim fills it, and recover() waits."""
        self.reserved += 1

    def unreserve(self) -> None:
        """Give back a slot a broker message held while its attempt was being accepted
        (runtime/outbox/feed.py); jobs claimed ahead may start in it."""
        self.reserved -= 1
        self._start_ready()

    def start_claim(self, claim: Claim) -> None:
        """Run an attempt taken elsewhere (a broker message's, runtime/outbox/feed.py) in a slot."""
        self._start(claim)

    async def start(self) -> None:
        self.tasks = sorted(self.registry)  # the claim's task filter, read once
        self._context = contextvars.copy_context()
        log_event(
            log,
            "worker.started",
            worker=self.worker_id,
            queues=self.queues or "*",
            concurrency=self.concurrency,
            tasks=len(self.registry),
            loop=loop_name(asyncio.get_running_loop()),
        )
        if not self.registry:
            log_event(
                log,
                "worker.no_tasks",
                logging.WARNING,
                reason="its app registers no task, so it claims no job; import the modules "
                "that declare them (@app.task) in the module --app names",
            )

    async def run(self) -> None:
        await self._claim_loop()
        await self._drain()

    async def _claim_loop(self) -> None:
        runner = self.runner
        backoff = 0.0  # grows while the database is unreachable
        while not self.stopping:
            # jobs claimed ahead start in any slot free now: a slot a broker message held
            # (reserved) and gave back without running an attempt frees no handler, so
            # nothing else would start them (runtime/outbox/feed.py; many stale messages at once
            # after a withdraw, docs/outbox.md)
            self._start_ready()
            room = self.room()
            if room > 0:
                began = time.monotonic()
                try:
                    # the claim reads its own instant once its connection is held; the due
                    # timer pops what was due before it began (it looked at all of that)
                    now = runner.clock.now()
                    claims = await runner.calls(
                        functools.partial(self._claim, room, runner.clock.now)
                    )
                    backoff = 0.0
                    self._paced(began, time.monotonic())
                    if self.due is not None:
                        self.due.pop_due(now)  # that claim looked at everything due by then
                except Exception as exc:
                    self.unsure = True  # the claim may have committed before its answer was lost
                    backoff = min(max(backoff * 2, self.poll_interval), 10.0)
                    log_event(
                        log,
                        "claim.failed",
                        logging.WARNING,
                        error=repr(exc)[:200],
                        retry_in_s=backoff,
                    )
                    claims = []
                    await self.pause(backoff)
                runner.metrics.claimed(claims)
                for claim in claims:
                    self.ready.append(self._take(claim))
                self._start_ready()
                self.more_due = bool(claims) and len(claims) == room
                self.owed = False
                if self.unsure and not backoff and not self.reserved:
                    await self._recover_logged()
            else:
                self.owed = True
            self.idle.fire()
            if self.more_due:
                if self.room() >= self.claim_batch:
                    continue
                await self.pause(self.claim_linger)  # or until half the room is free
            else:
                await self._pause_for_work()

    async def recover(self) -> None:
        """Give back the attempts a claim started for this worker whose answer was lost (the
        connection dropped after its commit): running under its id in the store, yet unknown
        to its slots. Their jobs are due again at once instead of when their leases end. Run
        by the claim loop (no claim in flight) while no broker message is being accepted (an
        attempt the feed took is unknown to the slots until it starts); what the slots knew
        when it looked is theirs, whatever became of it since."""
        known = set(self.running)
        leases = await self.runner.calls(
            functools.partial(self.runner.store.held_leases, self.worker_id)
        )
        if self.reserved:  # a message was being accepted meanwhile: look again next claim
            return
        self.unsure = False
        lost = [
            lease
            for lease in leases
            if lease.attempt_id not in known and lease.attempt_id not in self.running
        ]
        if not lost:
            return
        log_event(
            log,
            "worker.unanswered_claims_given_back",
            logging.WARNING,
            jobs=len(lost),
            job_ids=[lease.job_id for lease in lost[:20]],
        )
        task = asyncio.create_task(self._give_back(lost))
        self._giving_back.add(task)
        task.add_done_callback(self._giving_back.discard)

    async def _recover_logged(self) -> None:
        try:
            await self.recover()
        except Exception as exc:  # still unsure: the next claim looks again
            log_event(log, "worker.recover_failed", logging.WARNING, error=repr(exc)[:200])

    async def _give_back(self, leases: list[Lease]) -> None:
        await asyncio.gather(*(self.runner.give_back(lease) for lease in leases))
        self.wake()  # their jobs are due now

    async def _pause_for_work(self) -> None:
        """Wait for the poll interval, a wake, or the next instant the timer knows jobs fall
        due or a limit that held back the last claim allows a start again (limit_at); on that
        instant return at once, not before it (the claim then decides, in the store, what is
        due and allowed)."""
        clock = self.runner.clock
        at = self.due.next() if self.due is not None else None
        if self.limit_at is not None and (at is None or self.limit_at < at):
            at = self.limit_at
        wait = self.poll_interval if at is None else (at - clock.now()).total_seconds()
        if at is None or wait >= self.poll_interval:
            await self.pause(self.poll_interval)
            return
        left = wait
        if wait > self.spin:
            woken = await self.pause(wait - self.spin)
            left = (at - clock.now()).total_seconds()
            if left > self.spin and (woken or left > self.spin + self.timer_early):
                return  # woken early (a wake, a stop), or the clock stood still: look again
        # the last stretch (longer after a timer that fired early) is watched
        limit = time.monotonic() + max(0.0, left) + self.spin
        while clock.now() < at and time.monotonic() < limit and not self.stopping:
            await asyncio.sleep(0)
        now = clock.now()
        if self.due is not None:
            self.due.pop_due(now)
        if self.limit_at is not None and self.limit_at <= now:
            self.limit_at = None  # reached: the next claim says anew

    def _take(self, claim: Claim) -> RunningAttempt:
        """A claimed attempt, held by this worker (its lease renewed) until recorded (its
        claim counted in the metrics by the caller, once per claim)."""
        self.runner.stats.claimed += 1
        running = self.runner.begin(claim)
        self.running[claim.attempt.id] = running
        return running

    def _start(self, claim: Claim) -> None:
        self.runner.metrics.claimed((claim,))
        self._run(self._take(claim))

    def _run(self, running: RunningAttempt) -> None:
        self.busy += 1
        self.started += 1
        running.execution = asyncio.create_task(
            self._execute(running), context=self._context.copy()
        )

    def _start_ready(self) -> None:
        """Start prefetched jobs in the free slots, oldest claim first."""
        while self.ready and self.free() > 0:
            self._run(self.ready.popleft())

    def _handler_done(self) -> None:
        self.busy -= 1
        self._slot_freed()

    def _slot_freed(self) -> None:
        """A slot is free again: a ready job starts in it, or the loop claims when the room
        is worth a claim."""
        self._start_ready()
        if self.more_due and self.room() >= self.claim_batch:
            self.wake()

    async def _execute(self, running: RunningAttempt) -> None:
        handler_ended = False

        def handler_done() -> None:
            nonlocal handler_ended
            handler_ended = True
            self.recording += 1  # its outcome is being recorded, until the finally below
            self._handler_done()

        try:
            await self.runner.run(running, handler_done)
        finally:
            del self.running[running.claim.attempt.id]
            held_a_slot = handler_ended and self.recording > self._unrecorded_allowed()
            if handler_ended:
                self.recording -= 1
            self.finished.fire()
            if held_a_slot:
                self._slot_freed()
            # a claim that took fewer jobs than it had room for took every due one: a slot
            # free again is no reason to look (one empty claim per job otherwise), unless the
            # loop looked while full or flow controls may have held jobs back
            if not self.more_due and (self.owed or self.restricted):
                self.wake()

    async def _release_ready(self) -> None:
        """Give the jobs still waiting ready back to the store, due again now."""
        ready, self.ready = list(self.ready), deque()
        if not ready:
            return
        log_event(log, "worker.releasing_prefetched", jobs=len(ready))
        try:
            await asyncio.gather(*(self.runner.release(running) for running in ready))
        finally:
            for running in ready:
                self.running.pop(running.claim.attempt.id, None)
                self.finished.fire()

    async def _drain(self) -> None:
        await self._release_ready()
        if self._giving_back:
            await asyncio.wait(self._giving_back, timeout=self.grace)
        executions = [r.execution for r in self.running.values() if r.execution is not None]
        if executions:
            log_event(log, "worker.draining", in_flight=len(executions), grace_s=self.grace)
            self.draining.fire()
            _, pending = await asyncio.wait(executions, timeout=self.grace)
            if pending:
                for running in list(self.running.values()):
                    running.interrupt()
                await asyncio.wait(pending, timeout=10)
