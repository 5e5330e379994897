-- What a job's move to the history table (migration 25) needs: docs/history-plan.md, steps 1
-- and 2; docs/stores.md, "Tables". No foreign key to duetime_jobs: a job that ends is to move
-- by a delete and an insert, and with these keys that delete would have taken the job's
-- attempts, its dependency links and its outbox events with it, and detached its ticks. So
-- the keys go, and the two statements that delete jobs for good (prune, and delete_unstarted
-- for a schedule's unstarted ticks) delete those rows and detach those ticks themselves, in
-- the same transaction. Each index these keys used stays.
-- (The view of every attempt is unchanged: migration 25.)
--
-- A pruner of an earlier version still running after this migration deletes jobs alone and
-- leaves their attempts, links and outbox events behind: no read finds them (every read goes
-- from a job), and they are only bytes. Stop or upgrade the pruners with the migration.
ALTER TABLE duetime_attempts DROP FOREIGN KEY duetime_attempts_job;
ALTER TABLE duetime_outbox DROP FOREIGN KEY duetime_outbox_job;
ALTER TABLE duetime_job_parents DROP FOREIGN KEY duetime_job_parents_child_fk,
    DROP FOREIGN KEY duetime_job_parents_parent_fk;
ALTER TABLE duetime_ticks DROP FOREIGN KEY duetime_ticks_job;
