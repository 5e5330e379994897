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
--
-- SQLite cannot drop a constraint, and rebuilding these tables would also rebuild their
-- indexes, triggers and the view of every attempt; removing a FOREIGN KEY constraint leaves
-- the file's format and every stored row as they are, so each table's definition is edited
-- in place, as migration 20 widened a CHECK (https://sqlite.org/lang_altertable.html,
-- section 7). The DROP INDEX below then makes every connection read the schema again: the
-- index on the running attempts' lease holds nothing since migration 22 (attempts are written
-- at their end) and no statement of this version or the previous one names it.
PRAGMA writable_schema = ON;
UPDATE sqlite_master
SET sql = replace(replace(sql, ' REFERENCES duetime_jobs (id) ON DELETE CASCADE', ''),
                  ' REFERENCES duetime_jobs (id) ON DELETE SET NULL', '')
WHERE type = 'table'
  AND name IN ('duetime_attempts', 'duetime_outbox', 'duetime_job_parents', 'duetime_ticks');
PRAGMA writable_schema = RESET;
-- The keys are gone, or the migration fails and changes nothing: a table whose definition
-- reads otherwise than duetime wrote it would keep its key, whose cascade would delete what a
-- job's move keeps.
CREATE TEMP TABLE duetime_migration_26 (
    keys_left INTEGER CONSTRAINT duetime_foreign_keys_to_jobs_removed CHECK (keys_left = 0)
);
INSERT INTO temp.duetime_migration_26 (keys_left)
SELECT COUNT(*) FROM (
    SELECT 1 FROM pragma_foreign_key_list('duetime_attempts') WHERE "table" = 'duetime_jobs'
    UNION ALL
    SELECT 1 FROM pragma_foreign_key_list('duetime_outbox') WHERE "table" = 'duetime_jobs'
    UNION ALL
    SELECT 1 FROM pragma_foreign_key_list('duetime_job_parents') WHERE "table" = 'duetime_jobs'
    UNION ALL
    SELECT 1 FROM pragma_foreign_key_list('duetime_ticks') WHERE "table" = 'duetime_jobs');
DROP TABLE temp.duetime_migration_26;
DROP INDEX duetime_attempts_lease;

-- Every attempt: the ended ones' rows, the running ones from their jobs, and the successes
-- kept on their jobs' rows, in either table (the history table's part is new).
DROP VIEW duetime_all_attempts;
CREATE VIEW duetime_all_attempts AS
SELECT a.id, a.job_id, a.generation, a.worker_id, a.status, a.lease_expires_at, a.started_at,
       a.finished_at, a.error_category, a.error_message, a.error_traceback, a.late_outcome,
       a.late_reported_at, a.due_at, a.claim_token
FROM duetime_attempts AS a
UNION ALL
SELECT j.attempt_id, j.id, j.generation, j.worker_id, 'running', j.lease_expires_at,
       j.started_at, NULL, NULL, NULL, NULL, j.late_outcome,
       j.late_reported_at, j.due_at, j.claim_token
FROM duetime_jobs AS j
WHERE j.status IN ('running', 'cancel_requested') AND j.attempt_id IS NOT NULL
UNION ALL
SELECT j.attempt_id, j.id, j.generation, j.worker_id, 'succeeded', j.lease_expires_at,
       j.started_at, j.updated_at, NULL, NULL, NULL, j.late_outcome,
       j.late_reported_at, j.due_at, j.claim_token
FROM duetime_jobs AS j
WHERE j.status = 'succeeded' AND j.attempt_id IS NOT NULL
UNION ALL
SELECT d.attempt_id, d.id, d.generation, d.worker_id, 'succeeded', d.lease_expires_at,
       d.started_at, d.updated_at, NULL, NULL, NULL, d.late_outcome,
       d.late_reported_at, d.due_at, d.claim_token
FROM duetime_jobs_done AS d
WHERE d.status = 'succeeded' AND d.attempt_id IS NOT NULL;
