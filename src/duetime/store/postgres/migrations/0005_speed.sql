-- Speed (PostgreSQL): the near future of due jobs for each node's timer, and finished jobs by
-- age for the pruner.
CREATE INDEX duetime_jobs_next_due ON duetime_jobs (due_at) WHERE status = 'scheduled';
CREATE INDEX duetime_jobs_finished ON duetime_jobs (updated_at)
    WHERE status IN ('succeeded', 'cancelled', 'expired');
-- deleting a job sets its ticks' job_id to NULL: find them by job
CREATE INDEX duetime_ticks_job ON duetime_ticks (job_id) WHERE job_id IS NOT NULL;
