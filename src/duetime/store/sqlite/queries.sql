-- The SQLite dialect's named statements; their contracts are in store/statements.py.
-- Instants are integer microseconds since the epoch; lists arrive as JSON text (json_each).
-- Every write runs under BEGIN IMMEDIATE: one writer at a time holds the whole file, so
-- picked rows cannot change before the same transaction moves them.

-- name: migrations_table_exists
SELECT 1 AS found FROM sqlite_master WHERE type = 'table' AND name = 'duetime_migrations';

-- name: create_migrations_table
CREATE TABLE IF NOT EXISTS duetime_migrations (
    version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL);

-- name: lock_migrations
-- the write transaction already holds the file
SELECT 1;

-- name: unlock_migrations
SELECT 1;

-- name: schema_version
SELECT COALESCE(MAX(version), 0) AS version FROM duetime_migrations;

-- name: insert_migration
INSERT INTO duetime_migrations (version, name, applied_at) VALUES (:version, :name, :now);

-- name: reserve_attempt_ids
-- The claim gives each attempt its id itself (the counter row, under the write lock,
-- migration 22): nothing to reserve (store/sql/attempt_ids.py).
SELECT NULL AS first_id;

-- name: reserve_job_ids
-- Under the write lock: the next ids after every id ever used (AUTOINCREMENT keeps the
-- highest in sqlite_sequence, also for ids given explicitly).
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :count),
last(id) AS (
    SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'duetime_jobs'), 0),
               COALESCE((SELECT MAX(id) FROM duetime_jobs), 0)))
SELECT json_group_array(last.id + n.i) AS ids FROM n, last;

-- name: enqueue_one
INSERT INTO duetime_jobs (tenant, queue, task, args, priority, due_at, deadline_at, status,
    max_attempts, retry_base, retry_cap, lease_seconds, timeout_seconds, idempotency_key,
    request_hash, business_key, created_at, updated_at, schedule_id, schedule_name, nominal_at,
    covers, origin, limits, trace_context, sequence_key, sequence_hold, unique_key, unique_until)
VALUES (:tenant, :queue, :task, :args, :priority, :due_at, :deadline_at, :status,
    :max_attempts, :retry_base, :retry_cap, :lease_seconds, :timeout_seconds, :idempotency_key,
    :request_hash, :business_key, :now, :now, :schedule_id, :schedule_name, :nominal_at,
    :covers, :origin, :limits, :trace_context, :sequence_key, :sequence_hold, :unique_key,
    :unique_until)
ON CONFLICT DO NOTHING
RETURNING id;

-- name: insert_job
INSERT INTO duetime_jobs (id, tenant, queue, task, args, priority, due_at, deadline_at, status,
    max_attempts, retry_base, retry_cap, lease_seconds, timeout_seconds, idempotency_key,
    request_hash, business_key, created_at, updated_at, schedule_id, schedule_name, nominal_at,
    covers, origin, limits, trace_context)
VALUES (:id, :tenant, :queue, :task, :args, :priority, :due_at, :deadline_at, :status,
    :max_attempts, :retry_base, :retry_cap, :lease_seconds, :timeout_seconds, :idempotency_key,
    :request_hash, :business_key, :now, :now, :schedule_id, :schedule_name, :nominal_at,
    :covers, :origin, :limits, :trace_context)
ON CONFLICT DO NOTHING;

-- name: insert_new_jobs
INSERT INTO duetime_jobs (id, tenant, queue, task, args, priority, due_at, deadline_at, status,
    max_attempts, retry_base, retry_cap, lease_seconds, timeout_seconds, idempotency_key,
    request_hash, business_key, created_at, updated_at, schedule_id, schedule_name, nominal_at,
    covers, origin, limits, trace_context)
VALUES (:id, :tenant, :queue, :task, :args, :priority, :due_at, :deadline_at, :status,
    :max_attempts, :retry_base, :retry_cap, :lease_seconds, :timeout_seconds, :idempotency_key,
    :request_hash, :business_key, :now, :now, :schedule_id, :schedule_name, :nominal_at,
    :covers, :origin, :limits, :trace_context);

-- name: insert_job_batch
-- enqueue_many's jobs: what they share as parameters, what differs in `rows`, a JSON array of
-- [id, args (JSON text), due_at (null: the shared one), business_key]. One statement.
INSERT INTO duetime_jobs (id, tenant, queue, task, args, priority, due_at, deadline_at, status,
    max_attempts, retry_base, retry_cap, lease_seconds, timeout_seconds, idempotency_key,
    request_hash, business_key, created_at, updated_at, schedule_id, schedule_name, nominal_at,
    covers, origin, limits, trace_context)
SELECT json_extract(r.value, '$[0]'), :tenant, :queue, :task, json_extract(r.value, '$[1]'),
    :priority, COALESCE(json_extract(r.value, '$[2]'), :due_at), :deadline_at, :status,
    :max_attempts, :retry_base, :retry_cap, :lease_seconds, :timeout_seconds, NULL,
    :request_hash, json_extract(r.value, '$[3]'), :now, :now, NULL, NULL, NULL, NULL, :origin,
    :limits, :trace_context
FROM json_each(:rows) AS r;

-- name: jobs_by_ids
-- Both tables (a job that ended may be in the history table, migration 25).
SELECT
@job_columns
FROM duetime_jobs WHERE id IN (SELECT value FROM json_each(:ids))
UNION ALL
SELECT
@job_columns
FROM duetime_jobs_done WHERE id IN (SELECT value FROM json_each(:ids));

-- name: jobs_by_keys
SELECT * FROM duetime_jobs
WHERE tenant IN (SELECT value FROM json_each(:tenants))
  AND idempotency_key IN (SELECT value FROM json_each(:keys));

-- name: select_job
-- Both tables (a job that ended may be in the history table, migration 25).
SELECT
@job_columns
FROM duetime_jobs WHERE id = :id AND (:tenant IS NULL OR tenant = :tenant)
UNION ALL
SELECT
@job_columns
FROM duetime_jobs_done WHERE id = :id AND (:tenant IS NULL OR tenant = :tenant);

-- name: select_attempts
-- every attempt, the running one from its job's row (migration 22: duetime_all_attempts)
SELECT * FROM duetime_all_attempts WHERE job_id = :id ORDER BY generation;

-- name: select_attempts_of_jobs
-- every attempt of the jobs, as duetime_all_attempts has them (migrations 22 and 24), written out:
-- SQLite does not push an IN (subquery) into the view's UNION (it would read every attempt);
-- each part reads the jobs of `ids` through its index (the history table's too, migration 25)
SELECT a.id, a.job_id, a.generation, a.worker_id, a.status, a.lease_expires_at, a.started_at,
       a.finished_at, a.error_category, a.error_message, a.error_traceback, a.late_outcome,
       a.late_reported_at, a.due_at, a.claim_token
FROM duetime_attempts AS a
WHERE a.job_id IN (SELECT value FROM json_each(:ids))
UNION ALL
SELECT j.attempt_id, j.id, j.generation, j.worker_id,
       CASE WHEN j.status = 'succeeded' THEN 'succeeded' ELSE 'running' END, j.lease_expires_at,
       j.started_at, CASE WHEN j.status = 'succeeded' THEN j.updated_at END, NULL, NULL, NULL,
       j.late_outcome, j.late_reported_at, j.due_at, j.claim_token
FROM duetime_jobs AS j
WHERE j.id IN (SELECT value FROM json_each(:ids))
  AND j.status IN ('running', 'cancel_requested', 'succeeded') AND j.attempt_id IS NOT NULL
UNION ALL
SELECT d.attempt_id, d.id, d.generation, d.worker_id, 'succeeded', d.lease_expires_at,
       d.started_at, d.updated_at, NULL, NULL, NULL, d.late_outcome, d.late_reported_at,
       d.due_at, d.claim_token
FROM duetime_jobs_done AS d
WHERE d.id IN (SELECT value FROM json_each(:ids))
  AND d.status = 'succeeded' AND d.attempt_id IS NOT NULL
ORDER BY job_id, generation;

-- part: listed
-- list_jobs' filters, the same on both tables
WHERE (:tenant IS NULL OR tenant = :tenant)
  AND (:status IS NULL OR status = :status)
  AND (:task IS NULL OR task = :task)
  AND (:queue IS NULL OR queue = :queue)
  AND (:schedule_id IS NULL OR schedule_id = :schedule_id)
  AND (:before_id IS NULL OR id < :before_id)
  AND (:due_after IS NULL OR due_at >= :due_after)
  AND (:due_before IS NULL OR due_at < :due_before)
  AND (:business_key IS NULL OR business_key = :business_key)
  AND (:idempotency_key IS NULL OR idempotency_key = :idempotency_key)
  AND (:args_like IS NULL OR lower(args) LIKE :args_like ESCAPE '!')

-- name: list_jobs
-- Both tables (a job that ended may be in the history table, migration 25): each part reads
-- newest first to the limit, and the two merge.
SELECT * FROM (
    SELECT * FROM (
        SELECT
@job_columns
        FROM duetime_jobs
@listed
        ORDER BY id DESC
        LIMIT :limit) AS hot
    UNION ALL
    SELECT * FROM (
        SELECT
@job_columns
        FROM duetime_jobs_done
@listed
        ORDER BY id DESC
        LIMIT :limit) AS done) AS r
ORDER BY id DESC
LIMIT :limit;

-- name: occurrence_id
-- Both tables (a job that ended may be in the history table, migration 25).
SELECT id FROM duetime_jobs WHERE schedule_id = :schedule_id AND nominal_at = :nominal_at
UNION ALL
SELECT id FROM duetime_jobs_done WHERE schedule_id = :schedule_id AND nominal_at = :nominal_at;

-- name: claim
-- Under the write lock: the picked ids go to a temporary table of this connection, then the
-- jobs move, their attempts start, and the claimed rows come back. The pick runs one branch
-- (every queue, one queue, or several). INDEXED BY: the partial indexes give the claim order,
-- so a scan stops after `limit` due rows instead of sorting every scheduled job (without
-- statistics SQLite would take the status index and sort). Only tasks of `tasks` are taken
-- (any task when all_tasks): a worker claims only what it has handlers for. Jobs of
-- outbox_queues are left to the relay (dispatch_outbox); all_direct when there is none. Jobs of
-- a paused queue are left out as its row says now (not as the store's copy of the control
-- rows says: a pause made elsewhere holds at once). Only the priority classes of `classes`
-- (Claimer.due_classes: every class of the scheduled jobs): named, each class's range of the
-- index ends at now, so a claim that finds fewer due jobs than its limit stops at the due ones
-- (SQLite has no skip scan; without them the scan walks on through every job due later).
CREATE TEMP TABLE IF NOT EXISTS duetime_claim (id INTEGER PRIMARY KEY);
DELETE FROM temp.duetime_claim;
INSERT INTO temp.duetime_claim (id)
SELECT id FROM (
    SELECT id FROM duetime_jobs INDEXED BY duetime_jobs_due_any
    WHERE :all_queues AND status = 'scheduled'
      AND priority IN (SELECT value FROM json_each(:classes)) AND due_at <= :now
      AND (deadline_at IS NULL OR deadline_at > :now)
      AND (:all_tasks OR task IN (SELECT value FROM json_each(:tasks)))
      AND (:all_direct OR queue NOT IN (SELECT value FROM json_each(:outbox_queues)))
      AND queue NOT IN (SELECT queue FROM duetime_queues WHERE paused)
    ORDER BY priority DESC, due_at, id
    LIMIT :limit)
UNION ALL
SELECT id FROM (
    SELECT id FROM duetime_jobs INDEXED BY duetime_jobs_due
    WHERE NOT :all_queues AND json_array_length(:queues) = 1
      AND queue = json_extract(:queues, '$[0]') AND status = 'scheduled'
      AND priority IN (SELECT value FROM json_each(:classes)) AND due_at <= :now
      AND (deadline_at IS NULL OR deadline_at > :now)
      AND (:all_tasks OR task IN (SELECT value FROM json_each(:tasks)))
      AND (:all_direct OR queue NOT IN (SELECT value FROM json_each(:outbox_queues)))
      AND queue NOT IN (SELECT queue FROM duetime_queues WHERE paused)
    ORDER BY priority DESC, due_at, id
    LIMIT :limit)
UNION ALL
SELECT id FROM (
    SELECT id FROM duetime_jobs INDEXED BY duetime_jobs_due
    WHERE NOT :all_queues AND json_array_length(:queues) > 1
      AND queue IN (SELECT value FROM json_each(:queues)) AND status = 'scheduled'
      AND priority IN (SELECT value FROM json_each(:classes))
      AND due_at <= :now AND (deadline_at IS NULL OR deadline_at > :now)
      AND (:all_tasks OR task IN (SELECT value FROM json_each(:tasks)))
      AND (:all_direct OR queue NOT IN (SELECT value FROM json_each(:outbox_queues)))
      AND queue NOT IN (SELECT queue FROM duetime_queues WHERE paused)
    ORDER BY priority DESC, due_at, id
    LIMIT :limit);
-- the attempts start on their jobs' rows (migration 22), their ids from the counter (in
-- job id order; the counter then moves past every id of the pick)
UPDATE duetime_jobs
SET status = json_extract(:moves, '$.' || status), generation = generation + 1,
    claim_token = abs(random() % 9223372036854775807) + 1,
    attempts = attempts + 1, updated_at = :now,
    attempt_id = (SELECT next_id FROM duetime_attempt_ids WHERE id = 1)
        + (SELECT COUNT(*) FROM temp.duetime_claim c WHERE c.id < duetime_jobs.id),
    worker_id = :worker_id, lease_expires_at = :now + CAST(lease_seconds * 1000000 AS INTEGER),
    started_at = :now, late_outcome = NULL, late_reported_at = NULL
