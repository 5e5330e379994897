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
