-- The history table (docs/history-plan.md, step 1 of 9; docs/stores.md, "Tables"): the jobs
-- that have ended (succeeded, dead, cancelled, expired) are to leave the hot table for this
-- one, so that duetime_jobs holds only the work that waits, is due or runs, stays small, and
-- its updates, vacuum and counts stay cheap. This migration only makes the table, its
-- indexes and the view's part over it; no job moves yet, so it stays empty and every read
-- and write goes on as before. A row here keeps every column of the job as it ended: a
-- success kept on its job's row (migration 24) is kept here too.

-- Rows come here whole from duetime_jobs with the ids they had (no default: ids are
-- reserved from the hot table's sequence only, so none is ever issued twice). A row is
-- written once and rarely changed after it (a replay takes it back, a dismissal rewrites its
-- status), so its pages are filled. Its values passed duetime_jobs' checks; the one check
-- here says which statuses the table holds.
CREATE TABLE duetime_jobs_done (
    id bigint PRIMARY KEY,
    tenant text NOT NULL,
    queue text NOT NULL,
    task text NOT NULL,
    args jsonb NOT NULL,
    priority integer NOT NULL,
    due_at timestamptz NOT NULL,
    deadline_at timestamptz,
    status text NOT NULL CHECK (status IN ('succeeded', 'dead', 'cancelled', 'expired')),
    version bigint NOT NULL,
    attempts integer NOT NULL,
    max_attempts integer NOT NULL,
    generation bigint NOT NULL,
    retry_base double precision NOT NULL,
    retry_cap double precision NOT NULL,
    lease_seconds double precision NOT NULL,
    timeout_seconds double precision,
    idempotency_key text,
    request_hash text NOT NULL,
    business_key text NOT NULL,
    cancel_requested_at timestamptz,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    schedule_id bigint REFERENCES duetime_schedules (id) ON DELETE SET NULL,
    schedule_name text,
    nominal_at timestamptz,
    covers jsonb,
    origin text,
    limits text,
    claim_token bigint,
    result text,
    progress double precision,
    progress_message text,
    progress_at timestamptz,
    sequence_key text,
    sequence_hold smallint,
    unique_key text,
    unique_until timestamptz,
    has_children smallint,
    on_parent_failure text,
    parents_left integer,
    release_delay double precision,
    cancel_reason text,
    trace_context text,
    attempt_id bigint,
    worker_id text,
    lease_expires_at timestamptz,
    started_at timestamptz,
    late_outcome text,
    late_reported_at timestamptz
) WITH (fillfactor = 100);

-- The pruner's order (as duetime_jobs_finished; dead jobs wait for an operator).
CREATE INDEX duetime_jobs_done_finished ON duetime_jobs_done (updated_at)
    WHERE status IN ('succeeded', 'cancelled', 'expired');
-- The listing, newest first per tenant and status.
CREATE INDEX duetime_jobs_done_listing ON duetime_jobs_done (tenant, status, id);
-- The newest successes by their start, for attempt_samples.
CREATE INDEX duetime_jobs_done_succeeded_started ON duetime_jobs_done (started_at)
    WHERE status = 'succeeded' AND attempt_id IS NOT NULL;
-- A dead job that holds its sequence keeps the next one waiting until it is replayed or
-- dismissed.
CREATE INDEX duetime_jobs_done_held ON duetime_jobs_done (tenant, sequence_key, id)
    WHERE status = 'dead' AND sequence_hold = 1;
-- A schedule's ticks and its latest run (not unique here: the keys across both tables are
-- kept by the enqueue, docs/history-plan.md section 3).
CREATE INDEX duetime_jobs_done_occurrence ON duetime_jobs_done (schedule_id, nominal_at)
    WHERE schedule_id IS NOT NULL;

-- Every attempt: the ended ones' rows, the running ones from their jobs, and the successes
-- kept on their jobs' rows, in either table.
CREATE OR REPLACE VIEW duetime_all_attempts AS
SELECT a.id, a.job_id, a.generation, a.worker_id, a.status, a.lease_expires_at, a.started_at,
       a.finished_at, a.error_category, a.error_message, a.error_traceback, a.late_outcome,
       a.late_reported_at, a.due_at, a.claim_token
FROM duetime_attempts AS a
UNION ALL
SELECT j.attempt_id, j.id, j.generation, j.worker_id, 'running'::text, j.lease_expires_at,
       j.started_at, NULL::timestamptz, NULL::text, NULL::text, NULL::text, j.late_outcome,
       j.late_reported_at, j.due_at, j.claim_token
FROM duetime_jobs AS j
WHERE j.status IN ('running', 'cancel_requested') AND j.attempt_id IS NOT NULL
UNION ALL
SELECT j.attempt_id, j.id, j.generation, j.worker_id, 'succeeded'::text, j.lease_expires_at,
       j.started_at, j.updated_at, NULL::text, NULL::text, NULL::text, j.late_outcome,
       j.late_reported_at, j.due_at, j.claim_token
FROM duetime_jobs AS j
WHERE j.status = 'succeeded' AND j.attempt_id IS NOT NULL
UNION ALL
SELECT d.attempt_id, d.id, d.generation, d.worker_id, 'succeeded'::text, d.lease_expires_at,
       d.started_at, d.updated_at, NULL::text, NULL::text, NULL::text, d.late_outcome,
       d.late_reported_at, d.due_at, d.claim_token
FROM duetime_jobs_done AS d
WHERE d.status = 'succeeded' AND d.attempt_id IS NOT NULL;
