-- Running attempts are reached through their jobs (the running and cancel-requested ones, from
-- an index led by status, each joined to its attempt by (job_id, generation, claim_token)), so
-- the index on the attempts' (status, lease_expires_at), which every finish and renewal
-- rewrote, goes (docs/performance.md, "Bytes per job").
-- An attempt still marked running whose job no longer holds it (no statement of this version
-- or the previous one leaves one; a database edited by hand could hold one) is recorded lost
-- at its lease's end (or now, if that is still to come): its worker could neither renew nor finish it, and the reads above would
-- no longer find it. This runs first, while the index on the running attempts still serves it.
UPDATE duetime_attempts AS a
LEFT JOIN duetime_jobs AS j
    ON j.id = a.job_id AND j.generation = a.generation AND j.claim_token = a.claim_token
    AND j.status IN ('running', 'cancel_requested')
SET a.finished_at = LEAST(a.lease_expires_at, UTC_TIMESTAMP(6)), a.error_category = 'lease_expired',
    a.error_message = 'lease expired: its job no longer held this attempt (recorded by migration 17)',
    a.status = 'lost'
WHERE a.status = 'running' AND j.id IS NULL;
ALTER TABLE duetime_attempts DROP KEY duetime_attempts_lease;
