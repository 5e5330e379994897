-- What a job's move to the history table (migration 25) needs: docs/history-plan.md, steps 1
-- and 2; docs/stores.md, "Tables". No foreign key to duetime_jobs: a job that ends is to move
-- by a delete and an insert, and with these keys that delete would have taken the job's
-- attempts, its dependency links and its outbox events with it, and detached its ticks. So
-- the keys go, and the two statements that delete jobs for good (prune, and delete_unstarted
-- for a schedule's unstarted ticks) delete those rows and detach those ticks themselves, in
-- the same transaction. Each index these keys used stays.
-- And the view of every attempt reads the successes kept on the history table's rows too.
--
-- A pruner of an earlier version still running after this migration deletes jobs alone and
-- leaves their attempts, links and outbox events behind: no read finds them (every read goes
-- from a job), and they are only bytes. Stop or upgrade the pruners with the migration.
ALTER TABLE duetime_attempts DROP CONSTRAINT duetime_attempts_job_id_fkey;
ALTER TABLE duetime_outbox DROP CONSTRAINT duetime_outbox_job_id_fkey;
ALTER TABLE duetime_job_parents DROP CONSTRAINT duetime_job_parents_child_id_fkey;
ALTER TABLE duetime_job_parents DROP CONSTRAINT duetime_job_parents_parent_id_fkey;
ALTER TABLE duetime_ticks DROP CONSTRAINT duetime_ticks_job_id_fkey;

-- Every attempt: the ended ones' rows, the running ones from their jobs, and the successes
-- kept on their jobs' rows, in either table (the history table's part is new).
CREATE OR REPLACE VIEW duetime_all_attempts AS
SELECT a.id, a.job_id, a.generation, a.worker_id, a.status, a.lease_expires_at, a.started_at,
       a.finished_at, a.error_category, a.error_message, a.error_traceback, a.late_outcome,
       a.late_reported_at, a.due_at, a.claim_token
FROM duetime_attempts AS a
UNION ALL
SELECT j.attempt_id, j.id, j.generation, j.worker_id, 'running'::text, j.lease_expires_at,
       j.started_at, NULL::timestamptz, NULL::text, NULL::text, NULL::text, j.late_outcome,
       j.late_reported_at, j.due_at, j.claim_token
FROM duetime_jobs AS j
WHERE j.status IN ('running', 'cancel_requested') AND j.attempt_id IS NOT NULL
UNION ALL
SELECT j.attempt_id, j.id, j.generation, j.worker_id, 'succeeded'::text, j.lease_expires_at,
       j.started_at, j.updated_at, NULL::text, NULL::text, NULL::text, j.late_outcome,
       j.late_reported_at, j.due_at, j.claim_token
FROM duetime_jobs AS j
WHERE j.status = 'succeeded' AND j.attempt_id IS NOT NULL
UNION ALL
SELECT d.attempt_id, d.id, d.generation, d.worker_id, 'succeeded'::text, d.lease_expires_at,
       d.started_at, d.updated_at, NULL::text, NULL::text, NULL::text, d.late_outcome,
       d.late_reported_at, d.due_at, d.claim_token
FROM duetime_jobs_done AS d
WHERE d.status = 'succeeded' AND d.attempt_id IS NOT NULL;
