-- The claim token (docs/at-least-once.md, "The claim token"): every claim gives its job a fresh
-- random positive 63-bit number, kept on the job's row and on the attempt it starts (and on the
-- attempt's outbox event). Every fenced write matches the job by (id, claim_token) and the
-- attempt by (job_id, claim_token), never by the attempt's id alone. The jobs running now,
-- their current attempts and those attempts' events get one here, so that the attempts running
-- across the upgrade finish as before.
ALTER TABLE duetime_jobs ADD COLUMN claim_token INTEGER;
ALTER TABLE duetime_attempts ADD COLUMN claim_token INTEGER;
ALTER TABLE duetime_outbox ADD COLUMN claim_token INTEGER;
UPDATE duetime_jobs SET claim_token = abs(random() % 9223372036854775807) + 1
WHERE status IN ('running', 'cancel_requested');
UPDATE duetime_attempts
SET claim_token = (SELECT j.claim_token FROM duetime_jobs j
                   WHERE j.id = duetime_attempts.job_id
                     AND j.generation = duetime_attempts.generation)
WHERE job_id IN (SELECT id FROM duetime_jobs WHERE claim_token IS NOT NULL);
UPDATE duetime_outbox
SET claim_token = (SELECT a.claim_token FROM duetime_attempts a
                   WHERE a.id = duetime_outbox.attempt_id)
WHERE attempt_id IN (SELECT id FROM duetime_attempts WHERE claim_token IS NOT NULL);
