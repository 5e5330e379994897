-- The successes kept on their jobs' rows (migration 24) are sampled by their end, not their
-- start (docs/stores.md, "Attempts written once"; docs/performance.md, "The successes sampled
-- by their end"): attempt_samples reads them through the pruner's index of when a job ended
-- (duetime_jobs_finished, duetime_jobs_done_finished; a success that started since a point
-- in time ended since then too), so the indexes of their start go. Every success that moves
-- to the history table writes one index entry fewer. A process of an earlier version still
-- running after this migration reads its samples without them (slower, still correct):
-- restart the processes after `duetime migrate`.
DROP INDEX duetime_jobs_done_succeeded_started;
DROP INDEX duetime_jobs_succeeded_started;
