"""One attempt's life: run its handler, decide its outcome, record it fenced, report it.

AttemptRunner.begin(claim) makes a RunningAttempt; AttemptRunner.run() takes it to its end:
the task's reconcile hook (when an earlier attempt was lost), the handler (an `async` one
awaited in the attempt's own task, or with a timeout as a task of its own beside it; a sync
one in runtime/handlers.py's threads) under the job's timeout and cooperative cancellation,
the classification of what it raised and the retry decision, the outcome written fenced by
the attempt's generation (retried while the database is down), and the log line, WorkerStats
counter and metrics of the result. Claiming and slots are runtime/slots.py's; lease renewals
are runtime/leases.py's. Past 400 lines because it has one purpose read in order, an
attempt's steps over the RunningAttempt they share (reconcile, run, classify, record,
report), each a short method; the log fields and the refusal reason with it.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
import random
import time
import traceback
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from duetime.core.errors import ArgsMismatch, StaleAttempt
from duetime.core.models import Claim, Job, Lease, Outcome
from duetime.core.reconcile import Reconcile, lost_attempt_to_reconcile, outcome_for
from duetime.core.results import ResultRejected, encode_result
from duetime.core.retry import ErrorCategory, Failure, Retry, RetryPolicy, classify, decide
from duetime.core.states import ATTEMPT_END, Event
from duetime.logs import log_event
from duetime.runtime.completer import Completer
from duetime.runtime.context import AttemptContext, JobCancelled, set_current
from duetime.runtime.handlers import HandlerThreads, guarded
from duetime.runtime.host import Host
from duetime.runtime.metrics import WorkerMetrics
from duetime.runtime.progress import ProgressWriter
from duetime.runtime.service import BlockingCalls
from duetime.tasks import AnyTask
from duetime.tracing import RunSpan, enabled

log = logging.getLogger("duetime.worker")  # attempt events are worker events (docs/workers.md)


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
class RunningAttempt:
    claim: Claim
    ctx: AttemptContext
    last_beat: float  # time.monotonic() of its last lease renewal
    handler: asyncio.Future[Any] | None = None
    interrupted: bool = False
    fenced_out: bool = False  # its completion transaction was refused: another attempt holds it
    finishing: bool = False  # its outcome is being recorded: heartbeats no longer speak for it
    execution: asyncio.Task[None] | None = field(default=None, repr=False)
    trace: RunSpan | None = None  # its span, when this process traces (duetime/tracing.py)
    # its async handler is being awaited in `execution` itself (AttemptRunner._inline), and
    # how many times a stop cancelled that task meanwhile (taken back once the handler is over)
    inline: bool = False
    cancels: int = 0

    def ask_to_stop(self) -> None:
        """Set the flag sync handlers poll; cancel an async handler cooperatively."""
        self.ctx.request_cancel()
        if self.inline:
            self._cancel_inline()
        elif isinstance(self.handler, asyncio.Task):
            self.handler.cancel()

    def interrupt(self) -> None:
        """The worker stops past its grace period: stop the handler, record it interrupted."""
        self.interrupted = True
        self.ctx.request_cancel()
        if self.inline:
            self._cancel_inline()
        elif self.handler is not None:
            self.handler.cancel()

    def _cancel_inline(self) -> None:
        """Cancel the handler awaited in this attempt's own task: that task, while (and only
        while) it is suspended in the handler."""
        if self.execution is not None and self.execution.cancel():
            self.cancels += 1


class AttemptRunner:
    """Runs attempts to their recorded end, for every slot of one worker."""

    def __init__(
        self,
        app: Host,
        calls: BlockingCalls,
        threads: HandlerThreads,
        *,
        rng: random.Random,
        stats: WorkerStats,
        metrics: WorkerMetrics,
        completer: Completer,
        progress: ProgressWriter | None = None,
    ) -> None:
        self.app = app
        self.completer = completer
        self.progress = progress  # the worker's progress writer (None: reports go with outcomes)
        # bound once: every attempt's context points at the same two methods
        self._sink = progress.note if progress is not None else None
        self._completion = self._completion_of
        self._parent_reader = app.store.parent_results
        self.store = app.store
        self.clock = app.clock
        self.calls = calls
        self.threads = threads
        self.rng = rng
        self.stats = stats
        self.metrics = metrics

    def begin(self, claim: Claim) -> RunningAttempt:
        task = self.app.tasks.get(claim.job.task)
        lateness = task.defaults.max_lateness_seconds if task is not None else None
        ctx = AttemptContext(
            claim, max_lateness=timedelta(seconds=lateness) if lateness is not None else None
        )
        ctx._completion = self._completion
        ctx._progress_sink = self._sink
        ctx._parent_reader = self._parent_reader
        return RunningAttempt(claim, ctx, last_beat=time.monotonic())

    async def run(
        self, running: RunningAttempt, handler_done: Callable[[], None] | None = None
    ) -> None:
        """Run the attempt to its recorded end; `handler_done` is called once its handler is
        over (its outcome decided), before the outcome is recorded."""
        claim = running.claim
        job = claim.job
        task = self.app.tasks.get(job.task)
        if log.isEnabledFor(logging.INFO):  # its fields cost something per job
            log_event(
                log,
                "job.started",
                **claim_fields(claim),
                attempt=job.attempts,
                lag_ms=int((claim.attempt.started_at - job.due_at).total_seconds() * 1000),
            )
        bound = running.ctx.max_lateness
        if bound is not None and running.ctx.late:
            self.metrics.late(job.task)
            log_event(
                log,
                "job.late",
                level=logging.WARNING,
                **claim_fields(claim),
                lateness_ms=int(running.ctx.lateness.total_seconds() * 1000),
                max_lateness_ms=int(bound.total_seconds() * 1000),
            )
        started = time.monotonic()
        if enabled():  # the application traces: the attempt runs in its span
            running.trace = RunSpan.start(job, claim.attempt)
        outcome: Outcome | None = None
        recorded: bool | None = None
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
            reported = running.ctx.reported
            if reported is not None and outcome.progress is None:  # its last report goes too
                outcome = replace(outcome, progress=reported[0], progress_message=reported[1])
            seconds = time.monotonic() - started
            self.threads.orphan_if_running(running.ctx)
            if handler_done is not None:
                handler_done()
                handler_done = None
            recorded = await self._record(running, outcome, seconds)
        finally:
            self.threads.orphan_if_running(running.ctx)
            if handler_done is not None:
                handler_done()
            if running.trace is not None:
                running.trace.end(*span_outcome(outcome, recorded))

    async def release(self, running: RunningAttempt) -> None:
        """Give back a claimed attempt whose handler never started (a prefetched job when the
        worker stops): recorded fenced as interrupted, the job due again now."""
        outcome = self._unstarted("the worker shut down before the job started; it runs again")
        await self._record(running, outcome, 0.0)

    async def give_back(self, lease: Lease) -> bool | None:
        """Give back an attempt a claim started for this worker whose answer never reached it
        (the connection dropped after the commit): recorded fenced as interrupted, its job due
        again now, instead of waiting for its lease to end. True once recorded."""
        outcome = self._unstarted(
            "the worker never heard back from the claim that started this attempt (its "
            "database connection dropped); the job runs again"
        )
        return await self.completer.record(lease, outcome, give_up_after=120.0)

    def _unstarted(self, why: str) -> Outcome:
        """The outcome of an attempt given back before its handler started: interrupted, its
        job due again now."""
        return Outcome(
            Event.RETRY,
            due_at=self.clock.now(),
            error_category=ErrorCategory.INTERRUPTED,
            error_message=why,
        )

    async def _run_handler(self, running: RunningAttempt, task: AnyTask | None) -> Outcome:
        job = running.claim.job
        if running.ctx.cancel_requested:  # asked to stop before it started (it was prefetched)
            return Outcome(
                Event.STOP,
                error_category=ErrorCategory.CANCELLED,
                error_message="cancellation was requested before the handler started",
            )
        if task is not None:
            try:
                task.check_args(job.args)
            except ArgsMismatch as exc:  # running again cannot help: dead after this attempt
                failure = Failure(ErrorCategory.PERMANENT, str(exc))
                return self._failed(failure, job, _policy(job, task))
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
            if task.is_async and job.timeout_seconds is None:
                value = await self._inline(running, task)
            else:
                running.handler, started = self._invoke(task, running.ctx, job.args)
                if started is not None:  # a sync handler may wait for a free thread
                    await started  # its timeout starts now
                value = await wait_shielded(running.handler, job.timeout_seconds)
            if value is None and running.ctx.reported is None:
                return SUCCEEDED  # most handlers: nothing more to store
            return self._success(running.ctx, value)
        except TimeoutError as exc:
            policy = _policy(job, task)
            if running.handler is not None and not running.handler.done():
                running.ctx.request_cancel()
                running.handler.cancel()
                failure = Failure(
                    ErrorCategory.TIMEOUT,
                    f"attempt ran past its timeout of {job.timeout_seconds:g}s",
                )
            else:  # the handler raised it
                if running.trace is not None:
                    running.trace.exception(exc)
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
                policy = _policy(job, task)
                return self._failed(classify(exc, policy), job, policy)
            return Outcome(
                Event.STOP,
                error_category=ErrorCategory.CANCELLED,
                error_message="the handler stopped after cancellation was requested",
            )
        except ResultRejected as exc:  # transaction(result=...) refused it
            return self._failed(Failure(ErrorCategory.PERMANENT, str(exc)), job, _policy(job, task))
        except StaleAttempt:
            running.fenced_out = True
            return Outcome(Event.SUCCEED)  # not recorded: the store refused it already
        except Exception as exc:
            if running.trace is not None:
                running.trace.exception(exc)
            if running.ctx.completed:  # the success is recorded; what came after cannot undo it
                log.warning("job %s raised after its transaction committed", job.id, exc_info=exc)
                return Outcome(Event.SUCCEED)
            policy = _policy(job, task)
            failure = classify(exc, policy)
            if isinstance(exc, Retry) and exc.dependency and job.limits:
                await self._pause_dependency(job, exc)
        return self._failed(failure, job, policy)

    def _success(self, ctx: AttemptContext, value: Any) -> Outcome:
        """The success of a handler that returned `value` or reported progress: its result
        stored with it, or a permanent failure when the value cannot be stored (too large, not
        JSON: core/results.py)."""
        job = ctx.claim.job
        if ctx.completed:  # recorded in its transaction(), which took the result (or none)
            if value is not None:
                log.warning(
                    "job %s returned a value after its transaction() recorded the success: not "
                    "stored (pass it as transaction(result=...))",
                    job.id,
                )
            return SUCCEEDED
        try:
            return self._succeeded(ctx, value)
        except ResultRejected as exc:
            task = self.app.tasks.get(job.task)
            return self._failed(Failure(ErrorCategory.PERMANENT, str(exc)), job, _policy(job, task))

    def _succeeded(self, ctx: AttemptContext, value: Any) -> Outcome:
        """The success outcome of `ctx` with `value` as its result (ResultRejected)."""
        task = self.app.tasks.get(ctx.claim.job.task)
        limit = task.result_max_bytes if task is not None else None
        text = encode_result(value, limit or self.app.result_max_bytes)
        reported = ctx.reported
        if text is None and reported is None:
            return SUCCEEDED
        return Outcome(
            Event.SUCCEED,
            result=text,
            progress=reported[0] if reported else None,
            progress_message=reported[1] if reported else None,
        )

    def _completion_of(self, ctx: AttemptContext, result: Any) -> AbstractContextManager[Any]:
        """The completion transaction of `ctx`'s success with `result` (ResultRejected)."""
        return self.store.completion(ctx.claim.lease, self._succeeded(ctx, result), self.clock.now)

    async def _pause_dependency(self, job: Job, exc: Retry) -> None:
        """Retry(dependency=True): pause every limit key of the job until the retry's instant
        (a failure to record it is logged: the job's own retry still stands)."""
        now = self.clock.now()
        until = exc.at.astimezone(now.tzinfo) if exc.at is not None else now
        if exc.at is None:
            until = now + timedelta(seconds=exc.after)
        try:
            await self.calls(functools.partial(self.store.pause_limits, job.limits, until, now))
        except Exception:
            log.exception("could not pause limits %s of job %s", list(job.limits), job.id)
            return
        log_event(
            log, "limits.paused", job_id=job.id, limits=list(job.limits), until=until.isoformat()
        )

    async def _reconcile(self, running: RunningAttempt, task: AnyTask) -> Outcome | None:
        """Ask the task's reconcile hook about a lost earlier attempt, before running again."""
        job = running.claim.job
        full = await self.calls(functools.partial(self.store.get_job, job.id))
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
                    self.threads.pool, functools.partial(context.run, hook, full, lost)
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
            log,
            "job.reconciled",
            **claim_fields(running.claim),
            lost=lost.generation,
            answer=str(verdict),
        )
        return outcome_for(verdict, lost)

    def _failed(self, failure: Failure, job: Job, policy: RetryPolicy) -> Outcome:
        now = self.clock.now()
        decision = decide(
            failure,
            attempts=job.attempts,
            max_attempts=job.max_attempts,
            policy=policy,
            now=now,
            rng=self.rng,
        )
        return Outcome(
            decision.event,
            due_at=decision.due_at,
            decided_at=now,
            error_category=failure.category,
            error_message=failure.message,
            error_traceback=failure.traceback,
        )

    @staticmethod
    async def _inline(running: RunningAttempt, task: AnyTask) -> Any:
        """An async handler without a timeout, awaited in its attempt's own task (Slots
        gives each attempt a task with a context of its own) rather than in a task of its own
        beside it: a task and a future less a job (3 us of the event loop's time a job; docs/
        performance.md, "An async handler in its attempt's task"). Nothing has to outlive
        a wait here (a handler with a timeout has its own task, left running when the timeout
        records the attempt). A stop or an interrupt cancels this task while it is suspended
        in the handler (RunningAttempt.inline), and those cancellations are taken back once
        the handler is over, so the outcome's record that follows is not cancelled and a
        cancellation of the worker itself is still told apart (Task.cancelling)."""
        set_current(running.ctx)
        running.inline = True
        try:
            return await guarded(task.fn(**running.claim.job.args))
        finally:
            running.inline = False
            if running.cancels:  # read the task only then: this runs for every job
                current = asyncio.current_task()
                while running.cancels and current is not None:
                    running.cancels -= 1
                    current.uncancel()

    def _invoke(
        self, task: AnyTask, ctx: AttemptContext, args: dict[str, Any]
    ) -> tuple[asyncio.Future[Any], asyncio.Future[None] | None]:
        """Start the handler; return its future and, for a sync handler, one that resolves
        when it starts running (None: an async handler runs from now)."""
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        context.run(set_current, ctx)
        if task.is_async:
            return loop.create_task(guarded(task.fn(**args)), context=context), None
        started: asyncio.Future[None] = loop.create_future()

        def mark_started() -> None:
            if not started.done():
                started.set_result(None)

        call = functools.partial(context.run, functools.partial(task.fn, **args))
        handler = self.threads.start(call, ctx, mark_started)
        handler.add_done_callback(lambda _: mark_started())
        return handler, started

    async def _record(
        self, running: RunningAttempt, outcome: Outcome, seconds: float
    ) -> bool | None:
        """Record the outcome and report it: True once recorded, False if the store refused
        it (fenced out), None if it never could be recorded."""
        running.finishing = True
        if running.ctx.reported is not None and self.progress is not None:
            self.progress.forget(running.claim.lease)  # the outcome carries the last report
        if running.ctx.completed or running.fenced_out:  # settled in the handler's transaction
            applied: bool | None = not running.fenced_out
        else:
            applied = await self._store_outcome(running, outcome)
        if applied is None:
            return None
        why = "" if applied else await self._refusal(running.claim.lease)
        self._report(running, outcome, seconds, applied, why)
        return applied

    async def _refusal(self, lease: Lease) -> str:
        """Why the store refused this attempt's outcome, from what became of its job."""
        try:
            job = await self.calls(functools.partial(self.store.get_job, lease.job_id))
        except Exception as exc:  # the outcome stands refused either way
            return f"the job moved on without this attempt ({exc!r:.100} reading what became of it)"
        return refusal_reason(job, lease)

    async def _store_outcome(self, running: RunningAttempt, outcome: Outcome) -> bool | None:
        """Record the outcome through the completer (batched with other slots' outcomes,
        retried while the database is unreachable); None if it never could be (the lease then
        lapses and the reaper retries the job)."""
        # fencing keeps a late write safe, so keep trying well past the lease: the outcome is
        # worth recording (a stale one is then refused and kept as a late report)
        give_up = max(120.0, 4 * running.claim.job.lease_seconds)
        return await self.completer.record(running.claim.lease, outcome, give_up_after=give_up)

    def _report(
        self,
        running: RunningAttempt,
        outcome: Outcome,
        seconds: float,
        applied: bool,
        why: str = "",
    ) -> None:
        claim = running.claim
        if not applied:
            self.stats.stale_rejected += 1
            self.metrics.stale_rejected(claim.job.task, seconds)
            log_event(
                log,
                "outcome.rejected_stale",
                logging.WARNING,
                **self._fields(running, seconds),
                outcome=str(outcome.attempt_status or ATTEMPT_END[outcome.event]),
                reason=why,
            )
            return
        name, counter, label = RECORDED[outcome.event]
        setattr(self.stats, counter, getattr(self.stats, counter) + 1)
        self.metrics.finished(claim.job.task, label, seconds)
        level = logging.WARNING if outcome.event is Event.GIVE_UP else logging.INFO
        if not log.isEnabledFor(level):  # the fields cost something per job
            return
        fields = self._fields(running, seconds)
        if outcome.error_category:
            fields["error"] = outcome.error_category
            fields["message"] = (outcome.error_message or "")[:200]
        if outcome.due_at is not None:
            fields["retry_at"] = outcome.due_at.isoformat()
        log_event(log, name, level, **fields)

    @staticmethod
    def _fields(running: RunningAttempt, seconds: float) -> dict[str, Any]:
        """The fields of an attempt's last log line."""
        fields: dict[str, Any] = {
            **claim_fields(running.claim),
            "duration_ms": int(seconds * 1000),
        }
        if running.ctx.completed:
            fields["recorded"] = "in the handler's transaction"
        return fields


