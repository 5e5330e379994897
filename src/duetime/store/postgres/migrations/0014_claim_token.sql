-- The claim token (docs/at-least-once.md, "The claim token"): every claim gives its job a fresh
-- random positive 63-bit number, kept on the job's row and on the attempt it starts (and on the
-- attempt's outbox event). Every fenced write matches the job by (id, claim_token) and the
-- attempt by (job_id, claim_token), never by the attempt's id alone: after a promotion that lost
-- the old primary's last commits, generations and attempt ids are handed out again, a random
-- token practically never is. The jobs running now, their current attempts and those attempts'
-- events get one here, so that the attempts running across the upgrade finish as before.
ALTER TABLE duetime_jobs ADD COLUMN claim_token bigint;
ALTER TABLE duetime_attempts ADD COLUMN claim_token bigint;
ALTER TABLE duetime_outbox ADD COLUMN claim_token bigint;
UPDATE duetime_jobs
SET claim_token = GREATEST(('x' || substr(translate(gen_random_uuid()::text, '-', ''), 1, 16))
    ::bit(64)::bigint & 9223372036854775807, 1)
WHERE status IN ('running', 'cancel_requested');
UPDATE duetime_attempts AS a SET claim_token = j.claim_token
FROM duetime_jobs AS j
WHERE j.id = a.job_id AND j.generation = a.generation AND j.claim_token IS NOT NULL;
UPDATE duetime_outbox AS o SET claim_token = a.claim_token
FROM duetime_attempts AS a
WHERE a.id = o.attempt_id AND a.claim_token IS NOT NULL;
