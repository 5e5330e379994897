-- Parts every dialect's queries.sql may name (store/driver.py load_queries reads this file
-- ahead of each): SQL that is the same in every dialect, written once.

-- part: claimed_columns
-- What a claim returns of each job it started (every dialect's claim, claim_queues and
-- claim_chosen): store/rows.py CLAIMED_COLUMNS but claim_epoch, which each statement adds.
-- The columns the claim's readers use and no more (claims_from_rows; limits.spend, the
-- relay's dispatch and Reserved.used read some of them too), as each one returned costs the
-- database's output and the driver's parse. Of the attempt only its id and lease end: the
-- rest of a started attempt is the job's (generation, claim_token, due_at; started_at =
-- updated_at = now), the worker's or a constant.
       j.id, j.tenant, j.queue, j.task, j.args, j.priority, j.due_at, j.deadline_at,
       j.status, j.version, j.attempts, j.max_attempts, j.generation, j.retry_base,
       j.retry_cap, j.lease_seconds, j.timeout_seconds, j.idempotency_key, j.business_key,
       j.created_at, j.updated_at, j.cancel_requested_at, j.schedule_id, j.schedule_name,
       j.nominal_at, j.covers, j.origin, j.limits, j.result, j.progress, j.progress_message,
       j.progress_at, j.trace_context, j.on_parent_failure, j.cancel_reason, j.sequence_key,
       j.sequence_hold, j.unique_key, j.unique_until, j.claim_token, j.attempt_id,
       j.lease_expires_at AS attempt_lease_expires_at;

-- part: job_columns
-- Every stored column of a job, by name (store/rows.py reads rows by name): a read of both
-- the jobs table and the history table (migration 25, docs/history-plan.md) is a UNION ALL of
-- the two, which needs the same columns in the same order, whatever order a database's
-- migrations added them in (and without MariaDB/MySQL's generated claim key).
       id, tenant, queue, task, args, priority, due_at, deadline_at, status, version, attempts,
       max_attempts, generation, retry_base, retry_cap, lease_seconds, timeout_seconds,
       idempotency_key, request_hash, business_key, cancel_requested_at, created_at, updated_at,
       schedule_id, schedule_name, nominal_at, covers, origin, limits, claim_token, result,
       progress, progress_message, progress_at, sequence_key, sequence_hold, unique_key,
       unique_until, has_children, on_parent_failure, parents_left, release_delay, cancel_reason,
       trace_context, attempt_id, worker_id, lease_expires_at, started_at, late_outcome,
       late_reported_at