WHERE id IN (SELECT id FROM temp.duetime_claim)
  AND json_type(:moves, '$.' || status) IS NOT NULL;
UPDATE duetime_attempt_ids SET next_id = next_id + (SELECT COUNT(*) FROM temp.duetime_claim)
WHERE id = 1;
SELECT
@claimed_columns
       , 0 AS claim_epoch  -- last, as CLAIMED_COLUMNS and PostgreSQL's claims have it
FROM duetime_jobs j
WHERE j.id IN (SELECT id FROM temp.duetime_claim) AND j.status = 'running'
  AND j.updated_at = :now AND j.attempt_id IS NOT NULL
ORDER BY j.priority DESC, j.due_at, j.id;

-- name: due_class_bounds
-- The highest and the lowest priority class of the scheduled jobs (NULL: none), a seek each in
-- the claim-order index (a MIN and a MAX in one SELECT would scan it).
SELECT
    (SELECT MAX(priority) FROM duetime_jobs INDEXED BY duetime_jobs_due_any
     WHERE status = 'scheduled') AS top_class,
    (SELECT MIN(priority) FROM duetime_jobs INDEXED BY duetime_jobs_due_any
     WHERE status = 'scheduled') AS end_class;

-- name: due_class_after
-- The next priority class of the scheduled jobs after `after` in claim order (lower), one seek.
SELECT MAX(priority) AS class FROM duetime_jobs INDEXED BY duetime_jobs_due_any
WHERE status = 'scheduled' AND priority < :after;

-- name: claim_queues
-- The claim above reads each named queue through its own index already.
@claim

-- name: renew_leases
-- The leases of `leases` (job_id, claim_token): an attempt is renewed only while its job
-- holds its claim token and runs it (under the write lock). The running attempt is the job's
-- row's (migration 22): only its lease_expires_at changes, no attempt row is written.
UPDATE duetime_jobs
SET lease_expires_at = :now + CAST(lease_seconds * 1000000 AS INTEGER)
FROM (SELECT json_extract(v.value, '$.job_id') AS job_id,
             json_extract(v.value, '$.claim_token') AS claim_token
      FROM json_each(:leases) AS v) AS h
WHERE duetime_jobs.id = h.job_id AND duetime_jobs.claim_token = h.claim_token
  AND duetime_jobs.status IN ('running', 'cancel_requested')
  AND duetime_jobs.attempt_id IS NOT NULL;

-- name: lease_states
-- Each job by its id and claim token, with the attempt it runs (its row's, migration 22).
SELECT j.attempt_id, j.id AS job_id, j.generation, j.claim_token, j.lease_expires_at,
       j.status AS job_status
FROM json_each(:leases) AS v
JOIN duetime_jobs j ON j.id = json_extract(v.value, '$.job_id')
    AND j.claim_token = json_extract(v.value, '$.claim_token')
WHERE j.status IN ('running', 'cancel_requested') AND j.attempt_id IS NOT NULL;

-- name: lock_jobs
-- the write transaction already holds the file; each job with the attempt it runs (on its
-- row: migration 22), if any
SELECT j.id, j.generation, j.claim_token, j.status, j.queue, j.has_children, j.tenant, j.sequence_key,
       CASE WHEN j.attempt_id IS NOT NULL AND j.status IN ('running', 'cancel_requested')
            THEN 'running' END AS attempt_status,
       j.lease_expires_at AS attempt_lease_expires_at
FROM duetime_jobs j
WHERE j.id IN (SELECT value FROM json_each(:ids))
ORDER BY j.id;

-- name: finish_held
-- (Unused here: a batch is finished the long way, lock_jobs then finish_jobs;
-- Driver.finishes_held.)
SELECT 0 AS moved, NULL AS follow_ups;

-- name: finish_jobs
-- Under the write lock: each ended attempt's row is inserted, once, with its outcome, from
-- its job's row (fenced by generation, claim token, status, the attempt it runs and, for a
-- reap, the expired lease); then those jobs move and their current-attempt columns are
-- cleared (migration 22), under the same fence. A plain success (`kept`, store/sql/finish.py)
-- has no row: it stays on its job's row, whose columns are kept (migration 24; its end is
-- the job's updated_at).
INSERT INTO duetime_attempts (id, job_id, generation, claim_token, worker_id, status,
    lease_expires_at, started_at, finished_at, error_category, error_message, error_traceback,
    late_outcome, late_reported_at, due_at)
SELECT j.attempt_id, j.id, j.generation, j.claim_token, j.worker_id, v.status,
       j.lease_expires_at, j.started_at, :now, v.error_category, v.error_message,
       v.error_traceback, j.late_outcome, j.late_reported_at, j.due_at
FROM (SELECT json_extract(value, '$.job_id') AS job_id,
             json_extract(value, '$.generation') AS generation,
             json_extract(value, '$.claim_token') AS claim_token,
             json_extract(value, '$.from_status') AS from_status,
             json_extract(value, '$.only_if_expired') AS only_if_expired,
             json_extract(value, '$.status') AS status,
             json_extract(value, '$.error_category') AS error_category,
             json_extract(value, '$.error_message') AS error_message,
             json_extract(value, '$.error_traceback') AS error_traceback,
             COALESCE(json_extract(value, '$.kept'), 0) AS kept
      FROM json_each(:batch)) AS v
JOIN duetime_jobs j ON j.id = v.job_id
WHERE j.generation = v.generation AND j.claim_token = v.claim_token
  AND j.status = v.from_status AND j.attempt_id IS NOT NULL
  AND (v.only_if_expired = 0 OR j.lease_expires_at <= :now)
  AND NOT v.kept
ORDER BY j.id;
UPDATE duetime_jobs
SET status = v.to_status, due_at = COALESCE(v.due_at, duetime_jobs.due_at), updated_at = :now,
    attempt_id = CASE WHEN v.kept THEN duetime_jobs.attempt_id END,
    worker_id = CASE WHEN v.kept THEN duetime_jobs.worker_id END,
    lease_expires_at = CASE WHEN v.kept THEN duetime_jobs.lease_expires_at END,
    started_at = CASE WHEN v.kept THEN duetime_jobs.started_at END,
    late_outcome = CASE WHEN v.kept THEN duetime_jobs.late_outcome END,
    late_reported_at = CASE WHEN v.kept THEN duetime_jobs.late_reported_at END
FROM (SELECT json_extract(value, '$.job_id') AS job_id,
             json_extract(value, '$.generation') AS generation,
             json_extract(value, '$.claim_token') AS claim_token,
             json_extract(value, '$.from_status') AS from_status,
             json_extract(value, '$.to_status') AS to_status,
             json_extract(value, '$.due_at') AS due_at,
             json_extract(value, '$.only_if_expired') AS only_if_expired,
             COALESCE(json_extract(value, '$.kept'), 0) AS kept
      FROM json_each(:batch)) AS v
WHERE duetime_jobs.id = v.job_id AND duetime_jobs.generation = v.generation
  AND duetime_jobs.claim_token = v.claim_token AND duetime_jobs.status = v.from_status
  AND duetime_jobs.attempt_id IS NOT NULL
  AND (v.only_if_expired = 0 OR duetime_jobs.lease_expires_at <= :now);