SUCCEEDED = Outcome(Event.SUCCEED)  # frozen: one for every attempt that succeeds


async def wait_shielded(handler: asyncio.Future[Any], timeout: float | None) -> Any:
    """What `asyncio.wait_for(asyncio.shield(handler), timeout)` does, with one future and
    one timer instead of three futures and a timer (this runs for every job): the handler's
    result or exception (CancelledError if it was cancelled); TimeoutError once `timeout`
    seconds passed with the handler still running, which is left running; cancelling the
    caller does not cancel the handler."""
    if not handler.done():
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()

        def wake(_: object = None) -> None:
            if not waiter.done():
                waiter.set_result(None)

        handler.add_done_callback(wake)
        timer = loop.call_later(timeout, wake) if timeout is not None else None
        try:
            await waiter
        finally:
            handler.remove_done_callback(wake)
            if timer is not None:
                timer.cancel()
        if not handler.done():
            raise TimeoutError
    return handler.result()


def _policy(job: Job, task: AnyTask | None) -> RetryPolicy:
    """A failed attempt's retry policy: backoff from the job's record (as the reaper does),
    classification from the task (built only on a failure: not on every job's path)."""
    permanent = task.defaults.retry.permanent if task else ()
    return RetryPolicy(job.retry_base, job.retry_cap, permanent)


