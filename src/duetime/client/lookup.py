"""The lookups two groups of App's methods share: a job or a schedule of the app's tenant."""

from __future__ import annotations

from duetime.client.part import AppLike
from duetime.core.errors import JobNotFound, ScheduleNotFound
from duetime.core.models import Job
from duetime.core.schedules import Schedule


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
