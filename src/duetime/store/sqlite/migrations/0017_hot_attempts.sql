-- Running attempts are reached through their jobs (the running and cancel-requested ones, from
-- duetime_jobs_status, each joined to its attempt by (job_id, generation, claim_token)), so the
-- index on the running attempts' lease, which every finish and renewal rewrote, goes (docs/
-- performance.md, "Bytes per job"; on PostgreSQL this lets those updates be HOT updates).
DROP INDEX duetime_attempts_lease;
-- An attempt still marked running whose job no longer holds it (no statement of this version
-- or the previous one leaves one; a database edited by hand could hold one) is recorded lost
-- at its lease's end: its worker could neither renew nor finish it, and the reads above would
-- no longer find it.
UPDATE duetime_attempts
SET status = 'lost', finished_at = lease_expires_at, error_category = 'lease_expired',
    error_message = 'lease expired: its job no longer held this attempt (recorded by migration 17)'
WHERE status = 'running'
  AND NOT EXISTS (
    SELECT 1 FROM duetime_jobs AS j
    WHERE j.id = duetime_attempts.job_id AND j.generation = duetime_attempts.generation
      AND j.claim_token = duetime_attempts.claim_token
      AND j.status IN ('running', 'cancel_requested'));