def refusal_reason(job: Job | None, lease: Lease) -> str:
    """Why an attempt's outcome was refused, in words: what became of the job (None: gone)."""
    if job is None:
        return "the job no longer exists (it was deleted, or pruned after it ended)"
    if job.generation != lease.generation:
        return (
            f"another attempt holds the job now (generation {job.generation}; "
            "this worker's lease was lost)"
        )
    current = [a for a in job.attempt_history if a.generation == job.generation]
    if lease.claim_token is None:
        return "this worker's lease carries no claim token (a worker of an earlier version)"
    if current and current[-1].claim_token != lease.claim_token:
        return (
            f"another claim holds the job now (generation {job.generation} with another claim "
            "token: this attempt belongs to a history the database lost in a failover)"
        )
    return f"this worker's lease was lost and the job moved on without it (it is {job.status})"


# how a recorded outcome is logged, the WorkerStats counter it adds to, and its outcome label
# in the duetime_attempts_total metric
RECORDED: dict[Event, tuple[str, str, str]] = {
    Event.SUCCEED: ("job.succeeded", "succeeded", "succeeded"),
    Event.RETRY: ("job.retry_scheduled", "retried", "retried"),
    Event.GIVE_UP: ("job.dead", "dead", "dead"),
    Event.STOP: ("job.cancelled", "cancelled", "cancelled"),
    Event.PARK: ("job.parked", "parked", "parked"),
}


def span_outcome(outcome: Outcome | None, recorded: bool | None) -> tuple[str, str | None]:
    """An attempt's span's `duetime.outcome` (RECORDED's label; `rejected_stale` when the
    store refused it, `unrecorded` when it never was) and its error when the attempt failed
    (retried or dead; not when it was cancelled or parked)."""
    if outcome is None or recorded is None:
        return "unrecorded", None if outcome is None else outcome.error_message
    if not recorded:
        return "rejected_stale", None
    error = None
    if outcome.event in FAILED:
        error = outcome.error_message or str(outcome.error_category or "failed")
    return RECORDED[outcome.event][2], error


FAILED = frozenset({Event.RETRY, Event.GIVE_UP})  # the outcomes of an attempt that failed


def claim_fields(claim: Claim) -> dict[str, Any]:
    """The fields every log line about an attempt carries."""
    return {
        "job_id": claim.job.id,
        "task": claim.job.task,
        "generation": claim.attempt.generation,
    }
