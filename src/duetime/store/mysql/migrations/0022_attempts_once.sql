-- Attempts written once (docs/stores.md, "Attempts"), as on PostgreSQL: a job's row carries
-- the attempt it runs (its id, the worker holding it, its lease, its start, and a late report
-- made while it still runs; all NULL when no attempt runs). The claim and the renewals write
-- only the job's row; the attempt's row is inserted once, at its end, with its outcome. No
-- index covers these columns.
ALTER TABLE duetime_jobs
    ADD COLUMN attempt_id BIGINT NULL,
    ADD COLUMN worker_id VARCHAR(400) NULL,
    ADD COLUMN lease_expires_at DATETIME(6) NULL,
    ADD COLUMN started_at DATETIME(6) NULL,
    ADD COLUMN late_outcome VARCHAR(20) NULL,
    ADD COLUMN late_reported_at DATETIME(6) NULL;

-- Attempt ids (MySQL has no sequences): each process reserves a block of them from this
-- counter row in a short transaction of its own (hi/lo, store/sql/attempt_ids.py) and hands
-- them out at its claims; the row is locked only for that reservation, never for a claim's
-- transaction (which would serialize the claims). It starts past every id given out so far.
CREATE TABLE duetime_attempt_ids (
    id TINYINT NOT NULL PRIMARY KEY,
    next_id BIGINT NOT NULL,
    CONSTRAINT duetime_attempt_ids_one CHECK (id = 1)
) ENGINE = InnoDB;
INSERT INTO duetime_attempt_ids (id, next_id)
SELECT 1, COALESCE(MAX(id), 0) + 1 FROM duetime_attempts;

-- The attempts running now move onto their jobs (found by the job's generation and claim
-- token), and their rows go.
UPDATE duetime_jobs AS j
JOIN duetime_attempts AS a
    ON a.job_id = j.id AND a.generation = j.generation AND a.claim_token = j.claim_token
SET j.attempt_id = a.id, j.worker_id = a.worker_id, j.lease_expires_at = a.lease_expires_at,
    j.started_at = a.started_at, j.late_outcome = a.late_outcome,
    j.late_reported_at = a.late_reported_at
WHERE a.status = 'running' AND j.status IN ('running', 'cancel_requested');
DELETE a FROM duetime_attempts AS a
JOIN duetime_jobs AS j ON j.id = a.job_id AND j.attempt_id = a.id
WHERE a.status = 'running';
-- A running attempt whose job no longer holds it is recorded lost, as migration 17 did.
UPDATE duetime_attempts
SET finished_at = LEAST(lease_expires_at, UTC_TIMESTAMP(6)), error_category = 'lease_expired',
    error_message = 'lease expired: its job no longer held this attempt (recorded by migration 22)',
    status = 'lost'
WHERE status = 'running';

-- Workers of an earlier version insert a 'running' attempt at their claim: that insert fails
-- (and with it the whole claim) rather than start an attempt this version cannot see.
-- (MariaDB 10.2 and MySQL 8.0.16 on enforce CHECK constraints.)
ALTER TABLE duetime_attempts ADD CONSTRAINT
    duetime_attempts_ended_only_upgrade_every_worker CHECK (status <> 'running');

-- Every attempt as before: the ended ones' rows, and the running ones from their jobs.
CREATE VIEW duetime_all_attempts AS
SELECT a.id, a.job_id, a.generation, a.worker_id, a.status, a.lease_expires_at, a.started_at,
       a.finished_at, a.error_category, a.error_message, a.error_traceback, a.late_outcome,
       a.late_reported_at, a.due_at, a.claim_token
FROM duetime_attempts AS a
UNION ALL
SELECT j.attempt_id, j.id, j.generation, j.worker_id, 'running', j.lease_expires_at,
       j.started_at, NULL, NULL, NULL, NULL, j.late_outcome, j.late_reported_at, j.due_at,
       j.claim_token
FROM duetime_jobs AS j
WHERE j.status IN ('running', 'cancel_requested') AND j.attempt_id IS NOT NULL;
