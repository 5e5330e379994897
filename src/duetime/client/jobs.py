"""App's jobs: enqueue (one, many, submit), read, list, and the moves an operator makes
(cancel, reschedule, replay, resolve, replay_dead), each async twin beside its method."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from duetime import tracing
from duetime.admin.replay import ReplayReport, dead_job_ids, replay_many
from duetime.client.lookup import job_of, new_job_of, schedule_of
from duetime.client.part import AppPart
from duetime.core.clock import Clock, CorrectedClock
from duetime.core.errors import InvalidRequest
from duetime.core.models import Enqueued, Job, JobFilter, JSONObject, NewJob, unserved
from duetime.core.requests import TaskDefaults, build_new_jobs, job_keys, parse_instant
from duetime.core.states import Event, JobStatus
from duetime.logs import log_event
from duetime.tasks import known_task
from duetime.twins import async_twin

log = logging.getLogger("duetime.app")


class Jobs(AppPart):
    """Enqueue, read and steer jobs of the app's tenant."""

    def _new_job(
        self,
        task_name: str,
        args: Mapping[str, Any] | None,
        options: dict[str, Any],
        *,
        check_args: bool = True,
        keyed: bool = True,
    ) -> NewJob:
        return new_job_of(self, task_name, args, options, check_args=check_args, keyed=keyed)

    def check_args(self, task_name: str, args: Mapping[str, Any] | None = None) -> None:
        """Raise UnknownTask or ArgsMismatch when this app registers tasks and a job of
        `task_name` with `args` would not run; an app that registers no task accepts any."""
        task = known_task(self.tasks, task_name)
        if task is not None:
            task.check_args(args or {})

    def enqueue(
        self,
        task_name: str,
        args: Mapping[str, Any] | None = None,
        *,
        at: datetime | str | None = None,
        delay: float | timedelta | str | None = None,
        key: str | None = None,
        queue: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        deadline: datetime | str | None = None,
        business_key: str | None = None,
        connection: Any = None,
        depends_on: Iterable[int] | None = None,
        on_parent_failure: str | None = None,
        sequence: str | None = None,
        unique_for: float | timedelta | str | None = None,
        unique_key: str | None = None,
    ) -> Job:
        """Create one job, durably, and return it. `key` makes the call idempotent.

        `sequence` puts the job in that sequence (instead of the task's template): it runs
        after every job enqueued before it in the same sequence has ended. `unique_for` (1s
        to 366d) returns the job enqueued first instead of making one when a job of this task
        with equal args (or the same `unique_key`) was created within that window before;
        submit tells which (docs/workflows.md).

        With `connection` (PostgreSQL or MariaDB/MySQL), the job is inserted in that
        connection's open transaction (a psycopg or PyMySQL connection, or a SQLAlchemy session
        or connection on that driver): it exists if and only if your transaction commits.

        `depends_on` (ids of jobs of this tenant) makes the job wait, `blocked`, until its
        parents end; `on_parent_failure` says what a parent ending dead, cancelled or expired
        does: "cancel" (the default: this job and its descendants are cancelled) or "run"
        (it runs once every parent has ended). `delay` then counts from the release
        (docs/workflows.md, "Dependencies").
        """
        return self.submit(
            task_name,
            args,
            at=at,
            delay=delay,
            key=key,
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            deadline=deadline,
            business_key=business_key,
            connection=connection,
            depends_on=depends_on,
            on_parent_failure=on_parent_failure,
            sequence=sequence,
            unique_for=unique_for,
            unique_key=unique_key,
        ).job

    aenqueue = async_twin(enqueue)

    def submit(
        self,
        task_name: str,
        args: Mapping[str, Any] | None = None,
        *,
        connection: Any = None,
        **options: Any,
    ) -> Enqueued:
        """enqueue, also telling whether the job was created (False: an idempotency key or a
        unique window returned the original job). Options are those of enqueue."""
        unread = clock_unread(self.clock)
        new = self._new_job(task_name, args, options)  # every field checked before any I/O
        store = self.store
        if unread and not clock_unread(self.clock):  # opening the store read its clock:
            new = self._new_job(task_name, args, options)  # the due time on the database's
        if tracing.enabled():  # the application traces (docs/tracing.md)
            with tracing.enqueue_span(task_name, queue=new.queue, tenant=new.tenant) as span:
                new = replace(new, trace_context=span.trace_context)
                result = store.enqueue([new], self.clock.now(), connection=connection)[0]
                span.created([result.job.id])
        else:
            result = store.enqueue([new], self.clock.now(), connection=connection)[0]
        if log.isEnabledFor(logging.INFO):  # the due time's text only for a line written
            log_event(
                log,
                "job.enqueued" if result.created else "job.enqueue_deduplicated",
                job_id=result.job.id,
                task=task_name,
                due_at=result.job.due_at.isoformat(),
            )
        return result

    def enqueue_many(
        self,
        task_name: str,
        list_of_args: Iterable[Mapping[str, Any] | None],
        *,
        at: datetime | str | None = None,
        delay: float | timedelta | str | None = None,
        queue: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        deadline: datetime | str | None = None,
        connection: Any = None,
        at_each: Sequence[datetime | str] | None = None,
        depends_on: Iterable[int] | None = None,
        on_parent_failure: str | None = None,
        sequence: str | None = None,
        unique_for: float | timedelta | str | None = None,
    ) -> list[Job]:
        """Create many jobs of one task in one transaction: all of them or none.

        `sequence` puts them all in that sequence, in the order given; `unique_for` applies
        to each job as in enqueue (a job equal to one created within the window is that
        job, once per equal job: the list then holds it again).

        `at_each` gives each job its own due instant (one per job, in order) instead of
        `at`/`delay`. `connection` works as for enqueue: the batch joins your transaction.
        `depends_on` and `on_parent_failure` work as for enqueue, the same parents for each.
        """
        if at_each is not None and (at is not None or delay is not None):
            raise InvalidRequest("give at_each (one instant per job) or at/delay, not both")
        options = dict(
            at=at,
            delay=delay,
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            deadline=None if at_each is not None else deadline,
            depends_on=depends_on,
            on_parent_failure=on_parent_failure,
        )
        # every option checked once; each job's args below
        unread = clock_unread(self.clock)
        template = self._new_job(task_name, {}, options, check_args=False, keyed=False)
        store = self.store
        if unread and not clock_unread(self.clock):  # as in submit
            template = self._new_job(task_name, {}, options, check_args=False, keyed=False)
        task = self.tasks.get(task_name)
        keys = job_keys(
            template.task,
            task.defaults if task is not None else TaskDefaults(),
            sequence=sequence,
            unique_for=unique_for,
        )
        if template.parents and keys.active:
            raise InvalidRequest(
                "depends_on cannot be combined with a sequence or unique_for yet (the task's or "
                "this enqueue's); enqueue the jobs without one of them"
            )
        if at_each is not None:  # each job's deadline from its own due instant
            given = parse_instant(deadline, "deadline") if deadline is not None else None
            template = replace(template, deadline_at=given)

        def check(args: JSONObject, number: int, count: int) -> None:
            if task is not None:
                task.check_args(args, job=(number, count))

        def enqueue(template: NewJob) -> list[Job]:
            # each job's args are checked as the store reads them (raising from there, before
            # its transaction commits), so that it can send some while it checks the next
            batch = build_new_jobs(
                template,
                list_of_args,
                max_payload_bytes=self.max_payload_bytes,
                at_each=at_each,
                check=check if task is not None else None,
                defaults=task.defaults if task is not None else None,
                keys=keys,
                now=self.clock.now(),
            )
            return [r.job for r in store.enqueue(batch, self.clock.now(), connection=connection)]

        if tracing.enabled():  # one span for the batch; its context stored with every job
            with tracing.enqueue_span(
                task_name, queue=template.queue, tenant=template.tenant
            ) as span:
                jobs = enqueue(replace(template, trace_context=span.trace_context))
                span.created([j.id for j in jobs], batch=True)
        else:
            jobs = enqueue(template)
        log_event(log, "jobs.enqueued", task=task_name, count=len(jobs))
        return jobs

    aenqueue_many = async_twin(enqueue_many)

    def get_job(self, job_id: int) -> Job:
        """The job with its attempt history; raises JobNotFound."""
        return job_of(self, job_id)

    aget_job = async_twin(get_job)

    def unserved(self, job: Job) -> str | None:
        """For a scheduled job whose task no live worker node serves: the one-line reason it
        waits ("no worker serves task ..."); None otherwise. Workers claim only the tasks they
        have handlers for, so such a job is not tried (it keeps its attempts) until one does."""
        if job.status is not JobStatus.SCHEDULED:
            return None
        return unserved(job.task, self.store.list_nodes(), self.clock.now())

    def list_jobs(
        self,
        *,
        status: JobStatus | str | None = None,
        task: str | None = None,
        queue: str | None = None,
        schedule: str | None = None,
        before_id: int | None = None,
        limit: int = 100,
        due_after: datetime | str | None = None,
        due_before: datetime | str | None = None,
        with_attempts: bool = False,
    ) -> list[Job]:
        """Jobs of this app's tenant, newest first; page with before_id=<last id seen>.
        due_after/due_before keep jobs due in [due_after, due_before); with_attempts loads
        each job's attempt history too."""
        return self.store.list_jobs(
            JobFilter(
                tenant=self.tenant,
                status=JobStatus(status) if status else None,
                task=task,
                queue=queue,
                schedule_id=schedule_of(self, schedule).id if schedule else None,
                before_id=before_id,
                due_after=parse_instant(due_after, "due_after") if due_after else None,
                due_before=parse_instant(due_before, "due_before") if due_before else None,
                limit=limit,
                with_attempts=with_attempts,
            )
        )

    alist_jobs = async_twin(list_jobs)

    def cancel(self, job_id: int) -> Job:
        """Cancel a scheduled job (cancelled) or ask a running one to stop (cancel_requested);
        a job only dispatched to the broker (no worker accepted it) is cancelled at once."""
        return self._move(job_id, Event.CANCEL)

    acancel = async_twin(cancel)

    def reschedule(self, job_id: int, at: datetime | str) -> Job:
        """Move a scheduled job's due time, or a dispatched one's that no worker accepted yet
        (its attempt is withdrawn, docs/outbox.md); bumps its version."""
        return self._move(job_id, Event.RESCHEDULE, parse_instant(at, "due time"))

    areschedule = async_twin(reschedule)

    def replay(self, job_id: int, *, ignore_backlog: bool = False) -> Job:
        """Run a dead, cancelled or expired job again: a new attempt, the same business key.
        Admitted like an enqueue: past its queue's or tenant's max_backlog it raises
        BacklogFull, unless ignore_backlog (an operator's override; docs/flow-control.md)."""
        return self._move(job_id, Event.REPLAY, ignore_backlog=ignore_backlog)

    areplay = async_twin(replay)

    def resolve(self, job_id: int, *, done: bool) -> Job:
        """Settle a parked job: done=True records it succeeded (the effect happened);
        done=False schedules it to run again now."""
        if done:
            return self._move(job_id, Event.RESOLVE_DONE)
        return self._move(job_id, Event.RESOLVE_RETRY)

    aresolve = async_twin(resolve)

    def _move(
        self,
        job_id: int,
        event: Event,
        due_at: datetime | None = None,
        *,
        ignore_backlog: bool = False,
    ) -> Job:
        job = self.store.transition(
            job_id,
            event,
            self.clock.now(),
            tenant=self.tenant,
            due_at=due_at,
            ignore_backlog=ignore_backlog,
        )
        log_event(log, f"job.{event}", job_id=job.id, status=str(job.status), version=job.version)
        return job

    def replay_dead(
        self,
        ids: Iterable[int] | None = None,
        *,
        task: str | None = None,
        queue: str | None = None,
        per_second: float | None = None,
        progress: Callable[[int, int], None] | None = None,
        ignore_backlog: bool = False,
    ) -> ReplayReport:
        """Replay dead jobs: the given ids, or every dead job of a task/queue, paced. At a
        full backlog the replay stops (report.stopped says why), or raises BacklogFull when
        it replayed none; ignore_backlog replays past the max backlogs."""
        chosen = (
            list(ids)
            if ids is not None
            else dead_job_ids(self, self.tenant, task=task, queue=queue)
        )
        return replay_many(
            self,
            chosen,
            tenant=self.tenant,
            per_second=per_second,
            progress=progress,
            ignore_backlog=ignore_backlog,
        )

    areplay_dead = async_twin(replay_dead)


def clock_unread(clock: Clock) -> bool:
    """Whether `clock` is to be corrected by the database's but has not read it yet (the App's
    own clock before its store is opened): instants computed now would be this machine's. A
    clock whose reading waits for its next now() (CorrectedClock.defer) is not unread: that
    now() reads the database's."""
    return isinstance(clock, CorrectedClock) and clock.offset is None and not clock.deferred
