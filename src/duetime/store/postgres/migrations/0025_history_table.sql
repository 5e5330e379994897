-- The history table (docs/history-plan.md, step 1 of 9; docs/stores.md, "Tables"): the jobs
-- that have ended (succeeded, dead, cancelled, expired) are to leave the hot table for this
-- one, so that duetime_jobs holds only the work that waits, is due or runs, stays small, and
-- its updates, vacuum and counts stay cheap. This migration only makes the table and its
-- indexes (migration 26 adds its part to the view of every attempt); no job moves yet, so it
-- stays empty. A row here keeps every column of the job as it ended: a success kept on its
-- job's row (migration 24) is kept here too.

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