-- name: keep_results
-- A success's result and an attempt's last progress (docs/workflows.md), for the one job the
-- finish just moved (fenced as the finish was; run only for outcomes that carry either).
UPDATE duetime_jobs
SET result = COALESCE(:result, result),
    progress = COALESCE(:progress, progress),
    progress_message = CASE WHEN :progress IS NULL THEN progress_message ELSE :progress_message END,
    progress_at = CASE WHEN :progress IS NULL THEN progress_at ELSE :now END
WHERE id = :job_id AND generation = :generation AND claim_token = :claim_token
  AND status = :to_status;

-- name: record_progress
-- A running attempt's progress, fenced by its generation and claim token.
UPDATE duetime_jobs
SET progress = :progress, progress_message = :progress_message, progress_at = :now
WHERE id = :job_id AND generation = :generation AND claim_token = :claim_token
  AND status IN ('running', 'cancel_requested');

-- name: late_reports
-- On the attempt of each job with that generation and claim token (none: nothing recorded):
-- the job's row while the attempt still runs there (migration 22; its row takes the report at
-- its end) or is a success kept there (migration 24) in either table (a job that ended may be
-- in the history table, migration 25), else the attempt's row.
UPDATE duetime_jobs
SET late_outcome = v.outcome, late_reported_at = :now
FROM (SELECT json_extract(value, '$.job_id') AS job_id,
             json_extract(value, '$.generation') AS generation,
             json_extract(value, '$.claim_token') AS claim_token,
             json_extract(value, '$.outcome') AS outcome
      FROM json_each(:batch)) AS v
WHERE duetime_jobs.id = v.job_id AND duetime_jobs.generation = v.generation
  AND duetime_jobs.claim_token = v.claim_token AND duetime_jobs.attempt_id IS NOT NULL;
UPDATE duetime_jobs_done
SET late_outcome = v.outcome, late_reported_at = :now
FROM (SELECT json_extract(value, '$.job_id') AS job_id,
             json_extract(value, '$.generation') AS generation,
             json_extract(value, '$.claim_token') AS claim_token,
             json_extract(value, '$.outcome') AS outcome
      FROM json_each(:batch)) AS v
WHERE duetime_jobs_done.id = v.job_id AND duetime_jobs_done.generation = v.generation
  AND duetime_jobs_done.claim_token = v.claim_token
  AND duetime_jobs_done.attempt_id IS NOT NULL;
UPDATE duetime_attempts
SET late_outcome = v.outcome, late_reported_at = :now
FROM (SELECT json_extract(value, '$.job_id') AS job_id,
             json_extract(value, '$.generation') AS generation,
             json_extract(value, '$.claim_token') AS claim_token,
             json_extract(value, '$.outcome') AS outcome
      FROM json_each(:batch)) AS v
WHERE duetime_attempts.job_id = v.job_id AND duetime_attempts.generation = v.generation
  AND duetime_attempts.claim_token = v.claim_token;

-- name: expired_leases
-- Running attempts are their jobs' (migration 22): the running and cancel-requested jobs
-- (few: what the workers hold) from the job counts index.
SELECT j.attempt_id, j.id AS job_id, j.generation, j.claim_token, j.status, j.attempts,
       j.max_attempts, j.retry_base, j.retry_cap
FROM duetime_jobs j
WHERE j.status IN ('running', 'cancel_requested')
  AND j.attempt_id IS NOT NULL AND j.lease_expires_at <= :now
  -- an attempt dispatched to the broker whose event is not yet published: no lease runs yet
  AND NOT (j.worker_id = :holder AND EXISTS (
        SELECT 1 FROM duetime_outbox o WHERE o.attempt_id = j.attempt_id AND o.published_at IS NULL))
ORDER BY j.lease_expires_at, j.attempt_id
LIMIT :limit;

-- name: held_leases
-- Through the running jobs (few rows: what the workers hold now), as expired_leases.
SELECT j.attempt_id, j.id AS job_id, j.generation, j.claim_token
FROM duetime_jobs j
WHERE j.status IN ('running', 'cancel_requested')
  AND j.attempt_id IS NOT NULL AND j.worker_id = :worker_id
ORDER BY j.attempt_id;

-- name: expire_overdue
UPDATE duetime_jobs
SET status = json_extract(:moves, '$.' || status), version = version + 1, updated_at = :now
WHERE id IN (
    SELECT id FROM duetime_jobs
    WHERE status = 'scheduled' AND deadline_at IS NOT NULL AND deadline_at <= :now
    ORDER BY deadline_at, id
    LIMIT :limit)
  AND json_type(:moves, '$.' || status) IS NOT NULL
RETURNING id, has_children, tenant, sequence_key;

-- name: transition
UPDATE duetime_jobs
SET status = json_extract(:moves, '$.' || status),
    due_at = COALESCE(:due_at, due_at),
    attempts = CASE WHEN :replay = 1 THEN 0 ELSE attempts END,
    deadline_at = CASE WHEN :replay = 1 AND deadline_at <= COALESCE(:due_at, due_at)
                       THEN NULL ELSE deadline_at END,
    cancel_requested_at = CASE
        WHEN :replay = 1 THEN NULL  -- a replay starts afresh
        WHEN json_extract(:moves, '$.' || status) = 'cancel_requested'
             AND status <> 'cancel_requested' THEN :now  -- a repeated request keeps its time
        ELSE cancel_requested_at END,
    version = version + 1,
    updated_at = :now
WHERE id = :job_id
  AND (:tenant IS NULL OR tenant = :tenant)
  AND json_type(:moves, '$.' || status) IS NOT NULL
  AND (:due_at IS NULL OR :replay = 1 OR deadline_at IS NULL OR deadline_at > :due_at);

-- name: insert_schedule
INSERT INTO duetime_schedules (tenant, name, spec, definition_hash, paused, anchor_at,
    next_fire_at, created_at, updated_at)
VALUES (:tenant, :name, :spec, :definition_hash, 0, :anchor_at, :next_fire_at, :now, :now)
ON CONFLICT (tenant, name) DO NOTHING;

-- name: select_schedule
SELECT * FROM duetime_schedules WHERE tenant = :tenant AND name = :name;

-- name: lock_schedule
-- the write transaction already holds the file
SELECT * FROM duetime_schedules WHERE tenant = :tenant AND name = :name;

-- name: list_schedules
SELECT * FROM duetime_schedules WHERE (:tenant IS NULL OR tenant = :tenant) ORDER BY name, tenant;

-- name: due_schedules
SELECT id FROM duetime_schedules
WHERE paused = 0 AND next_fire_at IS NOT NULL AND next_fire_at <= :now
ORDER BY next_fire_at, id
LIMIT :limit;

-- name: lock_due_schedule
SELECT * FROM duetime_schedules
WHERE id = :id AND paused = 0 AND next_fire_at IS NOT NULL AND next_fire_at <= :now;

-- name: update_schedule
UPDATE duetime_schedules
SET spec = COALESCE(:spec, spec),
    definition_hash = COALESCE(:definition_hash, definition_hash),
    paused = COALESCE(:paused, paused),
    anchor_at = COALESCE(:anchor_at, anchor_at),
    next_fire_at = CASE WHEN :move_cursor = 1 THEN :next_fire_at ELSE next_fire_at END,
    version = version + :bump,
    updated_at = :now
WHERE id = :id;

-- name: delete_schedule
DELETE FROM duetime_schedules WHERE id = :id;

-- name: cancel_unstarted
UPDATE duetime_jobs
SET status = json_extract(:moves, '$.' || status), version = version + 1, updated_at = :now
WHERE schedule_id = :schedule_id AND status IN ('scheduled', 'waiting') AND generation = 0
  AND json_type(:moves, '$.' || status) IS NOT NULL;

-- name: active_occurrences
SELECT id, nominal_at, status, generation, origin FROM duetime_jobs
WHERE schedule_id = :schedule_id
  AND status IN ('scheduled', 'waiting', 'running', 'cancel_requested')
ORDER BY nominal_at;

-- name: delete_unstarted
-- The jobs are picked once, into a temporary table (one writer: they stay as they are until
-- the transaction ends). No foreign key does it (migration 26): their dependency links go
-- with them and their ticks are detached. A job never claimed (generation 0) has no attempt
-- and no outbox event, and an occurrence has no parents: its links are those of its children.
CREATE TEMP TABLE IF NOT EXISTS duetime_gone (id INTEGER PRIMARY KEY);
DELETE FROM temp.duetime_gone;
INSERT INTO temp.duetime_gone (id)
SELECT id FROM duetime_jobs
WHERE schedule_id = :schedule_id AND status IN ('scheduled', 'waiting') AND generation = 0
  AND origin = 'tick';
DELETE FROM duetime_job_parents WHERE parent_id IN (SELECT id FROM temp.duetime_gone);
UPDATE duetime_ticks SET job_id = NULL WHERE job_id IN (SELECT id FROM temp.duetime_gone);
DELETE FROM duetime_jobs WHERE id IN (SELECT id FROM temp.duetime_gone);

-- name: release_waiting
UPDATE duetime_jobs
SET status = json_extract(:moves, '$.' || status), due_at = :now, version = version + 1,
    updated_at = :now
WHERE id IN (
    SELECT w.id FROM duetime_jobs w
    WHERE w.status = 'waiting' AND w.schedule_id IS NOT NULL
      AND w.nominal_at = (SELECT MIN(x.nominal_at) FROM duetime_jobs x
                          WHERE x.schedule_id = w.schedule_id AND x.status = 'waiting')
      AND NOT EXISTS (SELECT 1 FROM duetime_jobs a
                      WHERE a.schedule_id = w.schedule_id
                        AND a.status IN ('scheduled', 'running', 'cancel_requested'))
    ORDER BY w.nominal_at, w.id
    LIMIT :limit)
  AND json_type(:moves, '$.' || status) IS NOT NULL;

-- name: insert_tick
INSERT INTO duetime_ticks (schedule_id, nominal_at, outcome, origin, job_id, detail, recorded_at)
VALUES (:schedule_id, :nominal_at, :outcome, :origin, :job_id, :detail, :now)
ON CONFLICT (schedule_id, nominal_at, outcome, origin)
DO UPDATE SET job_id = excluded.job_id, detail = excluded.detail,
    recorded_at = excluded.recorded_at;

