-- Cheaper rows (docs/performance.md, "Bytes per job"). Every job's row is written three times
-- (enqueue, claim, finish) and no status change can be a HOT update (status is in the claim
-- indexes' predicates). A fillfactor of 50 leaves room on each page for one new version of
-- every row, so the claim's and the finish's versions stay on their page, where pruning
-- reclaims the versions they replace, instead of extending the table. (It applies to pages
-- written from now on; a table is not rewritten.)
ALTER TABLE duetime_jobs SET (fillfactor = 50);
-- The listing index leaves out running jobs: every claim wrote one entry into it and every
-- finish left it dead. Running jobs (at most what the workers hold) are listed through
-- duetime_jobs_status (status, tenant, ...) and sorted.
DROP INDEX duetime_jobs_listing;
CREATE INDEX duetime_jobs_listing ON duetime_jobs (tenant, status, id)
    WHERE status NOT IN ('running', 'cancel_requested');
-- No statement reads attempts by finished_at (the stats read them by started_at).
DROP INDEX duetime_attempts_finished;
