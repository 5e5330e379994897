"""What two groups of App's methods share: a job or a schedule of the app's tenant, and a new
job's request built and checked against the app's task registry."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from duetime.client.part import AppLike
from duetime.core.errors import JobNotFound, ScheduleNotFound
from duetime.core.models import Job, NewJob
from duetime.core.requests import TaskDefaults, build_new_job
from duetime.core.schedules import Schedule
from duetime.tasks import known_task


def new_job_of(
    app: AppLike,
    task_name: str,
    args: Mapping[str, Any] | None,
    options: Mapping[str, Any],
    *,
    check_args: bool = True,
    keyed: bool = True,
    linked: bool = False,
) -> NewJob:
    """The request to enqueue `task_name` with `args` and enqueue's `options` in the app's
    tenant, with its task's defaults, checked (its args against its handler's signature when
    the app registers it, unless not check_args). `keyed`, `linked`: see build_new_job."""
    task = known_task(app.tasks, task_name)
    new = build_new_job(
        task_name,
        args,
        now=app.clock.now(),
        tenant=app.tenant,
        defaults=task.defaults if task else TaskDefaults(),
        max_payload_bytes=app.max_payload_bytes,
        keyed=keyed,
        linked=linked,
        **options,
    )
    if task is not None and check_args:
        task.check_args(new.args)
    return new


def job_of(app: AppLike, job_id: int) -> Job:
    """The job with its attempt history; raises JobNotFound."""
    job = app.store.get_job(job_id, tenant=app.tenant)
    if job is None:
        raise JobNotFound(job_id)
    return job


def schedule_of(app: AppLike, name: str) -> Schedule:
    """The schedule of this name in the tenant; raises ScheduleNotFound."""
    schedule = app.store.get_schedule(app.tenant, name)
    if schedule is None:
        raise ScheduleNotFound(name)
    return schedule
