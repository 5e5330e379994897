-- One index fewer on the enqueue path (docs/performance.md, "One index fewer per enqueue").
-- duetime_jobs_next_due (due_at) WHERE scheduled served one statement, next_due (the timer's
-- and the relay's near future), and cost every enqueued job an index entry (and every claim
-- a dead one). next_due now reads duetime_jobs_due_any (priority DESC, due_at, id) WHERE
-- scheduled instead: one walk per priority class that has scheduled jobs, each stopped by
-- its limit, the few instants merged. No other statement reads the dropped index.
DROP INDEX duetime_jobs_next_due;
