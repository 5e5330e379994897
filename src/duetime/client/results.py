"""App's results: result() waits for a job to end and returns what its handler returned;
aresult() is its async twin, waiting on the event loop (docs/workflows.md, "Results")."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

from duetime.client.lookup import job_of
from duetime.client.part import AppPart
from duetime.core.errors import InvalidRequest, JobFailed, ResultTimeout
from duetime.core.models import Job
from duetime.core.states import JobStatus

# the first look again after this many seconds, each next one 1.5 times later, up to the cap
FIRST_POLL = 0.01
POLL_CAP = 0.5

# a job in one of these statuses ended without a result, for good (a replay starts it again)
FAILED_FOR_GOOD = frozenset({JobStatus.DEAD, JobStatus.CANCELLED, JobStatus.EXPIRED})


class Results(AppPart):
    """Wait for jobs' results."""

    def result(self, job_id: int, timeout: float | None = None) -> Any:
        """What job `job_id`'s handler returned (JSON data; None when it returned nothing),
        once the job succeeded. Waits up to `timeout` seconds for it to end (None: as long as
        it takes; 0: look once), looking again with a short backoff (10 ms growing to 0.5 s).

        Raises JobFailed (with `.job` and `.status`) if the job ended dead, cancelled or
        expired; ResultTimeout (with `.status`) if it had not ended when the wait ran out (a
        parked job waits for an operator: it has not ended); JobNotFound if there is no such
        job in the app's tenant (a job pruned after its retention is gone with its result).
        """
        waits = _waits(timeout)
        while True:
            job = job_of(self, job_id)
            if _ended(job):
                return job.result
            pause = next(waits, None)
            if pause is None:
                raise ResultTimeout(job_id, str(job.status), float(timeout or 0))
            time.sleep(pause)

    async def aresult(self, job_id: int, timeout: float | None = None) -> Any:
        """result() for async code: each look at the job runs in a thread and the waits
        between them are asyncio sleeps, so the event loop is never blocked."""
        waits = _waits(timeout)
        while True:
            job = await asyncio.to_thread(job_of, self, job_id)
            if _ended(job):
                return job.result
            pause = next(waits, None)
            if pause is None:
                raise ResultTimeout(job_id, str(job.status), float(timeout or 0))
            await asyncio.sleep(pause)


def _ended(job: Job) -> bool:
    """True once the job succeeded; JobFailed if it ended without a result."""
    if job.status is JobStatus.SUCCEEDED:
        return True
    if job.status in FAILED_FOR_GOOD:
        raise JobFailed(job)
    return False


def _waits(timeout: float | None) -> Iterator[float]:
    """The pauses between two looks at a job, until `timeout` seconds passed (real time: a
    wait is real waiting, whatever clock the app runs on); None: without end."""
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout >= 0
    ):
        raise InvalidRequest(f"timeout must be a number of seconds, 0 or more, not {timeout!r}")
    deadline = None if timeout is None else time.monotonic() + timeout
    pause = FIRST_POLL
    while True:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            yield min(pause, left)
        else:
            yield pause
        pause = min(pause * 1.5, POLL_CAP)
