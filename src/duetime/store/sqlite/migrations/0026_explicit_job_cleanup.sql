-- No foreign key to duetime_jobs (docs/history-plan.md, step 2 of 9; docs/stores.md,
-- "Tables"). A job that ends is to move from duetime_jobs to the history table
-- (migration 25) by a delete and an insert; with these keys that delete would have taken the
-- job's attempts, its dependency links and its outbox events with it, and detached its
-- ticks. So the keys go, and the two statements that delete jobs for good (prune, and
-- delete_unstarted for a schedule's unstarted ticks) delete those rows and detach those
-- ticks themselves, in the same transaction. Each index these keys used stays.
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
DROP INDEX duetime_attempts_lease;
