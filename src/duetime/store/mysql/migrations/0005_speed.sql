-- Speed (MariaDB / MySQL): the near future of due jobs for each node's timer, and finished
-- jobs by age for the pruner (no partial indexes here: status leads).
ALTER TABLE duetime_jobs
    ADD KEY duetime_jobs_next_due (status, due_at),
    ADD KEY duetime_jobs_finished (status, updated_at);
