-- Running attempts are reached through their jobs (the running and cancel-requested ones, from
-- duetime_jobs_status, each joined to its attempt by (job_id, generation, claim_token)), as on
-- PostgreSQL and MariaDB/MySQL. The index on the running attempts' lease stays here: SQLite
-- updates rows in place (there are no HOT updates to win), the index holds only the running
-- attempts, and a process of the previous version names it (INDEXED BY) in its claims.
-- An attempt still marked running whose job no longer holds it (no statement of this version
-- or the previous one leaves one; a database edited by hand could hold one) is recorded lost
-- at its lease's end (or now, if that is still to come): its worker could neither renew nor finish it, and the reads above would
-- no longer find it.
UPDATE duetime_attempts
SET status = 'lost', finished_at = min(lease_expires_at, CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)), error_category = 'lease_expired',
    error_message = 'lease expired: its job no longer held this attempt (recorded by migration 17)'
WHERE status = 'running'
  AND NOT EXISTS (
    SELECT 1 FROM duetime_jobs AS j
    WHERE j.id = duetime_attempts.job_id AND j.generation = duetime_attempts.generation
      AND j.claim_token = duetime_attempts.claim_token
      AND j.status IN ('running', 'cancel_requested'));
