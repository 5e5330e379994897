-- Cheaper rows (docs/performance.md, "Bytes per job"): no statement reads attempts by
-- finished_at (the stats read them by started_at), so its index goes.
DROP INDEX duetime_attempts_finished;
