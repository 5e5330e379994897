-- Attempts written once (docs/stores.md, "Attempts"; docs/performance.md, "Bytes per job").
-- A job's row carries its current attempt while it runs: the attempt's id (allocated at the
-- claim from the attempts' id sequence), the worker holding it, its lease and its start (and
-- a late report made while it still runs); all NULL when no attempt runs. The claim writes
-- only the job's row, a renewal only its lease_expires_at (no index covers these columns: a
-- renewal can be a HOT update), and the attempt's row is inserted once, at its end, with its
-- outcome, by the statement that moves the job and clears these columns.
ALTER TABLE duetime_jobs ADD COLUMN attempt_id bigint;
ALTER TABLE duetime_jobs ADD COLUMN worker_id text;
ALTER TABLE duetime_jobs ADD COLUMN lease_expires_at timestamptz;
ALTER TABLE duetime_jobs ADD COLUMN started_at timestamptz;
ALTER TABLE duetime_jobs ADD COLUMN late_outcome text;
ALTER TABLE duetime_jobs ADD COLUMN late_reported_at timestamptz;

-- The attempts running now move onto their jobs (found as every fenced write finds them: by
-- the job's generation and claim token), and their rows go.
UPDATE duetime_jobs AS j
SET attempt_id = a.id, worker_id = a.worker_id, lease_expires_at = a.lease_expires_at,
    started_at = a.started_at, late_outcome = a.late_outcome,
    late_reported_at = a.late_reported_at
FROM duetime_attempts AS a
WHERE a.job_id = j.id AND a.generation = j.generation AND a.claim_token = j.claim_token
  AND a.status = 'running' AND j.status IN ('running', 'cancel_requested');
DELETE FROM duetime_attempts AS a
USING duetime_jobs AS j
WHERE a.status = 'running' AND j.id = a.job_id AND j.attempt_id = a.id;
-- A running attempt whose job no longer holds it (none of this version's statements or the
-- last one's leaves one; migration 17 says the same) is recorded lost, as migration 17 did.
UPDATE duetime_attempts AS a
SET status = 'lost', finished_at = LEAST(a.lease_expires_at, now()),
    error_category = 'lease_expired',
    error_message = 'lease expired: its job no longer held this attempt (recorded by migration 22)'
WHERE a.status = 'running';

-- Workers of an earlier version insert a 'running' attempt at their claim: that insert fails
-- (and with it the whole claim) rather than start an attempt this version cannot see. Every
-- row meets it (the update above): not scanned again, under the table's exclusive lock.
ALTER TABLE duetime_attempts ADD CONSTRAINT
    duetime_attempts_ended_only_upgrade_every_worker CHECK (status <> 'running') NOT VALID;

-- Attempt rows are never updated now but for a late report: no room kept for new versions.
ALTER TABLE duetime_attempts SET (fillfactor = 100);

-- Every attempt as before: the ended ones' rows, and the running ones from their jobs.
CREATE VIEW duetime_all_attempts AS
SELECT a.id, a.job_id, a.generation, a.worker_id, a.status, a.lease_expires_at, a.started_at,
       a.finished_at, a.error_category, a.error_message, a.error_traceback, a.late_outcome,
       a.late_reported_at, a.due_at, a.claim_token
FROM duetime_attempts AS a
UNION ALL
SELECT j.attempt_id, j.id, j.generation, j.worker_id, 'running'::text, j.lease_expires_at,
       j.started_at, NULL::timestamptz, NULL::text, NULL::text, NULL::text, j.late_outcome,
       j.late_reported_at, j.due_at, j.claim_token
FROM duetime_jobs AS j
WHERE j.status IN ('running', 'cancel_requested') AND j.attempt_id IS NOT NULL;
