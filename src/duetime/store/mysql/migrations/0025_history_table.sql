-- The history table (docs/history-plan.md, step 1 of 9; docs/stores.md, "Tables"): the jobs
-- that have ended (succeeded, dead, cancelled, expired) are to leave the hot table for this
-- one, so that duetime_jobs holds only the work that waits, is due or runs, stays small, and
-- its updates and counts stay cheap. This migration only makes the table and its indexes; no
-- job moves yet, so it stays empty and every read and write goes on as before. The view of
-- every attempt is unchanged here: a MariaDB/MySQL store writes every attempt's row at its
-- end, a success's too (migration 24), so no attempt is read from a job that has ended.

-- Rows come here whole from duetime_jobs with the ids they had (ids are reserved from
-- duetime_job_ids only, so none is ever issued twice). Its values passed duetime_jobs'
-- checks; the one check here says which statuses the table holds.
CREATE TABLE duetime_jobs_done (
    id BIGINT NOT NULL PRIMARY KEY,
    tenant VARCHAR(100) NOT NULL,
    queue VARCHAR(100) NOT NULL,
    task VARCHAR(200) NOT NULL,
    args JSON NOT NULL,
    priority INT NOT NULL,
    due_at DATETIME(6) NOT NULL,
    deadline_at DATETIME(6) NULL,
    status VARCHAR(20) NOT NULL,
    version BIGINT NOT NULL,
    attempts INT NOT NULL,
    max_attempts INT NOT NULL,
    generation BIGINT NOT NULL,
    retry_base DOUBLE NOT NULL,
    retry_cap DOUBLE NOT NULL,
    lease_seconds DOUBLE NOT NULL,
    timeout_seconds DOUBLE NULL,
    idempotency_key VARCHAR(255) NULL,
    request_hash VARCHAR(128) NOT NULL,
    business_key TEXT NOT NULL,
    cancel_requested_at DATETIME(6) NULL,
    created_at DATETIME(6) NOT NULL,
    updated_at DATETIME(6) NOT NULL,
    schedule_id BIGINT NULL,
    schedule_name VARCHAR(200) NULL,
    nominal_at DATETIME(6) NULL,
    covers JSON NULL,
    origin VARCHAR(20) NULL,
    limits VARCHAR(1100) NULL,
    claim_token BIGINT NULL,
    result LONGTEXT NULL,
    progress DOUBLE NULL,
    progress_message VARCHAR(800) NULL,
    progress_at DATETIME(6) NULL,
    sequence_key VARCHAR(255) NULL,
    sequence_hold SMALLINT NULL,
    unique_key VARCHAR(64) NULL,
    unique_until DATETIME(6) NULL,
    has_children TINYINT NULL,
    on_parent_failure VARCHAR(16) NULL,
    parents_left INT NULL,
    release_delay DOUBLE NULL,
    cancel_reason TEXT NULL,
    trace_context TEXT NULL,
    attempt_id BIGINT NULL,
    worker_id VARCHAR(400) NULL,
    lease_expires_at DATETIME(6) NULL,
    started_at DATETIME(6) NULL,
    late_outcome VARCHAR(20) NULL,
    late_reported_at DATETIME(6) NULL,
    CONSTRAINT duetime_jobs_done_status
        CHECK (status IN ('succeeded', 'dead', 'cancelled', 'expired')),
    CONSTRAINT duetime_jobs_done_schedule FOREIGN KEY (schedule_id)
        REFERENCES duetime_schedules (id) ON DELETE SET NULL,
    -- the pruner's order (dead jobs wait for an operator)
    KEY duetime_jobs_done_finished (status, updated_at),
    -- the listing, newest first per tenant and status
    KEY duetime_jobs_done_listing (tenant, status, id),
    -- a dead job that holds its sequence keeps the next one waiting
    KEY duetime_jobs_done_sequence (sequence_key, tenant, id),
    -- a schedule's ticks and its latest run (not unique here: the keys across both tables
    -- are kept by the enqueue, docs/history-plan.md section 3)
    KEY duetime_jobs_done_occurrence (schedule_id, nominal_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
