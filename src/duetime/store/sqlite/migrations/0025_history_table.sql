-- The history table (docs/history-plan.md, step 1 of 9; docs/stores.md, "Tables"): the jobs
-- that have ended (succeeded, dead, cancelled, expired) are to leave the hot table for this
-- one, so that duetime_jobs holds only the work that waits, is due or runs, stays small, and
-- its updates, vacuum and counts stay cheap. This migration only makes the table and its
-- indexes (migration 26 adds its part to the view of every attempt); no job moves yet, so it
-- stays empty. A row here keeps every column of the job as it ended: a success kept on its
-- job's row (migration 24) is kept here too.

-- Rows come here whole from duetime_jobs with the ids they had (no AUTOINCREMENT: ids are
-- reserved from the hot table's counter only, so none is ever issued twice). Its values
-- passed duetime_jobs' checks; the one check here says which statuses the table holds.
CREATE TABLE duetime_jobs_done (
    id INTEGER PRIMARY KEY,
    tenant TEXT NOT NULL,
    queue TEXT NOT NULL,
    task TEXT NOT NULL,
    args TEXT NOT NULL,
    priority INTEGER NOT NULL,
    due_at INTEGER NOT NULL,
    deadline_at INTEGER,
    status TEXT NOT NULL CHECK (status IN ('succeeded', 'dead', 'cancelled', 'expired')),
    version INTEGER NOT NULL,
    attempts INTEGER NOT NULL,
    max_attempts INTEGER NOT NULL,
    generation INTEGER NOT NULL,
    retry_base REAL NOT NULL,
    retry_cap REAL NOT NULL,
    lease_seconds REAL NOT NULL,
    timeout_seconds REAL,
    idempotency_key TEXT,
    request_hash TEXT NOT NULL,
    business_key TEXT NOT NULL,
    cancel_requested_at INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    schedule_id INTEGER REFERENCES duetime_schedules (id) ON DELETE SET NULL,
    schedule_name TEXT,
    nominal_at INTEGER,
    covers TEXT,
    origin TEXT,
    limits TEXT,
    claim_token INTEGER,
    result TEXT,
    progress REAL,
    progress_message TEXT,
    progress_at INTEGER,
    sequence_key TEXT,
    sequence_hold INTEGER,
    unique_key TEXT,
    unique_until INTEGER,
    has_children INTEGER,
    on_parent_failure TEXT,
    parents_left INTEGER,
    release_delay REAL,
    cancel_reason TEXT,
    trace_context TEXT,
    attempt_id INTEGER,
    worker_id TEXT,
    lease_expires_at INTEGER,
    started_at INTEGER,
    late_outcome TEXT,
    late_reported_at INTEGER
);

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
