-- Attempts written once (docs/stores.md, "Attempts"), as on PostgreSQL: a job's row carries
-- the attempt it runs (its id, the worker holding it, its lease, its start, and a late report
-- made while it still runs; all NULL when no attempt runs). The claim and the renewals write
-- only the job's row; the attempt's row is inserted once, at its end, with its outcome.
ALTER TABLE duetime_jobs ADD COLUMN attempt_id INTEGER;
ALTER TABLE duetime_jobs ADD COLUMN worker_id TEXT;
ALTER TABLE duetime_jobs ADD COLUMN lease_expires_at INTEGER;
ALTER TABLE duetime_jobs ADD COLUMN started_at INTEGER;
ALTER TABLE duetime_jobs ADD COLUMN late_outcome TEXT;
ALTER TABLE duetime_jobs ADD COLUMN late_reported_at INTEGER;

-- Attempt ids are handed out at the claim from this counter (one writer at a time holds the
-- database: the claim reads and advances it in its own write transaction). It starts past
-- every id the attempts' AUTOINCREMENT gave out.
CREATE TABLE duetime_attempt_ids (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    next_id INTEGER NOT NULL
);
INSERT INTO duetime_attempt_ids (id, next_id)
SELECT 1, max(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'duetime_attempts'), 0),
              COALESCE((SELECT max(id) FROM duetime_attempts), 0)) + 1;

-- The attempts running now move onto their jobs (found by the job's generation and claim
-- token), and their rows go.
UPDATE duetime_jobs
SET attempt_id = a.id, worker_id = a.worker_id, lease_expires_at = a.lease_expires_at,
    started_at = a.started_at, late_outcome = a.late_outcome,
    late_reported_at = a.late_reported_at
FROM duetime_attempts AS a
WHERE a.job_id = duetime_jobs.id AND a.generation = duetime_jobs.generation
  AND a.claim_token = duetime_jobs.claim_token AND a.status = 'running'
  AND duetime_jobs.status IN ('running', 'cancel_requested');
DELETE FROM duetime_attempts
WHERE status = 'running'
  AND id IN (SELECT attempt_id FROM duetime_jobs WHERE attempt_id IS NOT NULL);
-- A running attempt whose job no longer holds it is recorded lost, as migration 17 did.
UPDATE duetime_attempts
SET status = 'lost', finished_at = min(lease_expires_at, CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)), error_category = 'lease_expired',
    error_message = 'lease expired: its job no longer held this attempt (recorded by migration 22)'
WHERE status = 'running';

-- Workers of an earlier version insert a 'running' attempt at their claim: that insert fails
-- (and with it the whole claim) rather than start an attempt this version cannot see.
CREATE TRIGGER duetime_attempts_ended_only BEFORE INSERT ON duetime_attempts
WHEN NEW.status = 'running'
BEGIN
    SELECT RAISE(ABORT, 'duetime_attempts_ended_only: attempts are written at their end since migration 22; upgrade every worker to this duetime version');
END;
CREATE TRIGGER duetime_attempts_ended_only_update BEFORE UPDATE OF status ON duetime_attempts
WHEN NEW.status = 'running'
BEGIN
    SELECT RAISE(ABORT, 'duetime_attempts_ended_only: attempts are written at their end since migration 22; upgrade every worker to this duetime version');
END;

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
