"""Errors a user of duetime can meet; each message says what was wrong and what to do."""

from __future__ import annotations

from typing import Any


class DuetimeError(Exception):
    """Base class of every error duetime raises on purpose."""


class InvalidRequest(DuetimeError, ValueError):
    """A request was rejected before anything was stored."""


class PayloadTooLarge(InvalidRequest):
    """A job's args are over the payload limit."""


class UnknownTask(InvalidRequest):
    """The app knows its tasks, and this is not one of them: nothing was stored."""

    def __init__(self, task: str, known: list[str]) -> None:
        shown = ", ".join(sorted(known)[:10]) + (", ..." if len(known) > 10 else "")
        super().__init__(
            f"task {task!r} is not registered in this app (it knows {shown}); check the name, "
            "or register the handler with @app.task"
        )
        self.task = task


class ArgsMismatch(InvalidRequest):
    """A job's args do not bind to its handler's signature: nothing was stored (at enqueue),
    or the job is dead after one attempt (at run time)."""

    def __init__(self, task: str, signature: str, reason: str) -> None:
        super().__init__(
            f"args do not fit task {task!r}: {reason}; its handler takes {signature}; "
            "pass its parameters by name as a JSON object"
        )
        self.task = task
        self.reason = reason


class BacklogFull(DuetimeError):
    """An enqueue would take a queue's or a tenant's backlog past its max_backlog: nothing
    was stored (docs/flow-control.md, "Admission control")."""

    def __init__(
        self,
        kind: str,
        name: str,
        limit: int,
        backlog: int,
        retry_after: int,
        *,
        replay_of: int | None = None,
    ) -> None:
        where = f"{kind} {name!r} has {backlog} jobs waiting, at its max backlog of {limit}"
        later = f"try again later (in {retry_after} s or more)"
        raise_it = f"raise the limit with `duetime {kind}s set {name} --max-backlog N`"
        if replay_of is None:
            text = f"{where}: nothing was enqueued; {later} or {raise_it}"
        else:  # a replay is admitted like an enqueue; an admin may override (ignore_backlog)
            text = (
                f"{where}: job {replay_of} was not replayed; {later}, {raise_it}, or (admins) "
                "replay it anyway with ignore_backlog (`--ignore-backlog`)"
            )
        super().__init__(text)
        self.kind = kind  # "queue" or "tenant"
        self.name = name
        self.limit = limit
        self.backlog = backlog
        self.retry_after = retry_after


class IdempotencyConflict(DuetimeError):
    """An idempotency key was reused with a different request."""


class JobNotFound(DuetimeError, LookupError):
    """No job with this id in the tenant (another tenant's job is not found either)."""

    def __init__(self, job_id: int) -> None:
        super().__init__(f"job {job_id} does not exist (check the id and the tenant)")
        self.job_id = job_id


class ScheduleNotFound(DuetimeError, LookupError):
    """No schedule with this name in the tenant."""

    def __init__(self, name: str) -> None:
        super().__init__(f"schedule {name!r} does not exist (check the name and the tenant)")
        self.name = name


class ScheduleExists(DuetimeError):
    """A schedule with that name exists already in the tenant."""


class IllegalTransition(DuetimeError):
    """The job's current status forbids the requested action."""

    def __init__(self, job_id: int, action: str, status: str, allowed: list[str]) -> None:
        super().__init__(
            f"cannot {action} job {job_id}: it is {status}; "
            f"{action} applies only to {', '.join(allowed)} jobs"
        )
        self.job_id = job_id
        self.action = action
        self.status = status


class StaleAttempt(DuetimeError):
    """This attempt no longer holds its job (its lease was lost and another attempt took
    over): its completion transaction was rolled back, business writes included."""

    def __init__(self, job_id: int, generation: int) -> None:
        super().__init__(
            f"attempt {generation} of job {job_id} no longer holds the job (its lease was lost); "
            "its transaction was rolled back and the newer attempt's outcome stands"
        )
        self.job_id = job_id
        self.generation = generation


class SchemaError(DuetimeError):
    """The database schema does not match what this version of duetime knows."""


class ConfigurationError(DuetimeError):
    """duetime was set up wrongly (bad URL, missing driver, unknown app)."""


class StoreUnavailable(ConfigurationError):
    """The database server could not be reached (it may come back: retrying can help)."""


class StoreConflict(StoreUnavailable):
    """The database rolled a transaction back to break a deadlock or a serialization conflict
    with another one; running the same transaction again is safe (the store does, a few times)."""


class StoreError(DuetimeError):
    """The database refused a statement for a reason duetime gives no specific meaning to."""


class JobFailed(DuetimeError):
    """App.result(): the job ended without succeeding (dead, cancelled or expired), so it has
    no result; `.job` is the job as read, `.status` its status (docs/workflows.md, Results)."""

    def __init__(self, job: Any) -> None:
        last = next(
            (a.error_message for a in reversed(job.attempt_history) if a.error_message), None
        )
        why = f" (last error: {last[:200]})" if last else ""
        super().__init__(
            f"job {job.id} ended {job.status} and has no result{why}; see `duetime jobs show "
            f"{job.id}`, and replay it to run it again"
        )
        self.job = job
        self.job_id: int = job.id
        self.status = str(job.status)


class ResultTimeout(DuetimeError, TimeoutError):
    """App.result(): the job had not finished when the wait ran out; `.status` is its status
    then (waiting again is safe: docs/workflows.md, Results)."""

    def __init__(self, job_id: int, status: str, waited: float) -> None:
        super().__init__(
            f"job {job_id} is still {status} after waiting {waited:g}s for its result; wait "
            f"longer (timeout=, or --wait) or look at it with `duetime jobs show {job_id}`"
        )
        self.job_id = job_id
        self.status = status
        self.waited = waited
