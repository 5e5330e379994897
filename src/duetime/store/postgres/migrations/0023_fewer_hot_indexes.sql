-- One index fewer on the enqueue path (docs/performance.md, "One index fewer per enqueue").
-- duetime_jobs_next_due (due_at) WHERE scheduled served one statement, next_due (the timer's
-- and the relay's near future), and cost every enqueued job an index entry (and every claim
-- a dead one). next_due now reads duetime_jobs_due_any (priority DESC, due_at, id) WHERE
-- scheduled instead: one walk per priority class that has scheduled jobs, each stopped by
-- its limit, the few instants merged. No other statement reads the dropped index.
DROP INDEX duetime_jobs_next_due;
-- The listing index (tenant, status, id), without running jobs, was the widest entry of a
-- job (it never deduplicates: its keys end with the id) and was written by every enqueue and
-- every finish. The job counts index now leads with (status, tenant, id) and carries queue
-- and due_at as included columns: a page of one tenant's jobs in one status, newest first, is
-- one range of it (running jobs too, no sort), and the counts per queue and tenant
-- (flow_counts) still read it alone. One index entry fewer per enqueue and per finish.
DROP INDEX duetime_jobs_listing;
DROP INDEX duetime_jobs_status;
CREATE INDEX duetime_jobs_status ON duetime_jobs (status, tenant, id) INCLUDE (queue, due_at);