-- name: list_ticks
-- started_at: the first start of the tick's job, of its ended attempts' rows (through their
-- job's index) and the attempt on its row, running (migration 22) or a success kept there
-- (migration 24), in either table (a job that ended may be in the history table, migration
-- 25). Not through the view of every attempt (duetime_all_attempts): the correlated condition
-- is not pushed into its UNION, and every attempt would be read.
SELECT t.*, COALESCE(j.status, d.status) AS job_status,
       (SELECT CASE WHEN COALESCE(r.started_at, k.started_at) IS NULL
                         OR MIN(a.started_at) < COALESCE(r.started_at, k.started_at)
                    THEN MIN(a.started_at) ELSE COALESCE(r.started_at, k.started_at) END
        FROM duetime_attempts a WHERE a.job_id = t.job_id) AS started_at
FROM duetime_ticks t LEFT JOIN duetime_jobs j ON j.id = t.job_id
LEFT JOIN duetime_jobs r ON r.id = j.id
    AND r.status IN ('running', 'cancel_requested', 'succeeded') AND r.attempt_id IS NOT NULL
LEFT JOIN duetime_jobs_done d ON d.id = t.job_id
LEFT JOIN duetime_jobs_done k ON k.id = d.id AND k.status = 'succeeded'
    AND k.attempt_id IS NOT NULL
WHERE t.schedule_id = :schedule_id AND (:before_id IS NULL OR t.id < :before_id)
ORDER BY t.id DESC
LIMIT :limit;

-- name: latest_run
-- Both tables (a job that ended may be in the history table, migration 25); each part
-- stops at its newest started occurrence.
SELECT id FROM (
    SELECT * FROM (
        SELECT id, nominal_at FROM duetime_jobs
        WHERE schedule_id = :schedule_id AND generation > 0
        ORDER BY nominal_at DESC
        LIMIT 1) AS hot
    UNION ALL
    SELECT * FROM (
        SELECT id, nominal_at FROM duetime_jobs_done
        WHERE schedule_id = :schedule_id AND generation > 0
        ORDER BY nominal_at DESC
        LIMIT 1) AS done) AS r
ORDER BY nominal_at DESC
LIMIT 1;

-- name: upsert_node
INSERT INTO duetime_nodes (id, hostname, pid, queues, concurrency, duties, version, started_at,
    last_seen_at, tasks, clock_offset_seconds)
VALUES (:id, :hostname, :pid, :queues, :concurrency, :duties, :version, :now, :now, :tasks,
    :clock_offset)
ON CONFLICT (id) DO UPDATE SET last_seen_at = excluded.last_seen_at, stopped_at = NULL,
    tasks = excluded.tasks, clock_offset_seconds = excluded.clock_offset_seconds;

-- name: touch_node
UPDATE duetime_nodes SET last_seen_at = :now, clock_offset_seconds = :clock_offset WHERE id = :id;

-- name: stop_node
UPDATE duetime_nodes SET last_seen_at = :now, stopped_at = :now WHERE id = :id;

-- name: take_turn
-- The duty's turn, when its last pass (by any process) began `every` seconds ago or more, by
-- this machine's clock, or more than `every` seconds ahead of it (the clock was set back); no
-- row changes otherwise.
UPDATE duetime_turns
SET passed_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000000.0) AS INTEGER),
    holder = :holder
WHERE duty = :duty
  AND (passed_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000000.0) AS INTEGER)
                    - CAST(:every * 1000000 AS INTEGER)
       OR passed_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000000.0) AS INTEGER)
                      + CAST(:every * 1000000 AS INTEGER));

-- name: first_turn
-- After a take_turn that changed no row: the duty's first pass ever inserts its row (one of
-- the nodes that race here wins); where the row is there, nothing is inserted.
INSERT OR IGNORE INTO duetime_turns (duty, passed_at, holder)
VALUES (:duty, CAST(ROUND((julianday('now') - 2440587.5) * 86400000000.0) AS INTEGER), :holder);

-- name: list_nodes
-- What each node holds: the running attempts, read once through the running jobs (as
-- expired_leases), grouped by worker.
WITH held AS (
    SELECT worker_id, json_group_array(id) AS holding
    FROM (SELECT j.worker_id, j.id FROM duetime_jobs j
          WHERE j.status IN ('running', 'cancel_requested') AND j.attempt_id IS NOT NULL
          ORDER BY j.id)
    GROUP BY worker_id
)
SELECT n.*, COALESCE(h.holding, '[]') AS holding
FROM duetime_nodes n LEFT JOIN held h ON h.worker_id = n.id
ORDER BY n.started_at DESC
LIMIT :limit;

-- name: database_now
-- this machine's clock as SQLite reads it (to the millisecond), in microseconds since the epoch
SELECT CAST(ROUND((julianday('now') - 2440587.5) * 86400000000.0) AS INTEGER) AS now;

-- name: insert_token
INSERT INTO duetime_tokens (tenant, role, name, prefix, secret_hash, created_at, expires_at)
VALUES (:tenant, :role, :name, :prefix, :secret_hash, :now, :expires_at);

-- name: select_token
SELECT * FROM duetime_tokens WHERE id = :id;

-- name: list_tokens
SELECT * FROM duetime_tokens
WHERE (:tenant IS NULL OR tenant = :tenant)
ORDER BY id;

-- name: revoke_token
UPDATE duetime_tokens SET revoked_at = COALESCE(revoked_at, :now) WHERE id = :id;

-- name: token_used
UPDATE duetime_tokens SET last_used_at = :now
WHERE secret_hash = :secret_hash AND (last_used_at IS NULL OR last_used_at < :before);

-- name: token_by_hash_read
SELECT * FROM duetime_tokens WHERE secret_hash = :secret_hash;

-- name: insert_session
INSERT INTO duetime_sessions (secret_hash, token_id, created_at, expires_at)
VALUES (:secret_hash, :token_id, :now, :expires_at);

-- name: session_token
SELECT t.* FROM duetime_sessions s JOIN duetime_tokens t ON t.id = s.token_id
WHERE s.secret_hash = :secret_hash AND s.expires_at > :now;

-- name: delete_session
DELETE FROM duetime_sessions WHERE secret_hash = :secret_hash;

-- name: delete_expired_sessions
DELETE FROM duetime_sessions WHERE expires_at <= :now;

-- name: job_counts
-- Both tables (a job that ended may be in the history table, migration 25). The jobs table's
-- counts read its status index; the history table has no index for them yet, and its part
-- reads the table (it is empty until jobs move: docs/history-plan.md, step 3).
SELECT status, queue, SUM(n) AS n FROM (
    SELECT status, queue, COUNT(*) AS n FROM duetime_jobs
    WHERE (:tenant IS NULL OR tenant = :tenant)
    GROUP BY status, queue
    UNION ALL
    SELECT status, queue, COUNT(*) AS n FROM duetime_jobs_done
    WHERE (:tenant IS NULL OR tenant = :tenant)
    GROUP BY status, queue) AS c
GROUP BY status, queue
ORDER BY status, queue;

-- name: oldest_overdue
SELECT min(due_at) AS due_at FROM duetime_jobs
WHERE status = 'scheduled' AND due_at <= :now
  AND (:tenant IS NULL OR tenant = :tenant);

