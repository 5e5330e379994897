-- PostgreSQL's migration 29 drops the index of the start of the successes kept on their
-- jobs' rows (its stats' samples read them by their end). SQLite keeps both of its own
-- (duetime_jobs_succeeded_started, duetime_jobs_done_succeeded_started): a process of an
-- earlier version still running after `duetime migrate` names them in INDEXED BY, and a
-- statement that names an index that is gone fails. Its samples read the successes by their
-- start, each part bounded by the limit. The migration keeps the dialects' versions alike.
SELECT 1;
