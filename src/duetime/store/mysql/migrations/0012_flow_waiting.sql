-- Flow visibility (docs/flow-control.md, "Visibility"): the job counts index also holds due_at,
-- so the counts per queue and tenant (flow_counts) find the due jobs not started yet (waiting,
-- and the oldest one's due_at) in the same covering-index read as their backlog and running
-- counts.
ALTER TABLE duetime_jobs
    DROP KEY duetime_jobs_status,
    ADD KEY duetime_jobs_status (status, tenant, queue, due_at);
