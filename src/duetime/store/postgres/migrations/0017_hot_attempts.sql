-- HOT attempts (docs/performance.md, "Bytes per job"). A finish changes an attempt's status and
-- a renewal its lease_expires_at: with the partial index on (lease_expires_at) WHERE status =
-- 'running' neither could be a HOT update, so each wrote a new entry into every index of the
-- attempts and left a dead version. Running attempts are now reached through their jobs (the
-- running and cancel-requested ones, from duetime_jobs_status, each joined to its attempt by
-- (job_id, generation, claim_token)), and the index goes. No index covers a column a finish
-- or a renewal writes, and a fillfactor of 50 leaves room on each page for the new
-- versions (pages written from now on; a table is not rewritten).
-- An attempt still marked running whose job no longer holds it (no statement of this version
-- or the previous one leaves one; a database edited by hand could hold one) is recorded lost
-- at its lease's end (or now, if that is still to come): its worker could neither renew nor finish it, and the reads above would
-- no longer find it. This runs first, while the index on the running attempts still serves it
-- (after DROP INDEX, which locks the table until the commit, it would read every attempt).
UPDATE duetime_attempts AS a
SET status = 'lost', finished_at = LEAST(a.lease_expires_at, now()), error_category = 'lease_expired',
    error_message = 'lease expired: its job no longer held this attempt (recorded by migration 17)'
WHERE a.status = 'running'
  AND NOT EXISTS (
    SELECT 1 FROM duetime_jobs AS j
    WHERE j.id = a.job_id AND j.generation = a.generation AND j.claim_token = a.claim_token
      AND j.status IN ('running', 'cancel_requested'));
DROP INDEX duetime_attempts_lease;
ALTER TABLE duetime_attempts SET (fillfactor = 50);
