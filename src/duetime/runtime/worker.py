"""The worker: claims due jobs, runs their handlers under leases, records fenced outcomes.

One asyncio loop runs four duties: the claim loop (fill free slots with due jobs), the
heartbeat loop (renew leases in one batch, learn about cancellations and lost leases), the
reaper loop (return lapsed attempts to the retry path) and one execution per claimed job.
Store calls run in a small thread pool so a slow database never blocks async handlers.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
import os
import random
import socket
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from duetime.client import App, Task
from duetime.core.clock import Clock
from duetime.core.errors import StaleAttempt
from duetime.core.models import Claim, Job, Node, Outcome
from duetime.core.reconcile import Reconcile, lost_attempt_to_reconcile, outcome_for
from duetime.core.retry import ErrorCategory, Failure, RetryPolicy, classify, decide
from duetime.core.states import ATTEMPT_END, Event
from duetime.logs import log_event
from duetime.runtime.context import AttemptContext, JobCancelled, set_current
from duetime.runtime.metrics import WorkerMetrics
from duetime.runtime.planner import Planner
from duetime.runtime.reaper import Reaper
from duetime.store.base import Store
from duetime.version import __version__

log = logging.getLogger("duetime.worker")
T = TypeVar("T")


@dataclass
class WorkerStats:
    claimed: int = 0
    succeeded: int = 0
    retried: int = 0
    dead: int = 0
    cancelled: int = 0
    parked: int = 0
    stale_rejected: int = 0  # outcomes refused because another attempt holds the job now
    leases_lost: int = 0
    reaped: int = 0
    expired: int = 0


@dataclass
class _Running:
    claim: Claim
    ctx: AttemptContext
    last_beat: float
    handler: asyncio.Future[Any] | None = None
    interrupted: bool = False
    fenced_out: bool = False  # its completion transaction was refused: another attempt holds it
    finishing: bool = False  # its outcome is being recorded: heartbeats no longer speak for it
    execution: asyncio.Task[None] | None = field(default=None, repr=False)


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Worker:
    def __init__(
        self,
        app: App,
        *,
        queues: Sequence[str] | None = None,
        concurrency: int = 10,
        poll_interval: float = 0.5,
        reap_interval: float = 5.0,
        plan_interval: float = 1.0,
        planner: bool = True,
        grace: float = 30.0,
        worker_id: str | None = None,
        rng: random.Random | None = None,
        metrics: WorkerMetrics | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.app = app
        self.store: Store = app.store
        self.clock: Clock = app.clock
        self.queues = list(queues) if queues else None
        self.concurrency = concurrency
        self.poll_interval = poll_interval
        self.reap_interval = reap_interval
        self.grace = grace
        self.worker_id = worker_id or default_worker_id()
        self.rng = rng or random.Random()
        self.stats = WorkerStats()
        self.metrics = metrics or WorkerMetrics()  # Prometheus figures of this process
        self.reaper = Reaper(self.store, self.clock, rng=self.rng)
        self.planner = Planner(self.store, self.clock) if planner else None
        self.plan_interval = plan_interval
        self._running: dict[int, _Running] = {}
        self._handlers = ThreadPoolExecutor(concurrency, thread_name_prefix="duetime-handler")
        self._io = ThreadPoolExecutor(4, thread_name_prefix="duetime-store")
        self._wake: asyncio.Event | None = None
        self._stopping = False
        self._threads_lock = threading.Lock()
        self._threads_busy = 0
        self._orphans = 0  # sync handler threads still running after their attempt was recorded
        self.metrics.watch_busy(lambda: len(self._running))

    # -- public -----------------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        return len(self._running)

    @property
    def abandoned_threads(self) -> int:
        """Sync handler threads still running (after shutdown: they outlived the grace period)."""
        with self._threads_lock:
            return self._threads_busy

    async def run(self, stop: asyncio.Event) -> None:
        """Work until `stop` is set, then shut down gracefully within the grace period."""
        self._wake = asyncio.Event()
        await self._call(functools.partial(self.store.register_node, self.node(), self.clock.now()))
        log_event(
            log,
            "worker.started",
            worker=self.worker_id,
            queues=self.queues or "*",
            concurrency=self.concurrency,
        )
        duties: list[asyncio.Task[Any]] = [
            asyncio.create_task(self._claim_loop(), name="duetime-claim"),
            asyncio.create_task(self._reap_loop(), name="duetime-reap"),
            asyncio.create_task(self._node_loop(), name="duetime-node"),
        ]
        if self.planner is not None:
            synced = await self._call(self.app.sync_schedules)
            for name, action in synced.items():
                log_event(log, "schedule.synced", schedule=name, action=action)
            duties.append(asyncio.create_task(self._plan_loop(), name="duetime-plan"))
        beats = asyncio.create_task(self._heartbeat_loop(), name="duetime-heartbeat")
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait([stopped, *duties], return_when=asyncio.FIRST_COMPLETED)
        for duty in duties:
            if duty.done() and duty.exception():
                log.error("worker duty %s crashed", duty.get_name(), exc_info=duty.exception())
        self._stopping = True
        self._wake.set()
        claim_loop, others = duties[0], duties[1:]
        for duty in [*others, stopped]:
            duty.cancel()
        # a claim already sent to the store may commit: let it return and start its jobs
        await asyncio.gather(claim_loop, return_exceptions=True)
        await self._drain()
        beats.cancel()
        await asyncio.gather(beats, *duties, return_exceptions=True)
        try:
            self.store.stop_node(self.worker_id, self.clock.now())
        except Exception:
            log.warning("could not mark this node stopped", exc_info=True)
        self._io.shutdown(wait=True)
        self._handlers.shutdown(wait=False, cancel_futures=True)
        log_event(log, "worker.stopped", worker=self.worker_id, **vars(self.stats))

    # -- loops ------------------------------------------------------------------------------

    async def _claim_loop(self) -> None:
        assert self._wake is not None
        backoff = 0.0  # grows while the database is unreachable
        while not self._stopping:
            free = self.concurrency - len(self._running) - self._orphans
            claimed = 0
            if free > 0:
                try:
                    claims = await self._call(
                        functools.partial(
                            self.store.claim,
                            worker_id=self.worker_id,
                            queues=self.queues,
                            limit=free,
                            now=self.clock.now(),
                        )
                    )
                    backoff = 0.0
                except Exception as exc:
                    backoff = min(max(backoff * 2, self.poll_interval), 10.0)
                    log_event(
                        log,
                        "claim.failed",
                        logging.WARNING,
                        error=repr(exc)[:200],
                        retry_in_s=backoff,
                    )
                    claims = []
                    await asyncio.sleep(backoff)
                for claim in claims:
                    self._start(claim)
                claimed = len(claims)
            if claimed and claimed == free:
                continue  # there may be more due work: fill slots as they free up
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), self.poll_interval)
            except TimeoutError:
                pass

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self._beat_tick())
            await self.heartbeat_once()

    def _beat_tick(self) -> float:
        waits = [_renew_after(r) for r in self._running.values()] or [CANCEL_CHECK_SECONDS]
        return max(0.05, min(waits) / 2)

    async def heartbeat_once(self) -> None:
        """Renew every lease due for renewal (see _renew_after), in one batch."""
        now = time.monotonic()
        due = [r for r in self._running.values() if now - r.last_beat >= _renew_after(r)]
        if not due:
            return
        try:
            states = await self._call(
                functools.partial(
                    self.store.heartbeat, [r.claim.lease for r in due], self.clock.now()
                )
            )
        except Exception:
            log.exception("heartbeat failed; leases will be renewed on the next tick")
            return
        for running, state in zip(due, states, strict=True):
            running.last_beat = now
            if running.finishing or running.claim.attempt.id not in self._running:
                continue  # it ended while the batch was in flight: "not held" is its own doing
            if not state.held and not running.ctx.lease_lost:
                running.ctx.lease_lost = True
                self.stats.leases_lost += 1
                self.metrics.lease_lost()
                log_event(log, "lease.lost", logging.WARNING, **_ids(running.claim))
                self._ask_to_stop(running)
            elif state.cancel_requested and not running.ctx.cancel_requested:
                log_event(log, "job.cancel_seen", **_ids(running.claim))
                self._ask_to_stop(running)

    @staticmethod
    def _ask_to_stop(running: _Running) -> None:
        """Set the flag sync handlers poll; cancel an async handler cooperatively."""
        running.ctx.request_cancel()
        if isinstance(running.handler, asyncio.Task):
            running.handler.cancel()

    async def _reap_loop(self) -> None:
        while True:
            try:
                result = await self._call(self.reaper.run_once)
                self.stats.reaped += result.reaped
                self.metrics.leases_reaped(result.reaped)
                self.stats.expired += result.expired
            except Exception:
                log.exception("reaper run failed; trying again next interval")
            await asyncio.sleep(self.reap_interval)

    def node(self) -> Node:
        """This worker as a node of the cluster (see `duetime nodes`)."""
        now = self.clock.now()
        duties = ("worker", "reaper", "planner") if self.planner else ("worker", "reaper")
        return Node(
            id=self.worker_id,
            hostname=socket.gethostname(),
            pid=os.getpid(),
            queues=tuple(self.queues) if self.queues else None,
            concurrency=self.concurrency,
            duties=duties,
            version=__version__,
            started_at=now,
            last_seen_at=now,
        )

    async def _node_loop(self) -> None:
        while True:
            await asyncio.sleep(NODE_HEARTBEAT_SECONDS)
            try:
                await self._call(
                    functools.partial(self.store.touch_node, self.worker_id, self.clock.now())
                )
            except Exception:
                log.warning("node heartbeat failed; trying again", exc_info=True)

    async def _plan_loop(self) -> None:
        assert self.planner is not None
        planner = self.planner
        while True:
            try:
                result = await self._call(planner.run_once)
                if result.occurrences or result.released:
                    assert self._wake is not None
                    self._wake.set()  # new due work: claim without waiting for the poll
            except Exception:
                log.exception("planner run failed; trying again next interval")
            await asyncio.sleep(self.plan_interval)

    # -- one attempt ------------------------------------------------------------------------

    def _start(self, claim: Claim) -> None:
        self.stats.claimed += 1
        self.metrics.claimed(claim)
        ctx = AttemptContext(claim)
        ctx._completion = functools.partial(
            self.store.completion, claim.lease, Outcome(Event.SUCCEED), self.clock.now
        )
        running = _Running(claim, ctx, last_beat=time.monotonic())
        self._running[claim.attempt.id] = running
        running.execution = asyncio.create_task(self._execute(running))

    async def _execute(self, running: _Running) -> None:
        claim = running.claim
        job = claim.job
        task = self.app.tasks.get(job.task)
        log_event(
            log,
            "job.started",
            **_ids(claim),
            attempt=job.attempts,
            lag_ms=int((claim.attempt.started_at - job.due_at).total_seconds() * 1000),
        )
        started = time.monotonic()
        try:
            try:
                outcome = await self._run_handler(running, task)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bug while deciding must not strand the attempt
                log.exception("could not decide the outcome of job %s", job.id)
                outcome = Outcome(
                    Event.RETRY,
                    due_at=self.clock.now(),
                    error_category=ErrorCategory.RETRYABLE,
                    error_message=f"worker error while deciding the outcome: {exc!r}",
                    error_traceback="".join(traceback.format_exception(exc)),
                )
            await self._record(running, outcome, time.monotonic() - started)
        finally:
            del self._running[claim.attempt.id]
            with self._threads_lock:
                # its thread still runs: keep the slot taken (a handler a reconcile hook
                # settled never had a thread)
                in_thread = task is not None and not task.is_async and running.handler is not None
                if in_thread and not running.ctx.thread_done:
                    running.ctx.orphaned = True
                    self._orphans += 1
            assert self._wake is not None
            self._wake.set()

    async def _run_handler(self, running: _Running, task: Task | None) -> Outcome:
        job = running.claim.job
        # backoff from the job's record (as the reaper does); classification from the task
        permanent = task.defaults.retry.permanent if task else ()
        policy = RetryPolicy(job.retry_base, job.retry_cap, permanent)
        try:
            if task is None:
                raise LookupError(
                    f"no handler for task {job.task!r} in this worker; register it with "
                    "@app.task or run a worker whose app knows it"
                )
            if task.reconcile is not None and job.generation > 1:
                settled = await self._reconcile(running, task)
                if settled is not None:
                    return settled
            running.handler, started = self._invoke(task, running.ctx, job.args)
            await started  # a sync handler may wait for a free thread; its timeout starts now
            await asyncio.wait_for(asyncio.shield(running.handler), job.timeout_seconds)
            return Outcome(Event.SUCCEED)
        except TimeoutError as exc:
            if running.handler is not None and not running.handler.done():
                running.ctx.request_cancel()
                running.handler.cancel()
                failure = Failure(
                    ErrorCategory.TIMEOUT,
                    f"attempt ran past its timeout of {job.timeout_seconds:g}s",
                )
            else:
                failure = classify(exc, policy)
        except (asyncio.CancelledError, JobCancelled) as exc:
            if running.interrupted:
                return Outcome(
                    Event.RETRY,
                    due_at=self.clock.now(),
                    error_category=ErrorCategory.INTERRUPTED,
                    error_message="the worker shut down before the handler finished",
                )
            if isinstance(exc, asyncio.CancelledError) and not running.ctx.cancel_requested:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise  # the worker itself is being cancelled
                # the handler let a CancelledError of its own escape: an ordinary failure
                failure = classify(exc, policy)
                return self._failed(failure, job, policy)
            return Outcome(
                Event.STOP,
                error_category=ErrorCategory.CANCELLED,
                error_message="the handler stopped after cancellation was requested",
            )
        except StaleAttempt:
            running.fenced_out = True
            return Outcome(Event.SUCCEED)  # not recorded: the store refused it already
        except Exception as exc:
            if running.ctx.completed:  # the success is recorded; what came after cannot undo it
                log.warning("job %s raised after its transaction committed", job.id, exc_info=exc)
                return Outcome(Event.SUCCEED)
            failure = classify(exc, policy)
        return self._failed(failure, job, policy)

    async def _reconcile(self, running: _Running, task: Task) -> Outcome | None:
        """Ask the task's reconcile hook about a lost earlier attempt, before running again."""
        job = running.claim.job
        full = await self._call(functools.partial(self.store.get_job, job.id))
        if full is None or task.reconcile is None:
            return None
        lost = lost_attempt_to_reconcile(full.attempt_history, job.generation)
        if lost is None:
            return None
        hook = task.reconcile
        context = contextvars.copy_context()
        context.run(set_current, running.ctx)
        try:
            if inspect.iscoroutinefunction(hook):
                answer = await asyncio.get_running_loop().create_task(
                    hook(full, lost), context=context
                )
            else:
                answer = await asyncio.get_running_loop().run_in_executor(
                    self._handlers, functools.partial(context.run, hook, full, lost)
                )
            verdict = Reconcile(answer)
        except Exception as exc:
            failure = Failure(
                ErrorCategory.RECONCILE_FAILED,
                f"the reconcile hook failed: {type(exc).__name__}: {exc}",
                "".join(traceback.format_exception(exc)),
            )
            return self._failed(failure, job, RetryPolicy(job.retry_base, job.retry_cap))
        log_event(
            log, "job.reconciled", **_ids(running.claim), lost=lost.generation, answer=str(verdict)
        )
        return outcome_for(verdict, lost)

    def _failed(self, failure: Failure, job: Job, policy: RetryPolicy) -> Outcome:
        decision = decide(
            failure,
            attempts=job.attempts,
            max_attempts=job.max_attempts,
            policy=policy,
            now=self.clock.now(),
            rng=self.rng,
        )
        return Outcome(
            decision.event,
            due_at=decision.due_at,
            error_category=failure.category,
            error_message=failure.message,
            error_traceback=failure.traceback,
        )

    def _invoke(
        self, task: Task, ctx: AttemptContext, args: dict[str, Any]
    ) -> tuple[asyncio.Future[Any], asyncio.Future[None]]:
        """Start the handler; return its future and one that resolves when it starts running."""
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        context.run(set_current, ctx)
        started: asyncio.Future[None] = loop.create_future()
        if task.is_async:
            started.set_result(None)
            return loop.create_task(_guarded(task.fn(**args)), context=context), started

        def mark_started() -> None:
            if not started.done():
                started.set_result(None)

        def in_thread() -> Any:
            with self._threads_lock:
                self._threads_busy += 1
            loop.call_soon_threadsafe(mark_started)
            try:
                return task.fn(**args)
            except (SystemExit, KeyboardInterrupt) as exc:
                raise HandlerExit(exc) from exc
            finally:
                with self._threads_lock:
                    self._threads_busy -= 1
                    ctx.thread_done = True
                    if ctx.orphaned:
                        self._orphans -= 1

        handler = loop.run_in_executor(self._handlers, functools.partial(context.run, in_thread))
        handler.add_done_callback(lambda _: mark_started())
        return handler, started

    async def _record(self, running: _Running, outcome: Outcome, seconds: float) -> None:
        running.finishing = True
        if running.ctx.completed or running.fenced_out:  # settled in the handler's transaction
            self._report(running, outcome, seconds, applied=not running.fenced_out)
            return
        applied = await self._store_outcome(running, outcome)
        if applied is not None:
            self._report(running, outcome, seconds, applied)

    async def _store_outcome(self, running: _Running, outcome: Outcome) -> bool | None:
        """Record the outcome, retrying while the database is unreachable; None if it never
        could be (the lease then lapses and the reaper retries the job)."""
        claim = running.claim
        delay = 0.1
        # fencing keeps a late write safe, so keep trying well past the lease: the outcome is
        # worth recording (a stale one is then refused and kept as a late report)
        give_up = time.monotonic() + max(120.0, 4 * claim.job.lease_seconds)
        while True:
            try:
                applied = await self._call(
                    functools.partial(self.store.finish, claim.lease, outcome, self.clock.now())
                )
                break
            except Exception as exc:
                if time.monotonic() > give_up:
                    log.exception("could not record outcome; the lease will expire and be reaped")
                    return None
                log_event(
                    log,
                    "outcome.retrying",
                    logging.WARNING,
                    **_ids(claim),
                    error=repr(exc)[:200],
                    retry_in_s=round(delay, 1),
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
        return bool(applied)

    def _report(self, running: _Running, outcome: Outcome, seconds: float, applied: bool) -> None:
        claim = running.claim
        fields: dict[str, Any] = {**_ids(claim), "duration_ms": int(seconds * 1000)}
        if running.ctx.completed:
            fields["recorded"] = "in the handler's transaction"
        if not applied:
            self.stats.stale_rejected += 1
            self.metrics.stale_rejected(claim.job.task, seconds)
            log_event(
                log,
                "outcome.rejected_stale",
                logging.WARNING,
                **fields,
                outcome=str(outcome.attempt_status or ATTEMPT_END[outcome.event]),
                reason="another attempt holds the job now (this worker's lease was lost)",
            )
            return
        if outcome.error_category:
            fields["error"] = outcome.error_category
            fields["message"] = (outcome.error_message or "")[:200]
        if outcome.due_at is not None:
            fields["retry_at"] = outcome.due_at.isoformat()
        name, counter, label = _RECORDED[outcome.event]
        setattr(self.stats, counter, getattr(self.stats, counter) + 1)
        self.metrics.finished(claim.job.task, label, seconds)
        level = logging.WARNING if outcome.event is Event.GIVE_UP else logging.INFO
        log_event(log, name, level, **fields)

    # -- shutdown ---------------------------------------------------------------------------

    async def _drain(self) -> None:
        executions = [r.execution for r in self._running.values() if r.execution is not None]
        if executions:
            log_event(log, "worker.draining", in_flight=len(executions), grace_s=self.grace)
            _, pending = await asyncio.wait(executions, timeout=self.grace)
            if pending:
                for running in list(self._running.values()):
                    running.interrupted = True
                    running.ctx.request_cancel()
                    if running.handler is not None:
                        running.handler.cancel()
                await asyncio.wait(pending, timeout=10)

    async def _call(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._io, fn)


# how a recorded outcome is logged, the WorkerStats counter it adds to, and its outcome label
# in the duetime_attempts_total metric
_RECORDED: dict[Event, tuple[str, str, str]] = {
    Event.SUCCEED: ("job.succeeded", "succeeded", "succeeded"),
    Event.RETRY: ("job.retry_scheduled", "retried", "retried"),
    Event.GIVE_UP: ("job.dead", "dead", "dead"),
    Event.STOP: ("job.cancelled", "cancelled", "cancelled"),
    Event.PARK: ("job.parked", "parked", "parked"),
}
CANCEL_CHECK_SECONDS = 2.0
NODE_HEARTBEAT_SECONDS = 5.0  # `duetime nodes` calls a node dead after 30 s of silence


def _renew_after(running: _Running) -> float:
    """Renew a lease at a third of its length, and at least every 2 s to notice cancellation."""
    return min(running.claim.job.lease_seconds / 3, CANCEL_CHECK_SECONDS)


class HandlerExit(Exception):
    """A handler called sys.exit() or raised KeyboardInterrupt: a failed attempt, not a crash."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(f"handler raised {type(exc).__name__}({exc}); the worker keeps running")


async def _guarded(coro: Coroutine[Any, Any, Any]) -> Any:
    try:
        return await coro
    except (SystemExit, KeyboardInterrupt) as exc:
        raise HandlerExit(exc) from exc


def _ids(claim: Claim) -> dict[str, Any]:
    return {
        "job_id": claim.job.id,
        "task": claim.job.task,
        "generation": claim.attempt.generation,
    }