-- name: earliest_due
-- (The claims of this dialect take no floor: the contract's statement, in the due index.)
SELECT min(due_at) AS due_at FROM duetime_jobs INDEXED BY duetime_jobs_next_due
WHERE status = 'scheduled' AND due_at <= :until
  AND (deadline_at IS NULL OR deadline_at > :until)
  AND (:all_queues OR queue IN (SELECT value FROM json_each(:queues)))
  AND (:all_tasks OR task IN (SELECT value FROM json_each(:tasks)))
  AND (:all_direct OR queue NOT IN (SELECT value FROM json_each(:outbox_queues)));

-- part: kept_successes
-- attempt_samples' successes kept on their jobs' rows, the same on both tables: those started
-- since `since`, newest first, to the limit
        WHERE status = 'succeeded' AND attempt_id IS NOT NULL AND started_at >= :since
          AND (:tenant IS NULL OR tenant = :tenant)
        ORDER BY started_at DESC, id DESC
        LIMIT :limit

-- name: attempt_samples
-- the newest attempts started since a point in time, for lag, throughput and failure figures:
-- the parts of duetime_all_attempts written out, each read from `since` on through its index
-- (the ended attempts' rows; the running jobs; the successes kept on their jobs' rows,
-- migration 24, in either table, each through its partial index of their start, named:
-- SQLite's planner, without statistics, took the status index and read every succeeded job;
-- those two parts, most of the rows, each stop at the limit), each with its job from either
-- table. Ties of a start go newest job first. (PostgreSQL's migration 29 dropped its indexes
-- of the successes' start; here they stay: a process of an earlier version names them.)
SELECT coalesce(j.task, d.task) AS task, coalesce(j.queue, d.queue) AS queue, a.status,
       a.error_category, a.due_at, a.started_at, a.finished_at
FROM (
    SELECT a.job_id, a.status, a.error_category, a.due_at, a.started_at, a.finished_at
    FROM duetime_attempts AS a
    WHERE a.started_at >= :since
    UNION ALL
    SELECT r.id, 'running', NULL, r.due_at, r.started_at, NULL
    FROM duetime_jobs AS r
    WHERE r.status IN ('running', 'cancel_requested') AND r.attempt_id IS NOT NULL
      AND r.started_at >= :since
    UNION ALL
    SELECT * FROM (
        SELECT id, 'succeeded', NULL, due_at, started_at, updated_at
        FROM duetime_jobs AS s INDEXED BY duetime_jobs_succeeded_started
@kept_successes
    )
    UNION ALL
    SELECT * FROM (
        SELECT id, 'succeeded', NULL, due_at, started_at, updated_at
        FROM duetime_jobs_done AS h INDEXED BY duetime_jobs_done_succeeded_started
@kept_successes
    )
) AS a
LEFT JOIN duetime_jobs j ON j.id = a.job_id
LEFT JOIN duetime_jobs_done d ON d.id = a.job_id
WHERE (j.id IS NOT NULL OR d.id IS NOT NULL)
  AND (:tenant IS NULL OR coalesce(j.tenant, d.tenant) = :tenant)
ORDER BY a.started_at DESC, a.job_id DESC
LIMIT :limit;

-- name: next_due
SELECT due_at FROM duetime_jobs INDEXED BY duetime_jobs_next_due
WHERE status = 'scheduled' AND due_at > :now AND due_at <= :until
  AND (:all_queues OR queue IN (SELECT value FROM json_each(:queues)))
ORDER BY due_at
LIMIT :limit;

-- name: prune
-- The candidates are picked once, into a temporary table (one writer: they stay as they are
-- until the transaction ends). No foreign key does it (migration 26): their attempts,
-- dependency links and outbox events go with them and their ticks are detached.
CREATE TEMP TABLE IF NOT EXISTS duetime_gone (id INTEGER PRIMARY KEY);
DELETE FROM temp.duetime_gone;
INSERT INTO temp.duetime_gone (id)
SELECT id FROM duetime_jobs INDEXED BY duetime_jobs_finished
WHERE status IN ('succeeded', 'cancelled', 'expired') AND updated_at < :before
ORDER BY updated_at
LIMIT :limit;
DELETE FROM duetime_attempts WHERE job_id IN (SELECT id FROM temp.duetime_gone);
DELETE FROM duetime_job_parents WHERE child_id IN (SELECT id FROM temp.duetime_gone);
DELETE FROM duetime_job_parents WHERE parent_id IN (SELECT id FROM temp.duetime_gone);
DELETE FROM duetime_outbox WHERE job_id IN (SELECT id FROM temp.duetime_gone);
UPDATE duetime_ticks SET job_id = NULL WHERE job_id IN (SELECT id FROM temp.duetime_gone);
DELETE FROM duetime_jobs WHERE id IN (SELECT id FROM temp.duetime_gone);

-- name: prune_done
-- prune's work on the history table (migration 25), the same way: the jobs that ended before
-- `before`, up to `limit` of them, with their attempts, links and outbox events, their ticks
-- detached.
CREATE TEMP TABLE IF NOT EXISTS duetime_gone (id INTEGER PRIMARY KEY);
DELETE FROM temp.duetime_gone;
INSERT INTO temp.duetime_gone (id)
SELECT id FROM duetime_jobs_done INDEXED BY duetime_jobs_done_finished
WHERE status IN ('succeeded', 'cancelled', 'expired') AND updated_at < :before
ORDER BY updated_at
LIMIT :limit;
DELETE FROM duetime_attempts WHERE job_id IN (SELECT id FROM temp.duetime_gone);
DELETE FROM duetime_job_parents WHERE child_id IN (SELECT id FROM temp.duetime_gone);
DELETE FROM duetime_job_parents WHERE parent_id IN (SELECT id FROM temp.duetime_gone);
DELETE FROM duetime_outbox WHERE job_id IN (SELECT id FROM temp.duetime_gone);
UPDATE duetime_ticks SET job_id = NULL WHERE job_id IN (SELECT id FROM temp.duetime_gone);
DELETE FROM duetime_jobs_done WHERE id IN (SELECT id FROM temp.duetime_gone);

-- name: queue_settings
SELECT queue, dispatch, paused, concurrency, max_backlog, weight, updated_at FROM duetime_queues
ORDER BY queue;

-- name: upsert_queue
INSERT INTO duetime_queues (queue, dispatch, paused, concurrency, max_backlog, weight,
    updated_at)
VALUES (:queue, COALESCE(:dispatch, 'direct'), COALESCE(:paused, 0),
    CASE WHEN :set_concurrency THEN :concurrency END,
    CASE WHEN :set_max_backlog THEN :max_backlog END, COALESCE(:weight, 1), :now)
ON CONFLICT (queue) DO UPDATE
SET dispatch = COALESCE(:dispatch, duetime_queues.dispatch),
    paused = COALESCE(:paused, duetime_queues.paused),
    concurrency = CASE WHEN :set_concurrency THEN :concurrency
                       ELSE duetime_queues.concurrency END,
    max_backlog = CASE WHEN :set_max_backlog THEN :max_backlog
                       ELSE duetime_queues.max_backlog END,
    weight = COALESCE(:weight, duetime_queues.weight),
    updated_at = :now;

-- name: tenant_settings
SELECT tenant, concurrency, max_backlog, weight, updated_at FROM duetime_tenants ORDER BY tenant;

-- name: upsert_tenant
INSERT INTO duetime_tenants (tenant, concurrency, max_backlog, weight, updated_at)
VALUES (:tenant, CASE WHEN :set_concurrency THEN :concurrency END,
    CASE WHEN :set_max_backlog THEN :max_backlog END, COALESCE(:weight, 1), :now)
ON CONFLICT (tenant) DO UPDATE
SET concurrency = CASE WHEN :set_concurrency THEN :concurrency
                       ELSE duetime_tenants.concurrency END,
    max_backlog = CASE WHEN :set_max_backlog THEN :max_backlog
                       ELSE duetime_tenants.max_backlog END,
    weight = COALESCE(:weight, duetime_tenants.weight),
    updated_at = :now;

-- name: lock_capped_queues
-- the write transaction already holds the file
SELECT queue, concurrency FROM duetime_queues WHERE concurrency IS NOT NULL ORDER BY queue;

-- name: lock_capped_tenants
-- the write transaction already holds the file
SELECT tenant, concurrency FROM duetime_tenants WHERE concurrency IS NOT NULL ORDER BY tenant;

-- name: running_counts
-- Through the running jobs, as expired_leases.
SELECT j.queue, j.tenant, COUNT(*) AS n
FROM duetime_jobs j
WHERE j.status IN ('running', 'cancel_requested') AND j.attempt_id IS NOT NULL
GROUP BY j.queue, j.tenant;

-- name: claim_candidates
-- A controlled claim's pick, read only (claim_chosen then takes the chosen ids). One branch
-- runs (every queue, one queue, or several), each on its claim-order index, as in claim.
-- With limits, as claim_pick_limited: not the jobs carrying a blocked key, nor the retries
-- carrying a retry_blocked one.
-- Only the priority classes of `classes` (Claimer.due_classes), as in claim: each class's
-- range of the index ends at now.
SELECT id, queue, tenant, limits, attempts FROM (
    SELECT id, queue, tenant, limits, attempts FROM duetime_jobs INDEXED BY duetime_jobs_due_any
    WHERE :all_queues AND status = 'scheduled' AND due_at <= :now
      AND priority IN (SELECT value FROM json_each(:classes))
      AND (deadline_at IS NULL OR deadline_at > :now)
      AND (:all_tasks OR task IN (SELECT value FROM json_each(:tasks)))
      AND (:open_queues OR queue NOT IN (SELECT value FROM json_each(:skip_queues)))
      AND (:open_tenants OR tenant NOT IN (SELECT value FROM json_each(:skip_tenants)))
      AND (:no_skip_ids OR id NOT IN (SELECT value FROM json_each(:skip_ids)))
      AND (limits IS NULL OR NOT EXISTS (
          SELECT 1 FROM json_each(:blocked) AS b WHERE instr(limits, b.value) > 0))
      AND (limits IS NULL OR attempts = 0 OR NOT EXISTS (
          SELECT 1 FROM json_each(:retry_blocked) AS r WHERE instr(limits, r.value) > 0))
    ORDER BY priority DESC, due_at, id
    LIMIT :limit)
UNION ALL
SELECT id, queue, tenant, limits, attempts FROM (
    SELECT id, queue, tenant, limits, attempts FROM duetime_jobs INDEXED BY duetime_jobs_due
    WHERE NOT :all_queues AND json_array_length(:queues) = 1
      AND queue = json_extract(:queues, '$[0]') AND status = 'scheduled' AND due_at <= :now
      AND priority IN (SELECT value FROM json_each(:classes))
      AND (deadline_at IS NULL OR deadline_at > :now)
      AND (:all_tasks OR task IN (SELECT value FROM json_each(:tasks)))
      AND (:open_queues OR queue NOT IN (SELECT value FROM json_each(:skip_queues)))
      AND (:open_tenants OR tenant NOT IN (SELECT value FROM json_each(:skip_tenants)))
      AND (:no_skip_ids OR id NOT IN (SELECT value FROM json_each(:skip_ids)))
      AND (limits IS NULL OR NOT EXISTS (
          SELECT 1 FROM json_each(:blocked) AS b WHERE instr(limits, b.value) > 0))
      AND (limits IS NULL OR attempts = 0 OR NOT EXISTS (
          SELECT 1 FROM json_each(:retry_blocked) AS r WHERE instr(limits, r.value) > 0))
    ORDER BY priority DESC, due_at, id
    LIMIT :limit)
UNION ALL
SELECT id, queue, tenant, limits, attempts FROM (
    SELECT id, queue, tenant, limits, attempts FROM duetime_jobs INDEXED BY duetime_jobs_due
    WHERE NOT :all_queues AND json_array_length(:queues) > 1
      AND queue IN (SELECT value FROM json_each(:queues))
      AND status = 'scheduled' AND due_at <= :now
      AND priority IN (SELECT value FROM json_each(:classes))
      AND (deadline_at IS NULL OR deadline_at > :now)
      AND (:all_tasks OR task IN (SELECT value FROM json_each(:tasks)))
      AND (:open_queues OR queue NOT IN (SELECT value FROM json_each(:skip_queues)))
      AND (:open_tenants OR tenant NOT IN (SELECT value FROM json_each(:skip_tenants)))
      AND (:no_skip_ids OR id NOT IN (SELECT value FROM json_each(:skip_ids)))
      AND (limits IS NULL OR NOT EXISTS (
          SELECT 1 FROM json_each(:blocked) AS b WHERE instr(limits, b.value) > 0))
      AND (limits IS NULL OR attempts = 0 OR NOT EXISTS (
          SELECT 1 FROM json_each(:retry_blocked) AS r WHERE instr(limits, r.value) > 0))
    ORDER BY priority DESC, due_at, id
    LIMIT :limit);

-- name: lower_candidates
-- A priority reservation's read (core/flow/share.PriorityShare): claim_candidates of the jobs of
-- priority below `below`, with their priority; the same claim-order indexes, which give
-- `priority < below` as a range.
SELECT id, priority, queue, tenant, limits, attempts FROM (
    SELECT id, priority, queue, tenant, limits, attempts FROM duetime_jobs INDEXED BY duetime_jobs_due_any
    WHERE :all_queues AND status = 'scheduled' AND due_at <= :now
      AND priority IN (SELECT value FROM json_each(:classes))
      AND (deadline_at IS NULL OR deadline_at > :now)
      AND (:all_tasks OR task IN (SELECT value FROM json_each(:tasks)))
      AND (:open_queues OR queue NOT IN (SELECT value FROM json_each(:skip_queues)))
      AND (:open_tenants OR tenant NOT IN (SELECT value FROM json_each(:skip_tenants)))
      AND priority < :below
    ORDER BY priority DESC, due_at, id
    LIMIT :limit)
UNION ALL
SELECT id, priority, queue, tenant, limits, attempts FROM (
    SELECT id, priority, queue, tenant, limits, attempts FROM duetime_jobs INDEXED BY duetime_jobs_due
    WHERE NOT :all_queues AND json_array_length(:queues) = 1
      AND queue = json_extract(:queues, '$[0]') AND status = 'scheduled' AND due_at <= :now
      AND priority IN (SELECT value FROM json_each(:classes))
      AND (deadline_at IS NULL OR deadline_at > :now)
      AND (:all_tasks OR task IN (SELECT value FROM json_each(:tasks)))
      AND (:open_queues OR queue NOT IN (SELECT value FROM json_each(:skip_queues)))
      AND (:open_tenants OR tenant NOT IN (SELECT value FROM json_each(:skip_tenants)))
      AND priority < :below
    ORDER BY priority DESC, due_at, id
    LIMIT :limit)
UNION ALL
SELECT id, priority, queue, tenant, limits, attempts FROM (
    SELECT id, priority, queue, tenant, limits, attempts FROM duetime_jobs INDEXED BY duetime_jobs_due
    WHERE NOT :all_queues AND json_array_length(:queues) > 1
      AND queue IN (SELECT value FROM json_each(:queues))
      AND status = 'scheduled' AND due_at <= :now
      AND priority IN (SELECT value FROM json_each(:classes))
      AND (deadline_at IS NULL OR deadline_at > :now)
      AND (:all_tasks OR task IN (SELECT value FROM json_each(:tasks)))
      AND (:open_queues OR queue NOT IN (SELECT value FROM json_each(:skip_queues)))
      AND (:open_tenants OR tenant NOT IN (SELECT value FROM json_each(:skip_tenants)))
      AND priority < :below
    ORDER BY priority DESC, due_at, id
    LIMIT :limit);

-- name: queue_candidates
-- The candidates of one queue (a weighted queue the claim's first read did not reach), of
-- the priority classes of `classes` (as claim_candidates: one range per class).
SELECT id, queue, tenant, limits, attempts FROM duetime_jobs INDEXED BY duetime_jobs_due
WHERE queue = :queue AND status = 'scheduled' AND due_at <= :now
  AND priority IN (SELECT value FROM json_each(:classes))
  AND (deadline_at IS NULL OR deadline_at > :now)
  AND (:all_tasks OR task IN (SELECT value FROM json_each(:tasks)))
  AND (:open_tenants OR tenant NOT IN (SELECT value FROM json_each(:skip_tenants)))
ORDER BY priority DESC, due_at, id
LIMIT :limit;

-- name: tenant_candidates
-- The candidates of one tenant (a weighted tenant the claim's first read did not reach, or
-- one of the tenants a claim rotates over), from its due jobs in claim order, of the
-- priority classes of `classes` (as claim_candidates: one range per class).
SELECT id, queue, tenant, limits, attempts FROM duetime_jobs INDEXED BY duetime_jobs_tenant_due
WHERE tenant = :tenant AND status = 'scheduled' AND due_at <= :now
  AND priority IN (SELECT value FROM json_each(:classes))
  AND (deadline_at IS NULL OR deadline_at > :now)
  AND (:all_queues OR queue IN (SELECT value FROM json_each(:queues)))
  AND (:all_tasks OR task IN (SELECT value FROM json_each(:tasks)))
  AND (:open_queues OR queue NOT IN (SELECT value FROM json_each(:skip_queues)))
ORDER BY priority DESC, due_at, id
LIMIT :limit;

-- name: next_due_tenant
-- The first tenant after `after` (code-point order) with a job due at now: one seek in the
-- tenant index, so the tenants with due work are found one read each.
SELECT tenant FROM duetime_jobs INDEXED BY duetime_jobs_tenant_due
WHERE status = 'scheduled' AND tenant > :after AND due_at <= :now
ORDER BY tenant
LIMIT 1;

-- name: claim_chosen
-- As claim, for the jobs of `ids` still scheduled, due, not past their deadline and of a queue
-- not paused now (under the write lock); the attempts' lease is lease_seconds when given (the relay's dispatch), else
-- each job's own.
CREATE TEMP TABLE IF NOT EXISTS duetime_claim (id INTEGER PRIMARY KEY);
DELETE FROM temp.duetime_claim;
INSERT INTO temp.duetime_claim (id)
SELECT id FROM duetime_jobs
WHERE id IN (SELECT value FROM json_each(:ids)) AND status = 'scheduled' AND due_at <= :now
  AND (deadline_at IS NULL OR deadline_at > :now)
  AND queue NOT IN (SELECT queue FROM duetime_queues WHERE paused);
UPDATE duetime_jobs
SET status = json_extract(:moves, '$.' || status), generation = generation + 1,
    claim_token = abs(random() % 9223372036854775807) + 1,
    attempts = attempts + 1, updated_at = :now,
    attempt_id = (SELECT next_id FROM duetime_attempt_ids WHERE id = 1)
        + (SELECT COUNT(*) FROM temp.duetime_claim c WHERE c.id < duetime_jobs.id),
    worker_id = :worker_id,
    lease_expires_at = :now + CAST(COALESCE(:lease_seconds, lease_seconds) * 1000000 AS INTEGER),
    started_at = :now, late_outcome = NULL, late_reported_at = NULL
WHERE id IN (SELECT id FROM temp.duetime_claim)
  AND json_type(:moves, '$.' || status) IS NOT NULL;
UPDATE duetime_attempt_ids SET next_id = next_id + (SELECT COUNT(*) FROM temp.duetime_claim)
WHERE id = 1;
-- as claim: the attempt is the job's row's (migration 22)
SELECT
@claimed_columns
       , 0 AS claim_epoch  -- last, as CLAIMED_COLUMNS and PostgreSQL's claims have it
FROM duetime_jobs j
WHERE j.id IN (SELECT id FROM temp.duetime_claim) AND j.status = 'running'
  AND j.updated_at = :now AND j.attempt_id IS NOT NULL
ORDER BY j.priority DESC, j.due_at, j.id;

-- name: lock_queue_backlog
-- the write transaction already holds the file
SELECT max_backlog FROM duetime_queues WHERE queue = :queue;

-- name: lock_tenant_backlog
-- the write transaction already holds the file
SELECT max_backlog FROM duetime_tenants WHERE tenant = :tenant;

-- name: queue_backlog
SELECT COUNT(*) AS n FROM duetime_jobs
WHERE queue = :queue AND status IN ('scheduled', 'waiting');

-- name: tenant_backlog
SELECT COUNT(*) AS n FROM duetime_jobs
WHERE tenant = :tenant AND status IN ('scheduled', 'waiting');

-- name: flow_counts
-- One read of the job counts index (status, tenant, queue, due_at: migration 12), covering.
SELECT queue, tenant,
       SUM(CASE WHEN status IN ('scheduled', 'waiting') THEN 1 ELSE 0 END) AS backlog,
       SUM(CASE WHEN status IN ('running', 'cancel_requested') THEN 1 ELSE 0 END) AS running,
       SUM(CASE WHEN status = 'scheduled' AND due_at <= :now THEN 1 ELSE 0 END) AS waiting,
       MIN(CASE WHEN status = 'scheduled' AND due_at <= :now THEN due_at END) AS oldest_due_at
FROM duetime_jobs
WHERE status IN ('scheduled', 'waiting', 'running', 'cancel_requested')
GROUP BY queue, tenant
ORDER BY queue, tenant;

-- name: dispatch_outbox
-- The claim of outbox-mode queues, for the relay, under the write lock: the picked ids go to a
-- temporary table, the jobs move, their attempts start held by `holder` (until a worker
-- accepts one) with a lease of lease_seconds, one outbox event per attempt is written in claim
-- order, and the events come back. The pick reads each outbox-mode queue's claim-order index,
-- one range per priority class of `classes` (Claimer.due_classes) ending at now: it stops at
-- the due rows, and sorts only those it merges across queues (SQLite took the status index
-- and sorted every scheduled job without them).
CREATE TEMP TABLE IF NOT EXISTS duetime_dispatch (id INTEGER PRIMARY KEY);
DELETE FROM temp.duetime_dispatch;
INSERT INTO temp.duetime_dispatch (id)
SELECT id FROM duetime_jobs INDEXED BY duetime_jobs_due
WHERE status = 'scheduled' AND priority IN (SELECT value FROM json_each(:classes))
  AND due_at <= :now AND (deadline_at IS NULL OR deadline_at > :now)
  AND queue IN (SELECT q.queue FROM duetime_queues q WHERE q.dispatch = 'outbox' AND NOT q.paused)
ORDER BY priority DESC, due_at, id
LIMIT :limit;
UPDATE duetime_jobs
SET status = json_extract(:moves, '$.' || status), generation = generation + 1,
    claim_token = abs(random() % 9223372036854775807) + 1,
    attempts = attempts + 1, updated_at = :now,
    attempt_id = (SELECT next_id FROM duetime_attempt_ids WHERE id = 1)
        + (SELECT COUNT(*) FROM temp.duetime_dispatch d WHERE d.id < duetime_jobs.id),
    worker_id = :holder, lease_expires_at = :now + CAST(:lease_seconds * 1000000 AS INTEGER),
    started_at = :now, late_outcome = NULL, late_reported_at = NULL
WHERE id IN (SELECT id FROM temp.duetime_dispatch)
  AND json_type(:moves, '$.' || status) IS NOT NULL;
UPDATE duetime_attempt_ids SET next_id = next_id + (SELECT COUNT(*) FROM temp.duetime_dispatch)
WHERE id = 1;
INSERT INTO duetime_outbox (job_id, attempt_id, queue, task, generation, version, created_at,
    claim_token, trace_context)
SELECT j.id, j.attempt_id, j.queue, j.task, j.generation, j.version, :now, j.claim_token,
       j.trace_context
FROM duetime_jobs j
WHERE j.id IN (SELECT id FROM temp.duetime_dispatch) AND j.status = 'running'
  AND j.updated_at = :now AND j.attempt_id IS NOT NULL
ORDER BY j.priority DESC, j.due_at, j.id;
SELECT o.* FROM duetime_outbox o
JOIN duetime_jobs j ON j.id = o.job_id AND j.generation = o.generation
WHERE o.job_id IN (SELECT id FROM temp.duetime_dispatch) AND o.created_at = :now
ORDER BY o.id;

-- name: insert_outbox_events
-- The events of attempts a controlled dispatch started (claim_chosen held by `holder`): one
-- per attempt of `attempt_ids` (of the jobs of `job_ids`) still running and held, written in
-- claim order; the events come back (under the write lock).
INSERT INTO duetime_outbox (job_id, attempt_id, queue, task, generation, version, created_at,
    claim_token, trace_context)
SELECT j.id, j.attempt_id, j.queue, j.task, j.generation, j.version, :now, j.claim_token,
       j.trace_context
FROM duetime_jobs j
WHERE j.id IN (SELECT value FROM json_each(:job_ids))
  AND j.attempt_id IN (SELECT value FROM json_each(:attempt_ids))
  AND j.worker_id = :holder AND j.status = 'running'
ORDER BY j.priority DESC, j.due_at, j.id;
SELECT * FROM duetime_outbox
WHERE attempt_id IN (SELECT value FROM json_each(:attempt_ids)) AND created_at = :now
ORDER BY id;

-- name: take_events
-- A relay leases up to `limit` unpublished events nobody holds (or whose relay lease ended,
-- or that it holds itself: taken again after a failed publish),
-- oldest first (under the write lock).
UPDATE duetime_outbox
SET relay_id = :relay_id, relay_until = :until
WHERE id IN (
    SELECT id FROM duetime_outbox
    WHERE published_at IS NULL
      AND (relay_until IS NULL OR relay_until <= :now OR relay_id = :relay_id)
    ORDER BY id
    LIMIT :limit)
RETURNING *;

-- name: mark_published
-- The events the broker confirmed; the attempts no worker accepted yet get their lease from
-- now, on their jobs' rows (migration 22; under the write lock).
UPDATE duetime_jobs
SET lease_expires_at = :now + CAST(:lease_seconds * 1000000 AS INTEGER)
WHERE attempt_id IN (SELECT attempt_id FROM duetime_outbox
                     WHERE id IN (SELECT value FROM json_each(:ids)) AND published_at IS NULL)
  AND id IN (SELECT job_id FROM duetime_outbox
             WHERE id IN (SELECT value FROM json_each(:ids)) AND published_at IS NULL)
  AND status IN ('running', 'cancel_requested') AND worker_id = :holder;
UPDATE duetime_outbox SET published_at = :now
WHERE id IN (SELECT value FROM json_each(:ids)) AND published_at IS NULL;

-- name: accept_dispatch
-- A worker takes a dispatched attempt, found by its job and claim token (never by its id
-- alone): only while the job still holds that generation and claim token (and that version,
-- unless cancellation was requested since) and no worker took it before; the job's deadline
-- has not passed; the attempt's lease becomes the job's own, from now (under the write lock).
-- The attempt is the job's row's (migration 22).
UPDATE duetime_jobs
SET worker_id = :worker_id, started_at = :now,
    lease_expires_at = :now + CAST(lease_seconds * 1000000 AS INTEGER)
WHERE id = :job_id AND generation = :generation AND claim_token = :claim_token
  AND ((status = 'running' AND version = :version) OR status = 'cancel_requested')
  AND (deadline_at IS NULL OR deadline_at > :now)
  AND attempt_id IS NOT NULL AND worker_id = :holder;

-- name: withdraw_dispatched
-- Under the write lock: the attempts to withdraw (held by `holder`, on their jobs' rows, the
-- job's status a key of `moves`) go to a temporary table; their unpublished events go, and
-- the jobs move back, their attempts cleared (a withdrawn attempt leaves no row); the moved
-- jobs come back.
CREATE TEMP TABLE IF NOT EXISTS duetime_withdraw (
    job_id INTEGER PRIMARY KEY, attempt_id INTEGER NOT NULL);
DELETE FROM temp.duetime_withdraw;
INSERT INTO temp.duetime_withdraw (job_id, attempt_id)
SELECT j.id, j.attempt_id
FROM duetime_jobs j
WHERE j.status IN ('running', 'cancel_requested')  -- through the running jobs
  AND j.attempt_id IS NOT NULL AND j.worker_id = :holder
  AND json_type(:moves, '$.' || j.status) IS NOT NULL
  AND (j.id IN (SELECT value FROM json_each(:ids))
       OR (:direct AND j.queue NOT IN (
             SELECT q.queue FROM duetime_queues q WHERE q.dispatch = 'outbox')));
DELETE FROM duetime_outbox
WHERE attempt_id IN (SELECT attempt_id FROM temp.duetime_withdraw) AND published_at IS NULL;
UPDATE duetime_jobs
SET status = json_extract(:moves, '$.' || status), attempts = attempts - 1,
    version = version + 1, updated_at = :now,
    attempt_id = NULL, worker_id = NULL, lease_expires_at = NULL, started_at = NULL,
    late_outcome = NULL, late_reported_at = NULL
WHERE id IN (SELECT job_id FROM temp.duetime_withdraw);
SELECT id, queue, status, due_at FROM duetime_jobs
WHERE id IN (SELECT job_id FROM temp.duetime_withdraw)
ORDER BY id;

-- name: select_claim
-- the attempt's columns first: a row's first column of a name is the one read by that name
-- (j.* has the job's own attempt_id)
SELECT a.id AS attempt_id, a.job_id AS attempt_job_id, a.generation AS attempt_generation,
       a.worker_id AS attempt_worker_id, a.status AS attempt_status,
       a.lease_expires_at AS attempt_lease_expires_at, a.started_at AS attempt_started_at,
       a.finished_at AS attempt_finished_at, a.error_category AS attempt_error_category,
       a.error_message AS attempt_error_message, a.error_traceback AS attempt_error_traceback,
       a.late_outcome AS attempt_late_outcome, a.late_reported_at AS attempt_late_reported_at,
       a.due_at AS attempt_due_at, a.claim_token AS attempt_claim_token,
       0 AS claim_epoch, j.*
FROM duetime_jobs j JOIN duetime_all_attempts a ON a.job_id = j.id
WHERE j.id = :job_id AND a.job_id = :job_id AND a.claim_token = :claim_token;

-- name: outbox_figures
SELECT queue,
       SUM(CASE WHEN published_at IS NULL THEN 1 ELSE 0 END) AS backlog,
       MIN(CASE WHEN published_at IS NULL THEN created_at END) AS oldest_created_at,
       SUM(CASE WHEN published_at >= :since THEN 1 ELSE 0 END) AS published
FROM duetime_outbox
WHERE published_at IS NULL OR published_at >= :since
GROUP BY queue
ORDER BY queue;

-- name: dispatched_figures
-- Through the running jobs (as expired_leases): the attempts held by the outbox, by their
-- job's queue.
SELECT j.queue, COUNT(*) AS dispatched, MIN(j.started_at) AS oldest_dispatched_at
FROM duetime_jobs j
WHERE j.status IN ('running', 'cancel_requested')
  AND j.attempt_id IS NOT NULL AND j.worker_id = :holder
GROUP BY j.queue
ORDER BY j.queue;

-- name: prune_outbox
DELETE FROM duetime_outbox
WHERE id IN (
    SELECT id FROM duetime_outbox
    WHERE published_at IS NOT NULL AND published_at < :before
    ORDER BY published_at
    LIMIT :limit);

-- Limits per dependency (store/sql/limits.py). The write lock already serialises the claims.

-- name: limit_names
SELECT name FROM duetime_limits ORDER BY name;

-- name: limit_rows
SELECT * FROM duetime_limits ORDER BY name;

-- name: lock_limits
-- the write transaction holds the file: the rows cannot change before it ends
SELECT * FROM duetime_limits ORDER BY name;

-- name: limit_running
SELECT j.limits AS limits, COUNT(*) AS running
FROM duetime_jobs j
WHERE j.status IN ('running', 'cancel_requested') AND j.limits IS NOT NULL
  AND j.attempt_id IS NOT NULL
  AND (j.lease_expires_at > :now
       -- dispatched to the broker, its event not yet published: running, though no lease runs
       OR (j.worker_id = :holder AND EXISTS (
           SELECT 1 FROM duetime_outbox o
           WHERE o.attempt_id = j.attempt_id AND o.published_at IS NULL)))
GROUP BY j.limits;

-- name: limit_waiting
SELECT limits, COUNT(*) AS waiting, MIN(due_at) AS oldest_due_at FROM duetime_jobs
WHERE status = 'scheduled' AND due_at <= :now AND limits IS NOT NULL
GROUP BY limits;

-- name: claim_pick_limited
-- The claim's pick when limits are set: the claim order (the partial index), without the
-- jobs carrying a blocked key, without the retries (attempts > 0) carrying a key of
-- retry_blocked (both JSON arrays of '"key"' strings, looked for in the limits text), and
-- without those already looked at (skip, a JSON array of ids). Only the priority classes of
-- `classes`, as in claim: each class's range of the index ends at now.
SELECT id, limits, attempts FROM duetime_jobs INDEXED BY duetime_jobs_due_any
WHERE status = 'scheduled' AND priority IN (SELECT value FROM json_each(:classes))
  AND due_at <= :now
  AND (deadline_at IS NULL OR deadline_at > :now)
  AND (:all_queues OR queue IN (SELECT value FROM json_each(:queues)))
  AND (:all_tasks OR task IN (SELECT value FROM json_each(:tasks)))
  AND (:all_direct OR queue NOT IN (SELECT value FROM json_each(:outbox_queues)))
  AND id NOT IN (SELECT value FROM json_each(:skip))
  AND (limits IS NULL
       OR NOT EXISTS (SELECT 1 FROM json_each(:blocked) AS b WHERE instr(limits, b.value) > 0))
  AND (limits IS NULL OR attempts = 0
       OR NOT EXISTS (SELECT 1 FROM json_each(:retry_blocked) AS r WHERE instr(limits, r.value) > 0))
ORDER BY priority DESC, due_at, id
LIMIT :limit;

-- name: save_limit_state
UPDATE duetime_limits
SET tokens = :tokens,
    refilled_at = :refilled_at,
    window_at = :window_at,
    cur_starts = :cur_starts,
    cur_retries = :cur_retries,
    cur_failures = :cur_failures,
    cur_successes = :cur_successes,
    prev_starts = :prev_starts,
    prev_retries = :prev_retries,
    prev_failures = :prev_failures,
    prev_successes = :prev_successes,
    breaker = :breaker,
    breaker_until = :breaker_until
WHERE name = :name;

-- name: upsert_limit
INSERT INTO duetime_limits (name, rate_count, rate_period, burst, concurrency, retry_budget,
    breaker_threshold, breaker_cooldown, updated_at)
VALUES (:name, :rate_count, :rate_period, :burst, :concurrency, :retry_budget,
    :breaker_threshold, :breaker_cooldown, :now)
ON CONFLICT (name) DO UPDATE
SET rate_count = excluded.rate_count, rate_period = excluded.rate_period,
    burst = excluded.burst, concurrency = excluded.concurrency,
    retry_budget = excluded.retry_budget, breaker_threshold = excluded.breaker_threshold,
    breaker_cooldown = excluded.breaker_cooldown, updated_at = excluded.updated_at;

-- name: delete_limit
DELETE FROM duetime_limits WHERE name = :name;

-- name: pause_limit
INSERT INTO duetime_limits (name, paused_until, updated_at) VALUES (:name, :until, :now)
ON CONFLICT (name) DO UPDATE
SET paused_until = MAX(COALESCE(duetime_limits.paused_until, excluded.paused_until),
                       excluded.paused_until);

-- name: lock_limits_named
SELECT * FROM duetime_limits WHERE name IN (SELECT value FROM json_each(:names)) ORDER BY name;

-- name: job_limits
SELECT id, limits FROM duetime_jobs WHERE id IN (SELECT value FROM json_each(:ids)) AND limits IS NOT NULL;

-- Dependencies (store/sql/dependencies.py; docs/workflows.md, "Dependencies") ---------------

-- name: lock_parents
-- the write transaction already holds the file; both tables (a job that ended may be in the
-- history table, migration 25)
SELECT id, tenant, status, 0 AS done FROM duetime_jobs
WHERE id IN (SELECT value FROM json_each(:ids))
UNION ALL
SELECT id, tenant, status, 1 AS done FROM duetime_jobs_done
WHERE id IN (SELECT value FROM json_each(:ids))
ORDER BY id;

-- name: restore_job
-- A job of the history table back in the jobs table, its row as it is (an operator's move of
-- an ended job: store/sql/jobs.py Jobs.transition).
INSERT INTO duetime_jobs (
@job_columns
)
SELECT
@job_columns
FROM duetime_jobs_done WHERE id = :id;
DELETE FROM duetime_jobs_done WHERE id = :id;

-- name: mark_parents
UPDATE duetime_jobs SET has_children = 1
WHERE id IN (SELECT value FROM json_each(:ids)) AND has_children IS NULL;

-- name: insert_links
INSERT INTO duetime_job_parents (child_id, parent_id, outcome)
SELECT json_extract(value, '$.child_id'), json_extract(value, '$.parent_id'),
       json_extract(value, '$.outcome')
FROM json_each(:batch);

-- name: set_dependency
UPDATE duetime_jobs
SET status = v.status, due_at = v.due_at, on_parent_failure = v.on_parent_failure,
    release_delay = v.release_delay, cancel_reason = v.cancel_reason,
    parents_left = v.parents_left
FROM (SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.status') AS status,
             json_extract(value, '$.parents_left') AS parents_left,
             json_extract(value, '$.due_at') AS due_at,
             json_extract(value, '$.on_parent_failure') AS on_parent_failure,
             json_extract(value, '$.release_delay') AS release_delay,
             json_extract(value, '$.cancel_reason') AS cancel_reason
      FROM json_each(:batch)) AS v
WHERE duetime_jobs.id = v.id;

-- name: ended_parents
-- of these jobs, the ended ones whose children have not been told
SELECT id, status FROM duetime_jobs
WHERE id IN (SELECT value FROM json_each(:ids)) AND has_children = 1
  AND status IN ('succeeded', 'dead', 'cancelled', 'expired')
ORDER BY id;

-- name: untold_children
SELECT child_id, parent_id FROM duetime_job_parents
WHERE parent_id IN (SELECT value FROM json_each(:ids)) AND outcome IS NULL
ORDER BY child_id, parent_id;

-- name: lock_children
SELECT id, status, queue, due_at, on_parent_failure, release_delay, has_children, parents_left
FROM duetime_jobs
WHERE id IN (SELECT value FROM json_each(:ids))
ORDER BY id;

-- name: tell_children
-- each parent's outcome on its links not told yet; the parents have no child left to tell
UPDATE duetime_job_parents
SET outcome = (SELECT json_extract(value, '$.outcome') FROM json_each(:batch)
               WHERE json_extract(value, '$.parent_id') = duetime_job_parents.parent_id)
WHERE parent_id IN (SELECT json_extract(value, '$.parent_id') FROM json_each(:batch))
  AND outcome IS NULL;
UPDATE duetime_jobs SET has_children = NULL
WHERE id IN (SELECT json_extract(value, '$.parent_id') FROM json_each(:batch));

-- name: count_parents_left
UPDATE duetime_jobs SET parents_left = v.parents_left
FROM (SELECT json_extract(value, '$.id') AS id,
             json_extract(value, '$.parents_left') AS parents_left
      FROM json_each(:batch)) AS v
WHERE duetime_jobs.id = v.id;

-- name: unblock_jobs
UPDATE duetime_jobs
SET status = json_extract(:moves, '$.' || status), due_at = v.due_at,
    version = version + 1, updated_at = :now
FROM (SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.due_at') AS due_at
      FROM json_each(:batch)) AS v
WHERE duetime_jobs.id = v.id AND json_type(:moves, '$.' || status) IS NOT NULL;

-- name: cancel_blocked
UPDATE duetime_jobs
SET status = json_extract(:moves, '$.' || status), cancel_reason = v.reason,
    version = version + 1, updated_at = :now
FROM (SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.reason') AS reason
      FROM json_each(:batch)) AS v
WHERE duetime_jobs.id = v.id AND json_type(:moves, '$.' || status) IS NOT NULL;

-- name: job_parents
-- Both tables (a job that ended may be in the history table, migration 25); each part stops
-- at the limit, in id order.
SELECT id, status FROM (
    SELECT * FROM (
        SELECT j.id, j.status FROM duetime_job_parents l JOIN duetime_jobs j ON j.id = l.parent_id
        WHERE l.child_id = :id
        ORDER BY j.id
        LIMIT :limit) AS hot
    UNION ALL
    SELECT * FROM (
        SELECT d.id, d.status FROM duetime_job_parents l
        JOIN duetime_jobs_done d ON d.id = l.parent_id
        WHERE l.child_id = :id
        ORDER BY d.id
        LIMIT :limit) AS done) AS r
ORDER BY id
LIMIT :limit;

-- name: parent_results
-- Both tables (a job that ended may be in the history table, migration 25).
SELECT j.id, j.result FROM duetime_job_parents l JOIN duetime_jobs j ON j.id = l.parent_id
WHERE l.child_id = :id AND j.status = 'succeeded'
UNION ALL
SELECT d.id, d.result FROM duetime_job_parents l JOIN duetime_jobs_done d ON d.id = l.parent_id
WHERE l.child_id = :id AND d.status = 'succeeded'
ORDER BY id;

-- name: job_children
-- Both tables (a job that ended may be in the history table, migration 25); each part stops
-- at the limit, in id order.
SELECT id, status FROM (
    SELECT * FROM (
        SELECT j.id, j.status FROM duetime_job_parents l JOIN duetime_jobs j ON j.id = l.child_id
        WHERE l.parent_id = :id
        ORDER BY j.id
        LIMIT :limit) AS hot
    UNION ALL
    SELECT * FROM (
        SELECT d.id, d.status FROM duetime_job_parents l
        JOIN duetime_jobs_done d ON d.id = l.child_id
        WHERE l.parent_id = :id
        ORDER BY d.id
        LIMIT :limit) AS done) AS r
ORDER BY id
LIMIT :limit;

-- name: unstarted_parents
SELECT id FROM duetime_jobs
WHERE schedule_id = :schedule_id AND status IN ('scheduled', 'waiting', 'cancelled')
  AND generation = 0 AND has_children = 1 AND (:origin IS NULL OR origin = :origin)
ORDER BY id;

-- name: lock_sequence
-- Under the write lock already: the sequence's row, made if absent.
INSERT INTO duetime_sequences (tenant, sequence_key) VALUES (:tenant, :sequence_key)
ON CONFLICT DO NOTHING;

-- name: drop_sequence
DELETE FROM duetime_sequences WHERE tenant = :tenant AND sequence_key = :sequence_key;

-- name: sequence_busy
-- Both tables (a job that ended may be in the history table, migration 25): of the
-- jobs that ended, a dead one that holds its sequence keeps it busy.
SELECT id FROM duetime_jobs INDEXED BY duetime_jobs_sequence
WHERE tenant = :tenant AND sequence_key = :sequence_key AND id <> :exclude
  AND (status IN ('scheduled', 'running', 'cancel_requested', 'parked')
       OR (:waiting = 1 AND status = 'waiting')
       OR (status = 'dead' AND sequence_hold = 1))
UNION ALL
SELECT id FROM duetime_jobs_done INDEXED BY duetime_jobs_done_held
WHERE tenant = :tenant AND sequence_key = :sequence_key AND id <> :exclude
  AND status = 'dead' AND sequence_hold = 1
LIMIT 1;

-- name: sequence_next
SELECT id, queue, due_at FROM duetime_jobs INDEXED BY duetime_jobs_sequence
WHERE tenant = :tenant AND sequence_key = :sequence_key AND status = 'waiting'
  AND id > :after
ORDER BY id
LIMIT 1;

-- name: release_sequence_job
UPDATE duetime_jobs
SET status = json_extract(:moves, '$.' || status), version = version + 1, updated_at = :now
WHERE id = :id AND json_type(:moves, '$.' || status) IS NOT NULL;

-- name: rejoin_sequence
UPDATE duetime_jobs
SET status = 'waiting', version = version + 1, updated_at = :now
WHERE id = :id AND status = 'scheduled' AND sequence_key IS NOT NULL;

-- name: sequence_keys_of
SELECT DISTINCT tenant, sequence_key FROM duetime_jobs
WHERE id IN (SELECT value FROM json_each(:ids)) AND sequence_key IS NOT NULL;

-- name: sequence_ahead
-- Both tables (a job that ended may be in the history table, migration 25): of the
-- jobs that ended, a dead one that holds its sequence is ahead.
SELECT (
    SELECT COUNT(*) FROM duetime_jobs INDEXED BY duetime_jobs_sequence
    WHERE tenant = :tenant AND sequence_key = :sequence_key AND id < :id
      AND (status IN ('scheduled', 'waiting', 'running', 'cancel_requested', 'parked')
           OR (status = 'dead' AND sequence_hold = 1))
) + (
    SELECT COUNT(*) FROM duetime_jobs_done INDEXED BY duetime_jobs_done_held
    WHERE tenant = :tenant AND sequence_key = :sequence_key AND id < :id
      AND status = 'dead' AND sequence_hold = 1
) AS ahead;

-- name: clear_unique
UPDATE duetime_jobs SET unique_key = NULL
WHERE tenant = :tenant AND unique_key = :unique_key AND unique_until <= :now;

-- name: job_by_unique
SELECT * FROM duetime_jobs WHERE tenant = :tenant AND unique_key = :unique_key;
