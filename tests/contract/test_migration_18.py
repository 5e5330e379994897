"""Migration 18 (results and progress), on every dialect: a database of schema 17 with jobs
migrates; they read back with no result and no progress, and one is then claimed, reports
progress and succeeds with a result. (This version reads the new columns with every job, so
the jobs are written at schema 17 by an enqueue, which reads nothing back.)"""

from __future__ import annotations

from pathlib import Path

import schemas
from duetime.core.clock import ManualClock
from duetime.core.models import Outcome
from duetime.core.states import Event, JobStatus
from jobhelpers import claim_one, enqueue
from kit import DialectKit


def test_a_store_of_schema_17_migrates_and_keeps_results(
    kit: DialectKit, tmp_path: Path, clock: ManualClock
) -> None:
    with schemas.store_before(kit, tmp_path, 18) as (store, _url):
        jobs = [enqueue(store, clock) for _ in range(2)]
        assert store.migrate() == [18, 27]  # 27 builds on 18 (tests/schemas.py)
        for job in jobs:
            read = store.get_job(job.id)
            assert read is not None and read.status is JobStatus.SCHEDULED
            assert (read.result, read.progress, read.progress_at) == (None, None, None)
        running, lease = claim_one(store, clock)
        assert store.record_progress([(lease, 0.5, "half")], clock.now()) == [True]
        assert store.finish(lease, Outcome(Event.SUCCEED, result='{"n":1}'), clock.now())
        done = store.get_job(running.id)
        assert done is not None
        assert (done.result, done.progress, done.progress_message) == ({"n": 1}, 0.5, "half")
