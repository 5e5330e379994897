-- Every job, in whichever table holds it: the jobs table (work waiting, due or running, and
-- the jobs that ended but keep a key) and the history table a job that ended moves to
-- (migration 25; docs/history-plan.md). For operators' own queries, scripts and checks that
-- read jobs by hand (docs/stores.md, "Tables"); duetime's own statements read each table
-- through its indexes. Its columns are the jobs' stored columns (store/sql/parts.sql,
-- job_columns): a migration that adds a column to the jobs tables defines it again.
CREATE VIEW duetime_all_jobs AS
SELECT
       id, tenant, queue, task, args, priority, due_at, deadline_at, status, version, attempts,
       max_attempts, generation, retry_base, retry_cap, lease_seconds, timeout_seconds,
       idempotency_key, request_hash, business_key, cancel_requested_at, created_at, updated_at,
       schedule_id, schedule_name, nominal_at, covers, origin, limits, claim_token, result,
       progress, progress_message, progress_at, sequence_key, sequence_hold, unique_key,
       unique_until, has_children, on_parent_failure, parents_left, release_delay, cancel_reason,
       trace_context, attempt_id, worker_id, lease_expires_at, started_at, late_outcome,
       late_reported_at
FROM duetime_jobs
UNION ALL
SELECT
       id, tenant, queue, task, args, priority, due_at, deadline_at, status, version, attempts,
       max_attempts, generation, retry_base, retry_cap, lease_seconds, timeout_seconds,
       idempotency_key, request_hash, business_key, cancel_requested_at, created_at, updated_at,
       schedule_id, schedule_name, nominal_at, covers, origin, limits, claim_token, result,
       progress, progress_message, progress_at, sequence_key, sequence_hold, unique_key,
       unique_until, has_children, on_parent_failure, parents_left, release_delay, cancel_reason,
       trace_context, attempt_id, worker_id, lease_expires_at, started_at, late_outcome,
       late_reported_at
FROM duetime_jobs_done;

-- A listing of one status without a tenant (an operator's dead letters, of every tenant):
-- the history table's listing index leads with the tenant, and a walk of its primary key
-- would read through every success to find the few jobs that ended otherwise. (MariaDB/MySQL
-- have no partial index: every row has an entry, its key the status and the id.)
CREATE INDEX duetime_jobs_done_status ON duetime_jobs_done (status, id);
