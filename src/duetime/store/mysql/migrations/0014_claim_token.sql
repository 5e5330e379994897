-- The claim token (docs/at-least-once.md, "The claim token"): every claim gives its job a fresh
-- random positive number, kept on the job's row and on the attempt it starts (and on the
-- attempt's outbox event). Every fenced write matches the job by (id, claim_token) and the
-- attempt by (job_id, claim_token), never by the attempt's id alone. The jobs running now,
-- their current attempts and those attempts' events get one here, so that the attempts running
-- across the upgrade finish as before.
ALTER TABLE duetime_jobs ADD COLUMN claim_token BIGINT NULL;
ALTER TABLE duetime_attempts ADD COLUMN claim_token BIGINT NULL;
ALTER TABLE duetime_outbox ADD COLUMN claim_token BIGINT NULL;
UPDATE duetime_jobs
SET claim_token = CAST(CONV(LEFT(MD5(CONCAT(UUID(), RAND())), 15), 16, 10) AS UNSIGNED) + 1
WHERE status IN ('running', 'cancel_requested');
UPDATE duetime_attempts AS a JOIN duetime_jobs AS j
    ON j.id = a.job_id AND j.generation = a.generation
SET a.claim_token = j.claim_token
WHERE j.claim_token IS NOT NULL;
UPDATE duetime_outbox AS o JOIN duetime_attempts AS a ON a.id = o.attempt_id
SET o.claim_token = a.claim_token
WHERE a.claim_token IS NOT NULL;
