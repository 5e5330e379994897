-- A success stays on its job's row (docs/stores.md, "Attempts"; docs/performance.md, "Bytes
-- per job"). Since migration 22 a job's row carries the attempt it runs; the finish of an
-- attempt that succeeds now leaves those columns as they are (its id, worker, lease and
-- start), and its end is the job's updated_at. A succeeded job never moves again (no event
-- leaves succeeded), so nothing overwrites them, and that attempt has no row of its own: per
-- successful job, one heap tuple and its index entries fewer. Attempts that end otherwise
-- (failed, lost, cancelled, ambiguous) are written once at their end, as before. The rows
-- written before this migration, and by a worker of an earlier version (which clears the
-- columns and inserts the row), read as they did.

-- The newest successes by their start, for attempt_samples (the attempts' own started index
-- covers the rows of duetime_attempts).
CREATE INDEX duetime_jobs_succeeded_started ON duetime_jobs (started_at)
    WHERE status = 'succeeded' AND attempt_id IS NOT NULL;

-- Every attempt: the ended ones' rows, the running ones from their jobs, and the successes
-- kept on their jobs' rows.
DROP VIEW duetime_all_attempts;
CREATE VIEW duetime_all_attempts AS
SELECT a.id, a.job_id, a.generation, a.worker_id, a.status, a.lease_expires_at, a.started_at,
       a.finished_at, a.error_category, a.error_message, a.error_traceback, a.late_outcome,
       a.late_reported_at, a.due_at, a.claim_token
FROM duetime_attempts AS a
UNION ALL
SELECT j.attempt_id, j.id, j.generation, j.worker_id, 'running', j.lease_expires_at,
       j.started_at, NULL, NULL, NULL, NULL, j.late_outcome,
       j.late_reported_at, j.due_at, j.claim_token
FROM duetime_jobs AS j
WHERE j.status IN ('running', 'cancel_requested') AND j.attempt_id IS NOT NULL
UNION ALL
SELECT j.attempt_id, j.id, j.generation, j.worker_id, 'succeeded', j.lease_expires_at,
       j.started_at, j.updated_at, NULL, NULL, NULL, j.late_outcome,
       j.late_reported_at, j.due_at, j.claim_token
FROM duetime_jobs AS j
WHERE j.status = 'succeeded' AND j.attempt_id IS NOT NULL;
