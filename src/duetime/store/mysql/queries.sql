-- The MariaDB / MySQL dialect's named statements; their contracts are in store/statements.py.
-- Instants are DATETIME(6) in UTC; a list arrives as `(a, b, ...)` (`(NULL)` when empty), so
-- write `IN %(ids)s`: the optimizer uses the key for a literal list, not for a JSON_TABLE. Transactions are
-- READ COMMITTED; every writer locks a job's row before its attempt's row. MySQL has no
-- RETURNING: a statement's effect is read back by a following SELECT.

-- name: migrations_table_exists
SELECT 1 AS found FROM information_schema.tables
WHERE table_schema = DATABASE() AND table_name = 'duetime_migrations';

-- name: create_migrations_table
CREATE TABLE IF NOT EXISTS duetime_migrations (
    version INT NOT NULL PRIMARY KEY, name VARCHAR(200) NOT NULL,
    applied_at DATETIME(6) NOT NULL) ENGINE = InnoDB;

-- name: lock_migrations
-- a named lock of this session: it outlives the commits each DDL statement makes
SELECT GET_LOCK('duetime.migrate', 600) AS locked;

-- name: unlock_migrations
SELECT RELEASE_LOCK('duetime.migrate') AS released;

-- name: schema_version
SELECT COALESCE(MAX(version), 0) AS version FROM duetime_migrations;

-- name: insert_migration
INSERT INTO duetime_migrations (version, name, applied_at)
VALUES (%(version)s, %(name)s, %(now)s);

-- name: reserve_attempt_ids
-- A block of `count` attempt ids for this process (store/sql/attempt_ids.py), in a short
-- transaction of its own: the counter row is locked only until it commits. No row: the
-- counter is missing (the caller refuses to guess).
SELECT next_id AS first_id FROM duetime_attempt_ids WHERE id = 1 FOR UPDATE;
UPDATE duetime_attempt_ids SET next_id = next_id + %(count)s WHERE id = 1;

-- name: reserve_job_ids
-- AUTO_INCREMENT hands out the ids (never twice, whatever commits); the rows are this
-- connection's own and are gone again when the transaction ends. JSON_TABLE makes `count` rows.
-- The delete reads this connection's rows by their owner's index, forced: a scan of the table
-- (the plan its statistics chose once other batches' rows were in it) waited for the row
-- locks of every other batch being reserved, and two batches reserved at once deadlocked.
-- The multi-table form, because MariaDB takes no index hint in a single-table DELETE.
INSERT INTO duetime_job_ids (owner)
SELECT CONNECTION_ID()
FROM JSON_TABLE(CONCAT('[', REPEAT('0,', %(count)s - 1), '0]'),
                '$[*]' COLUMNS (n FOR ORDINALITY)) AS seq;
SELECT JSON_ARRAYAGG(id) AS ids FROM duetime_job_ids WHERE owner = CONNECTION_ID();
DELETE reserved FROM duetime_job_ids AS reserved FORCE INDEX (duetime_job_ids_owner)
WHERE reserved.owner = CONNECTION_ID();

-- name: enqueue_one
-- The id from duetime_job_ids (LAST_INSERT_ID() keeps it: the jobs' insert generates none).
INSERT INTO duetime_job_ids (owner) VALUES (CONNECTION_ID());
INSERT INTO duetime_jobs (id, tenant, queue, task, args, priority, due_at, deadline_at, status,
    max_attempts, retry_base, retry_cap, lease_seconds, timeout_seconds, idempotency_key,
    request_hash, business_key, created_at, updated_at, schedule_id, schedule_name, nominal_at,
    covers, origin, limits, trace_context,
    sequence_key, sequence_hold, unique_key, unique_until)
VALUES (LAST_INSERT_ID(), %(tenant)s, %(queue)s, %(task)s, %(args)s, %(priority)s,
    %(due_at)s, %(deadline_at)s, %(status)s, %(max_attempts)s, %(retry_base)s, %(retry_cap)s,
    %(lease_seconds)s, %(timeout_seconds)s, %(idempotency_key)s, %(request_hash)s,
    %(business_key)s, %(now)s, %(now)s, %(schedule_id)s, %(schedule_name)s, %(nominal_at)s,
    %(covers)s, %(origin)s, %(limits)s, %(trace_context)s,
    %(sequence_key)s, %(sequence_hold)s, %(unique_key)s, %(unique_until)s)
ON DUPLICATE KEY UPDATE id = id;
SELECT id FROM duetime_jobs WHERE id = LAST_INSERT_ID();
DELETE FROM duetime_job_ids WHERE id = LAST_INSERT_ID();

-- name: insert_job
INSERT INTO duetime_jobs (id, tenant, queue, task, args, priority, due_at, deadline_at, status,
    max_attempts, retry_base, retry_cap, lease_seconds, timeout_seconds, idempotency_key,
    request_hash, business_key, created_at, updated_at, schedule_id, schedule_name, nominal_at,
    covers, origin, limits, trace_context)
VALUES (%(id)s, %(tenant)s, %(queue)s, %(task)s, %(args)s, %(priority)s, %(due_at)s,
    %(deadline_at)s, %(status)s, %(max_attempts)s, %(retry_base)s, %(retry_cap)s,
    %(lease_seconds)s, %(timeout_seconds)s, %(idempotency_key)s, %(request_hash)s,
    %(business_key)s, %(now)s, %(now)s, %(schedule_id)s, %(schedule_name)s, %(nominal_at)s,
    %(covers)s, %(origin)s, %(limits)s, %(trace_context)s)
ON DUPLICATE KEY UPDATE id = id;

-- name: insert_new_jobs
INSERT INTO duetime_jobs (id, tenant, queue, task, args, priority, due_at, deadline_at, status,
    max_attempts, retry_base, retry_cap, lease_seconds, timeout_seconds, idempotency_key,
    request_hash, business_key, created_at, updated_at, schedule_id, schedule_name, nominal_at,
    covers, origin, limits, trace_context)
VALUES (%(id)s, %(tenant)s, %(queue)s, %(task)s, %(args)s, %(priority)s, %(due_at)s,
    %(deadline_at)s, %(status)s, %(max_attempts)s, %(retry_base)s, %(retry_cap)s,
    %(lease_seconds)s, %(timeout_seconds)s, %(idempotency_key)s, %(request_hash)s,
    %(business_key)s, %(now)s, %(now)s, %(schedule_id)s, %(schedule_name)s, %(nominal_at)s,
    %(covers)s, %(origin)s, %(limits)s, %(trace_context)s);

-- name: insert_job_batch
-- enqueue_many's jobs: what they share as parameters, what differs in `rows`, a JSON array of
-- [id, args (JSON text), due_at (null: the shared one), business_key]. One statement.
INSERT INTO duetime_jobs (id, tenant, queue, task, args, priority, due_at, deadline_at, status,
    max_attempts, retry_base, retry_cap, lease_seconds, timeout_seconds, idempotency_key,
    request_hash, business_key, created_at, updated_at, schedule_id, schedule_name, nominal_at,
    covers, origin, limits, trace_context)
SELECT r.id, %(tenant)s, %(queue)s, %(task)s, r.args, %(priority)s,
    COALESCE(r.due_at, %(due_at)s), %(deadline_at)s, %(status)s, %(max_attempts)s,
    %(retry_base)s, %(retry_cap)s, %(lease_seconds)s, %(timeout_seconds)s, NULL,
    %(request_hash)s, r.business_key, %(now)s, %(now)s, NULL, NULL, NULL, NULL, %(origin)s,
    %(limits)s, %(trace_context)s
FROM JSON_TABLE(%(rows)s, '$[*]' COLUMNS (
        id BIGINT PATH '$[0]',
        args LONGTEXT PATH '$[1]',
        due_at DATETIME(6) PATH '$[2]',
        business_key TEXT PATH '$[3]')) AS r;

-- name: jobs_by_ids
-- Both tables (a job that ended may be in the history table, migration 25).
SELECT
@job_columns
FROM duetime_jobs WHERE id IN %(ids)s
UNION ALL
SELECT
@job_columns
FROM duetime_jobs_done WHERE id IN %(ids)s;

-- name: jobs_by_keys
-- a locking read: it sees the newest committed rows even inside an application's REPEATABLE
-- READ transaction (transactional enqueue), where the insert's duplicate check sees them too
SELECT * FROM duetime_jobs
WHERE tenant IN %(tenants)s AND idempotency_key IN %(keys)s
LOCK IN SHARE MODE;

-- name: select_job
-- Both tables (a job that ended may be in the history table, migration 25).
SELECT
@job_columns
FROM duetime_jobs WHERE id = %(id)s AND (%(tenant)s IS NULL OR tenant = %(tenant)s)
UNION ALL
SELECT
@job_columns
FROM duetime_jobs_done WHERE id = %(id)s AND (%(tenant)s IS NULL OR tenant = %(tenant)s);

-- name: select_attempts
-- every attempt, the running one from its job's row (migration 22: duetime_all_attempts)
SELECT * FROM duetime_all_attempts WHERE job_id = %(id)s ORDER BY generation;

-- name: select_attempts_of_jobs
SELECT * FROM duetime_all_attempts WHERE job_id IN %(ids)s
ORDER BY job_id, generation;

-- part: listed
-- list_jobs' filters, the same on both tables
WHERE (%(tenant)s IS NULL OR tenant = %(tenant)s)
  AND (%(status)s IS NULL OR status = %(status)s)
  AND (%(task)s IS NULL OR task = %(task)s)
  AND (%(queue)s IS NULL OR queue = %(queue)s)
  AND (%(schedule_id)s IS NULL OR schedule_id = %(schedule_id)s)
  AND (%(before_id)s IS NULL OR id < %(before_id)s)
  AND (%(due_after)s IS NULL OR due_at >= %(due_after)s)
  AND (%(due_before)s IS NULL OR due_at < %(due_before)s)
  AND (%(business_key)s IS NULL OR business_key = %(business_key)s)
  AND (%(idempotency_key)s IS NULL OR idempotency_key = %(idempotency_key)s)
  AND (%(args_like)s IS NULL
       OR LOWER(CAST(args AS CHAR CHARACTER SET utf8mb4)) LIKE %(args_like)s ESCAPE '!')

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
        LIMIT %(limit)s) AS hot
    UNION ALL
    SELECT * FROM (
        SELECT
@job_columns
        FROM duetime_jobs_done
@listed
        ORDER BY id DESC
        LIMIT %(limit)s) AS done) AS r
ORDER BY id DESC
LIMIT %(limit)s;

-- name: occurrence_id
-- Both tables (a job that ended may be in the history table, migration 25).
SELECT id FROM duetime_jobs WHERE schedule_id = %(schedule_id)s AND nominal_at = %(nominal_at)s
UNION ALL
SELECT id FROM duetime_jobs_done WHERE schedule_id = %(schedule_id)s AND nominal_at = %(nominal_at)s;

-- name: claim
-- The picked ids (FOR UPDATE SKIP LOCKED) go to a temporary table of this connection, then the
-- jobs move, their attempts start, and the claimed rows come back. One branch of the pick runs
-- (every queue, or the queues named); FORCE INDEX: the claim-order index, so the scan stops
-- after `limit` due rows (the optimizer may otherwise range-read every due row and sort them,
-- which a burst of due jobs makes slow). Only tasks of `tasks` are taken (any task when
-- all_tasks): a worker claims only what it has handlers for. Jobs of outbox_queues are left
-- to the relay (dispatch_outbox); all_direct when there is none. Jobs of a paused queue are
-- taken out of the pick as the queue's row says now (not the store's copy of the control rows:
-- a pause made elsewhere holds at once); their rows stay as they were, free at the commit.
-- Only the priority classes of `classes` (Claimer.due_classes: every class of the scheduled
-- jobs, as neg_priority): named, each class's range of the index ends at now, so a claim that
-- finds fewer due jobs than its limit stops at the due ones (no skip scan in MariaDB: without
-- them the range runs on through every job due later).
CREATE TEMPORARY TABLE IF NOT EXISTS duetime_claim (id BIGINT NOT NULL PRIMARY KEY);
DELETE FROM duetime_claim;
INSERT INTO duetime_claim (id)
(SELECT id FROM duetime_jobs FORCE INDEX (duetime_jobs_due_any)
 WHERE %(all_queues)s AND status = 'scheduled' AND neg_priority IN %(classes)s
   AND due_at <= %(now)s
   AND (deadline_at IS NULL OR deadline_at > %(now)s)
   AND (%(all_tasks)s OR task IN %(tasks)s)
   AND (%(all_direct)s OR queue NOT IN %(outbox_queues)s)
 ORDER BY neg_priority, due_at, id
 LIMIT %(limit)s
 FOR UPDATE SKIP LOCKED)
UNION ALL
(SELECT id FROM duetime_jobs FORCE INDEX (duetime_jobs_due)
 WHERE NOT %(all_queues)s AND queue IN %(queues)s AND status = 'scheduled'
   AND neg_priority IN %(classes)s AND due_at <= %(now)s AND (deadline_at IS NULL OR deadline_at > %(now)s)
   AND (%(all_tasks)s OR task IN %(tasks)s)
   AND (%(all_direct)s OR queue NOT IN %(outbox_queues)s)
 ORDER BY neg_priority, due_at, id
 LIMIT %(limit)s
 FOR UPDATE SKIP LOCKED);
-- a paused queue's jobs: left out as its row says now, read without a lock (SELECT ... INTO is
-- a consistent read; a DML statement reading the queues would share-lock their rows)
SELECT JSON_ARRAYAGG(queue) INTO @duetime_paused FROM duetime_queues WHERE paused;
DELETE c FROM duetime_claim c
JOIN duetime_jobs j ON j.id = c.id
WHERE JSON_CONTAINS(COALESCE(@duetime_paused, '[]'), JSON_QUOTE(j.queue));
-- the attempts start on their jobs' rows (migration 22), their ids the block this process
-- reserved (first_attempt_id on, store/sql/attempt_ids.py) in job id order; status goes last
-- (MySQL assigns left to right)
UPDATE duetime_jobs AS j
JOIN (SELECT id, ROW_NUMBER() OVER (ORDER BY id) AS n FROM duetime_claim) AS c ON c.id = j.id
SET j.generation = j.generation + 1, j.attempts = j.attempts + 1, j.updated_at = %(now)s,
    j.claim_token = CAST(CONV(LEFT(MD5(CONCAT(UUID(), RAND())), 15), 16, 10) AS UNSIGNED) + 1,
    j.attempt_id = %(first_attempt_id)s + c.n - 1, j.worker_id = %(worker_id)s,
    j.lease_expires_at = DATE_ADD(%(now)s, INTERVAL FLOOR(j.lease_seconds * 1000000) MICROSECOND),
    j.started_at = %(now)s, j.late_outcome = NULL, j.late_reported_at = NULL,
    j.status = JSON_UNQUOTE(JSON_EXTRACT(%(moves)s, CONCAT('$.', j.status)))
WHERE JSON_EXTRACT(%(moves)s, CONCAT('$.', j.status)) IS NOT NULL;
SELECT
@claimed_columns
       , 0 AS claim_epoch  -- last, as CLAIMED_COLUMNS and PostgreSQL's claims have it
FROM duetime_jobs j
WHERE j.id IN (SELECT id FROM duetime_claim) AND j.status = 'running'
  AND j.attempt_id IS NOT NULL
ORDER BY j.priority DESC, j.due_at, j.id;

-- name: due_class_bounds
-- The first and the last priority class of the scheduled jobs in claim order (neg_priority;
-- NULL: none), each read from the claim-order index's end ("Select tables optimized away").
SELECT MIN(neg_priority) AS top_class, MAX(neg_priority) AS end_class
FROM duetime_jobs WHERE status = 'scheduled';

-- name: due_class_after
-- The next priority class of the scheduled jobs after `after` in claim order, one seek.
SELECT MIN(neg_priority) AS class FROM duetime_jobs
WHERE status = 'scheduled' AND neg_priority > %(after)s;

-- name: claim_queues
-- The claim above reads each named queue through its own index already.
@claim

-- name: renew_leases
-- The leases of `leases` (job_id, claim_token): an attempt is renewed only while its job
-- holds its claim token and runs it. The running attempt is the job's row's (migration 22):
-- the jobs' rows are locked in id order, then only their lease_expires_at changes; no
-- attempt row is written.
SELECT j.id FROM duetime_jobs j
JOIN JSON_TABLE(%(leases)s, '$[*]' COLUMNS (
        job_id BIGINT PATH '$.job_id', claim_token BIGINT PATH '$.claim_token')) AS v ON v.job_id = j.id AND v.claim_token = j.claim_token
ORDER BY j.id
FOR UPDATE;
UPDATE JSON_TABLE(%(leases)s, '$[*]' COLUMNS (
        job_id BIGINT PATH '$.job_id', claim_token BIGINT PATH '$.claim_token')) AS v
STRAIGHT_JOIN duetime_jobs AS j ON j.id = v.job_id AND j.claim_token = v.claim_token
SET j.lease_expires_at = DATE_ADD(%(now)s, INTERVAL FLOOR(j.lease_seconds * 1000000) MICROSECOND)
WHERE j.status IN ('running', 'cancel_requested') AND j.attempt_id IS NOT NULL;

-- name: lease_states
-- Each job by its id and claim token, with the attempt it runs (its row's, migration 22).
SELECT j.attempt_id, j.id AS job_id, j.generation, j.claim_token, j.lease_expires_at,
       j.status AS job_status
FROM JSON_TABLE(%(leases)s, '$[*]' COLUMNS (
        job_id BIGINT PATH '$.job_id', claim_token BIGINT PATH '$.claim_token')) AS v
STRAIGHT_JOIN duetime_jobs j ON j.id = v.job_id AND j.claim_token = v.claim_token
WHERE j.status IN ('running', 'cancel_requested') AND j.attempt_id IS NOT NULL;

-- name: lock_jobs
-- The jobs' rows locked in id order, each with the attempt it runs (on its row: migration
-- 22), if any.
SELECT j.id, j.generation, j.claim_token, j.status, j.queue, j.has_children, j.tenant, j.sequence_key,
       CASE WHEN j.attempt_id IS NOT NULL THEN 'running' END AS attempt_status,
       j.lease_expires_at AS attempt_lease_expires_at
FROM duetime_jobs j
WHERE j.id IN %(ids)s
ORDER BY j.id
FOR UPDATE;

-- name: finish_held
-- (Unused here: a batch is finished the long way, lock_jobs then finish_jobs;
-- Driver.finishes_held.)
SELECT 0 AS moved, NULL AS follow_ups;

-- name: finish_jobs
-- Each ended attempt's row is inserted, once, with its outcome, from its job's row (fenced by
-- generation, claim token, status, the attempt it runs and, for a reap, the expired lease;
-- the caller locked the rows, lock_jobs); then those jobs move and their current-attempt
-- columns are cleared (migration 22), under the same fence. MySQL assigns left to right and
-- later expressions see earlier results: the fence's columns go last.
INSERT INTO duetime_attempts (id, job_id, generation, claim_token, worker_id, status,
    lease_expires_at, started_at, finished_at, error_category, error_message, error_traceback,
    late_outcome, late_reported_at, due_at)
SELECT j.attempt_id, j.id, j.generation, j.claim_token, j.worker_id, v.status,
       j.lease_expires_at, j.started_at, %(now)s, v.error_category, v.error_message,
       v.error_traceback, j.late_outcome, j.late_reported_at, j.due_at
FROM JSON_TABLE(%(batch)s, '$[*]' COLUMNS (
        job_id BIGINT PATH '$.job_id',
        generation BIGINT PATH '$.generation',
        claim_token BIGINT PATH '$.claim_token',
        from_status VARCHAR(20) PATH '$.from_status',
        only_if_expired BOOLEAN PATH '$.only_if_expired',
        status VARCHAR(20) PATH '$.status',
        error_category VARCHAR(50) PATH '$.error_category',
        error_message LONGTEXT PATH '$.error_message',
        error_traceback LONGTEXT PATH '$.error_traceback')) AS v
STRAIGHT_JOIN duetime_jobs AS j ON j.id = v.job_id
WHERE j.generation = v.generation AND j.claim_token = v.claim_token
  AND j.status = v.from_status COLLATE utf8mb4_bin AND j.attempt_id IS NOT NULL
  AND (NOT v.only_if_expired OR j.lease_expires_at <= %(now)s)
ORDER BY j.id;
UPDATE duetime_jobs AS j
JOIN JSON_TABLE(%(batch)s, '$[*]' COLUMNS (
        job_id BIGINT PATH '$.job_id',
        generation BIGINT PATH '$.generation',
        claim_token BIGINT PATH '$.claim_token',
        from_status VARCHAR(20) PATH '$.from_status',
        to_status VARCHAR(20) PATH '$.to_status',
        due_at DATETIME(6) PATH '$.due_at',
        only_if_expired BOOLEAN PATH '$.only_if_expired')) AS v ON j.id = v.job_id
SET j.due_at = COALESCE(v.due_at, j.due_at), j.updated_at = %(now)s,
    j.worker_id = NULL, j.started_at = NULL, j.late_outcome = NULL, j.late_reported_at = NULL,
    j.status = v.to_status, j.lease_expires_at = NULL, j.attempt_id = NULL
WHERE j.generation = v.generation AND j.claim_token = v.claim_token
  AND j.status = v.from_status COLLATE utf8mb4_bin AND j.attempt_id IS NOT NULL
  AND (NOT v.only_if_expired OR j.lease_expires_at <= %(now)s);

-- name: keep_results
-- A success's result and an attempt's last progress (docs/workflows.md), for the one job the
-- finish just moved (fenced as the finish was; run only for outcomes that carry either).
-- Every expression reads parameters only: MySQL assigns left to right.
UPDATE duetime_jobs
SET result = COALESCE(%(result)s, result),
    progress_message = CASE WHEN %(progress)s IS NULL THEN progress_message
        ELSE %(progress_message)s END,
    progress_at = CASE WHEN %(progress)s IS NULL THEN progress_at ELSE %(now)s END,
    progress = COALESCE(%(progress)s, progress)
WHERE id = %(job_id)s AND generation = %(generation)s AND claim_token = %(claim_token)s
  AND status = %(to_status)s;

-- name: record_progress
-- A running attempt's progress, fenced by its generation and claim token.
UPDATE duetime_jobs
SET progress = %(progress)s, progress_message = %(progress_message)s, progress_at = %(now)s
WHERE id = %(job_id)s AND generation = %(generation)s AND claim_token = %(claim_token)s
  AND status IN ('running', 'cancel_requested');

-- name: late_reports
-- On the attempt of each job with that generation and claim token (none: nothing recorded):
-- the job's row while the attempt still runs there (migration 22; its row takes the report at
-- its end), else the attempt's row. A job in the history table (migration 25) has ended, and
-- MariaDB/MySQL keep no success on a job's row (docs/stores.md): its attempts are all rows.
UPDATE duetime_jobs AS j
JOIN JSON_TABLE(%(batch)s, '$[*]' COLUMNS (
        job_id BIGINT PATH '$.job_id',
        generation BIGINT PATH '$.generation',
        claim_token BIGINT PATH '$.claim_token',
        outcome VARCHAR(20) PATH '$.outcome')) AS v
    ON j.id = v.job_id AND j.generation = v.generation
SET j.late_outcome = v.outcome, j.late_reported_at = %(now)s
WHERE j.claim_token = v.claim_token AND j.attempt_id IS NOT NULL;
UPDATE duetime_attempts AS a
JOIN JSON_TABLE(%(batch)s, '$[*]' COLUMNS (
        job_id BIGINT PATH '$.job_id',
        generation BIGINT PATH '$.generation',
        claim_token BIGINT PATH '$.claim_token',
        outcome VARCHAR(20) PATH '$.outcome')) AS v
    ON a.job_id = v.job_id AND a.generation = v.generation
SET a.late_outcome = v.outcome, a.late_reported_at = %(now)s
WHERE a.claim_token = v.claim_token;

-- name: expired_leases
-- Running attempts are their jobs' (migration 22): the running and cancel-requested jobs
-- (few: what the workers hold) from an index led by status.
SELECT j.attempt_id, j.id AS job_id, j.generation, j.claim_token, j.status, j.attempts,
       j.max_attempts, j.retry_base, j.retry_cap
FROM duetime_jobs j
WHERE j.status IN ('running', 'cancel_requested')
  AND j.attempt_id IS NOT NULL AND j.lease_expires_at <= %(now)s
  -- an attempt dispatched to the broker whose event is not yet published: no lease runs yet
  AND NOT (j.worker_id = %(holder)s AND EXISTS (
        SELECT 1 FROM duetime_outbox o WHERE o.attempt_id = j.attempt_id AND o.published_at IS NULL))
ORDER BY j.lease_expires_at, j.attempt_id
LIMIT %(limit)s;

-- name: held_leases
-- Through the running jobs (few rows: what the workers hold now), as expired_leases.
SELECT j.attempt_id, j.id AS job_id, j.generation, j.claim_token
FROM duetime_jobs j
WHERE j.status IN ('running', 'cancel_requested')
  AND j.attempt_id IS NOT NULL AND j.worker_id = %(worker_id)s
ORDER BY j.attempt_id;

-- name: expire_overdue
-- Candidates read without locks, then moved by primary key with the condition checked again
-- (as prune: a scanning UPDATE would lock rows that claims hold and deadlock with them).
CREATE TEMPORARY TABLE IF NOT EXISTS duetime_overdue (id BIGINT NOT NULL PRIMARY KEY);
DELETE FROM duetime_overdue;
INSERT INTO duetime_overdue (id)
SELECT id FROM duetime_jobs
WHERE status = 'scheduled' AND deadline_at IS NOT NULL AND deadline_at <= %(now)s
ORDER BY deadline_at, id
LIMIT %(limit)s;
UPDATE duetime_jobs j JOIN duetime_overdue o ON o.id = j.id
SET j.version = j.version + 1, j.updated_at = %(now)s,
    j.status = JSON_UNQUOTE(JSON_EXTRACT(%(moves)s, CONCAT('$.', j.status)))
WHERE j.status = 'scheduled' AND j.deadline_at IS NOT NULL AND j.deadline_at <= %(now)s
  AND JSON_EXTRACT(%(moves)s, CONCAT('$.', j.status)) IS NOT NULL;
-- the jobs just expired (a job expired by another at the same instant may be among them:
-- what is done with them can be done twice)
SELECT j.id, j.has_children, j.tenant, j.sequence_key
FROM duetime_jobs j JOIN duetime_overdue o ON o.id = j.id
WHERE j.status = 'expired' AND j.updated_at = %(now)s;

-- name: transition
-- MySQL assigns left to right and later expressions see earlier results: columns whose
-- new value reads the old status or due time come first, status last
UPDATE duetime_jobs
SET cancel_requested_at = CASE
        WHEN %(replay)s THEN NULL  -- a replay starts afresh
        WHEN JSON_UNQUOTE(JSON_EXTRACT(%(moves)s, CONCAT('$.', status))) = 'cancel_requested'
             AND status <> 'cancel_requested' THEN %(now)s  -- a repeated request keeps its time
        ELSE cancel_requested_at END,
    deadline_at = CASE WHEN %(replay)s AND deadline_at <= COALESCE(%(due_at)s, due_at)
                       THEN NULL ELSE deadline_at END,
    attempts = CASE WHEN %(replay)s THEN 0 ELSE attempts END,
    due_at = COALESCE(%(due_at)s, due_at),
    version = version + 1,
    updated_at = %(now)s,
    status = JSON_UNQUOTE(JSON_EXTRACT(%(moves)s, CONCAT('$.', status)))
WHERE id = %(job_id)s
  AND (%(tenant)s IS NULL OR tenant = %(tenant)s)
  AND JSON_EXTRACT(%(moves)s, CONCAT('$.', status)) IS NOT NULL
  AND (%(due_at)s IS NULL OR %(replay)s OR deadline_at IS NULL OR deadline_at > %(due_at)s);

-- name: insert_schedule
INSERT INTO duetime_schedules (tenant, name, spec, definition_hash, paused, anchor_at,
    next_fire_at, created_at, updated_at)
VALUES (%(tenant)s, %(name)s, %(spec)s, %(definition_hash)s, FALSE, %(anchor_at)s,
    %(next_fire_at)s, %(now)s, %(now)s)
ON DUPLICATE KEY UPDATE id = id;

-- name: select_schedule
SELECT * FROM duetime_schedules WHERE tenant = %(tenant)s AND name = %(name)s;

-- name: lock_schedule
SELECT * FROM duetime_schedules WHERE tenant = %(tenant)s AND name = %(name)s
FOR UPDATE;

-- name: list_schedules
-- utf8mb4_bin orders names by code point, as the other dialects do
SELECT * FROM duetime_schedules
WHERE (%(tenant)s IS NULL OR tenant = %(tenant)s)
ORDER BY name, tenant;

-- name: due_schedules
SELECT id FROM duetime_schedules
WHERE NOT paused AND next_fire_at IS NOT NULL AND next_fire_at <= %(now)s
ORDER BY next_fire_at, id
LIMIT %(limit)s;

-- name: lock_due_schedule
-- Locked, and re-checked in its newest version; nothing when another planner holds it.
SELECT * FROM duetime_schedules
WHERE id = %(id)s AND NOT paused AND next_fire_at IS NOT NULL AND next_fire_at <= %(now)s
FOR UPDATE SKIP LOCKED;

-- name: update_schedule
UPDATE duetime_schedules
SET spec = COALESCE(%(spec)s, spec),
    definition_hash = COALESCE(%(definition_hash)s, definition_hash),
    paused = COALESCE(%(paused)s, paused),
    anchor_at = COALESCE(%(anchor_at)s, anchor_at),
    next_fire_at = CASE WHEN %(move_cursor)s THEN %(next_fire_at)s ELSE next_fire_at END,
    version = version + %(bump)s,
    updated_at = %(now)s
WHERE id = %(id)s;

-- name: delete_schedule
DELETE FROM duetime_schedules WHERE id = %(id)s;

-- name: cancel_unstarted
UPDATE duetime_jobs
SET version = version + 1, updated_at = %(now)s, status = JSON_UNQUOTE(JSON_EXTRACT(%(moves)s, CONCAT('$.', status)))
WHERE schedule_id = %(schedule_id)s AND status IN ('scheduled', 'waiting') AND generation = 0
  AND JSON_EXTRACT(%(moves)s, CONCAT('$.', status)) IS NOT NULL;

-- name: active_occurrences
SELECT id, nominal_at, status, generation, origin FROM duetime_jobs
WHERE schedule_id = %(schedule_id)s
  AND status IN ('scheduled', 'waiting', 'running', 'cancel_requested')
ORDER BY nominal_at;

-- name: delete_unstarted
-- The jobs are picked into a temporary table, locked through it, and those that no longer
-- qualify are forgotten (as prune does), so that the statements after it (READ COMMITTED:
-- each reads the newest rows) act on the locked ones. No foreign key does it (migration 26):
-- their dependency links go with them and their ticks are detached; each table is joined to
-- the picked jobs (a DELETE ... WHERE ... IN (subquery) would read the whole table). A job
-- never claimed (generation 0) has no attempt and no outbox event, and an occurrence has no
-- parents: its links are those of its children.
CREATE TEMPORARY TABLE IF NOT EXISTS duetime_prune (id BIGINT NOT NULL PRIMARY KEY);
DELETE FROM duetime_prune;
INSERT INTO duetime_prune (id)
SELECT id FROM duetime_jobs
WHERE schedule_id = %(schedule_id)s AND status IN ('scheduled', 'waiting') AND generation = 0
  AND origin = 'tick';
SELECT j.id FROM duetime_jobs j JOIN duetime_prune p ON p.id = j.id
WHERE j.status IN ('scheduled', 'waiting') AND j.generation = 0 AND j.origin = 'tick'
FOR UPDATE;
DELETE p FROM duetime_prune p
LEFT JOIN duetime_jobs j ON j.id = p.id
    AND j.status IN ('scheduled', 'waiting') AND j.generation = 0 AND j.origin = 'tick'
WHERE j.id IS NULL;
DELETE l FROM duetime_job_parents l JOIN duetime_prune p ON l.parent_id = p.id;
UPDATE duetime_ticks t JOIN duetime_prune p ON t.job_id = p.id SET t.job_id = NULL;
DELETE j FROM duetime_jobs j JOIN duetime_prune p ON p.id = j.id;

-- name: release_waiting
-- The candidates are read into a derived table first (MySQL cannot update a table that a
-- subquery of the same statement reads); each is re-checked as it is updated.
UPDATE duetime_jobs
SET due_at = %(now)s, version = version + 1, updated_at = %(now)s, status = JSON_UNQUOTE(JSON_EXTRACT(%(moves)s, CONCAT('$.', status)))
WHERE id IN (SELECT id FROM (
    SELECT w.id FROM duetime_jobs w
    WHERE w.status = 'waiting' AND w.schedule_id IS NOT NULL
      AND w.nominal_at = (SELECT MIN(x.nominal_at) FROM duetime_jobs x
                          WHERE x.schedule_id = w.schedule_id AND x.status = 'waiting')
      AND NOT EXISTS (SELECT 1 FROM duetime_jobs a
                      WHERE a.schedule_id = w.schedule_id
                        AND a.status IN ('scheduled', 'running', 'cancel_requested'))
    ORDER BY w.nominal_at, w.id
    LIMIT %(limit)s) AS candidates)
  AND status = 'waiting'
  AND JSON_EXTRACT(%(moves)s, CONCAT('$.', status)) IS NOT NULL;

-- name: insert_tick
INSERT INTO duetime_ticks (schedule_id, nominal_at, outcome, origin, job_id, detail, recorded_at)
VALUES (%(schedule_id)s, %(nominal_at)s, %(outcome)s, %(origin)s, %(job_id)s, %(detail)s,
    %(now)s)
ON DUPLICATE KEY UPDATE job_id = VALUES(job_id), detail = VALUES(detail),
    recorded_at = VALUES(recorded_at);

-- name: list_ticks
-- started_at: the first start of the tick's job, of its ended attempts' rows (through their
-- job's index) and the attempt running on its row (migration 22). Not through the view of
-- every attempt (duetime_all_attempts): the correlated condition is not pushed into its
-- UNION, and every attempt would be read.
-- The tick's job in either table (a job that ended may be in the history table, migration 25;
-- no attempt is kept on its row here).
SELECT t.*, COALESCE(j.status, d.status) AS job_status,
       (SELECT CASE WHEN r.started_at IS NULL OR MIN(a.started_at) < r.started_at
                    THEN MIN(a.started_at) ELSE r.started_at END
        FROM duetime_attempts a WHERE a.job_id = t.job_id) AS started_at
FROM duetime_ticks t LEFT JOIN duetime_jobs j ON j.id = t.job_id
LEFT JOIN duetime_jobs r ON r.id = j.id AND r.status IN ('running', 'cancel_requested')
    AND r.attempt_id IS NOT NULL
LEFT JOIN duetime_jobs_done d ON d.id = t.job_id
WHERE t.schedule_id = %(schedule_id)s
  AND (%(before_id)s IS NULL OR t.id < %(before_id)s)
ORDER BY t.id DESC
LIMIT %(limit)s;

-- name: latest_run
-- Both tables (a job that ended may be in the history table, migration 25); each part
-- stops at its newest started occurrence.
SELECT id FROM (
    SELECT * FROM (
        SELECT id, nominal_at FROM duetime_jobs
        WHERE schedule_id = %(schedule_id)s AND generation > 0
        ORDER BY nominal_at DESC
        LIMIT 1) AS hot
    UNION ALL
    SELECT * FROM (
        SELECT id, nominal_at FROM duetime_jobs_done
        WHERE schedule_id = %(schedule_id)s AND generation > 0
        ORDER BY nominal_at DESC
        LIMIT 1) AS done) AS r
ORDER BY nominal_at DESC
LIMIT 1;

-- name: upsert_node
INSERT INTO duetime_nodes (id, hostname, pid, queues, concurrency, duties, version, started_at,
    last_seen_at, tasks, clock_offset_seconds)
VALUES (%(id)s, %(hostname)s, %(pid)s, %(queues)s, %(concurrency)s, %(duties)s,
    %(version)s, %(now)s, %(now)s, %(tasks)s, %(clock_offset)s)
ON DUPLICATE KEY UPDATE last_seen_at = VALUES(last_seen_at), stopped_at = NULL,
    tasks = VALUES(tasks), clock_offset_seconds = VALUES(clock_offset_seconds);

-- name: touch_node
UPDATE duetime_nodes SET last_seen_at = %(now)s, clock_offset_seconds = %(clock_offset)s
WHERE id = %(id)s;

-- name: stop_node
UPDATE duetime_nodes SET last_seen_at = %(now)s, stopped_at = %(now)s WHERE id = %(id)s;

-- name: take_turn
-- The duty's turn, when its last pass (by any node) began `every` seconds ago or more, by the
-- database's clock in UTC, or more than `every` seconds ahead of it (the clock was set back);
-- no row changes otherwise.
UPDATE duetime_turns SET passed_at = UTC_TIMESTAMP(6), holder = %(holder)s
WHERE duty = %(duty)s
  AND (passed_at <= UTC_TIMESTAMP(6) - INTERVAL ROUND(%(every)s * 1000000) MICROSECOND
       OR passed_at > UTC_TIMESTAMP(6) + INTERVAL ROUND(%(every)s * 1000000) MICROSECOND);

-- name: first_turn
-- After a take_turn that changed no row: the duty's first pass ever inserts its row (one of
-- the nodes that race here wins); where the row is there, nothing is inserted.
INSERT IGNORE INTO duetime_turns (duty, passed_at, holder)
VALUES (%(duty)s, UTC_TIMESTAMP(6), %(holder)s);

-- name: list_nodes
-- What each node holds: the running attempts, read once through the running jobs (as
-- expired_leases), grouped by worker.
SELECT n.*, COALESCE(h.holding, JSON_ARRAY()) AS holding
FROM duetime_nodes n
LEFT JOIN (
    SELECT j.worker_id, JSON_ARRAYAGG(j.id) AS holding
    FROM duetime_jobs j
    WHERE j.status IN ('running', 'cancel_requested') AND j.attempt_id IS NOT NULL
    GROUP BY j.worker_id
) AS h ON h.worker_id = n.id
ORDER BY n.started_at DESC
LIMIT %(limit)s;

-- name: database_now
-- UTC_TIMESTAMP(6): UTC whatever the session's time_zone, to the microsecond, as the statement
-- starts (a lone SELECT: when it runs)
SELECT UTC_TIMESTAMP(6) AS now;

-- name: insert_token
INSERT INTO duetime_tokens (tenant, role, name, prefix, secret_hash, created_at, expires_at)
VALUES (%(tenant)s, %(role)s, %(name)s, %(prefix)s, %(secret_hash)s, %(now)s, %(expires_at)s);

-- name: select_token
SELECT * FROM duetime_tokens WHERE id = %(id)s;

-- name: list_tokens
SELECT * FROM duetime_tokens
WHERE (%(tenant)s IS NULL OR tenant = %(tenant)s)
ORDER BY id;

-- name: revoke_token
UPDATE duetime_tokens SET revoked_at = COALESCE(revoked_at, %(now)s) WHERE id = %(id)s;

-- name: token_used
UPDATE duetime_tokens SET last_used_at = %(now)s
WHERE secret_hash = %(secret_hash)s
  AND (last_used_at IS NULL OR last_used_at < %(before)s);

-- name: token_by_hash_read
SELECT * FROM duetime_tokens WHERE secret_hash = %(secret_hash)s;

-- name: insert_session
INSERT INTO duetime_sessions (secret_hash, token_id, created_at, expires_at)
VALUES (%(secret_hash)s, %(token_id)s, %(now)s, %(expires_at)s);

-- name: session_token
SELECT t.* FROM duetime_sessions s JOIN duetime_tokens t ON t.id = s.token_id
WHERE s.secret_hash = %(secret_hash)s AND s.expires_at > %(now)s;

-- name: delete_session
DELETE FROM duetime_sessions WHERE secret_hash = %(secret_hash)s;

-- name: delete_expired_sessions
DELETE FROM duetime_sessions WHERE expires_at <= %(now)s;

-- name: job_counts
-- Both tables (a job that ended may be in the history table, migration 25). The jobs table's
-- counts read its status index; the history table has no index for them yet, and its part
-- reads the table (it is empty until jobs move: docs/history-plan.md, step 3).
SELECT status, queue, SUM(n) AS n FROM (
    SELECT status, queue, COUNT(*) AS n FROM duetime_jobs
    WHERE (%(tenant)s IS NULL OR tenant = %(tenant)s)
    GROUP BY status, queue
    UNION ALL
    SELECT status, queue, COUNT(*) AS n FROM duetime_jobs_done
    WHERE (%(tenant)s IS NULL OR tenant = %(tenant)s)
    GROUP BY status, queue) AS c
GROUP BY status, queue
ORDER BY status, queue;

-- name: oldest_overdue
SELECT MIN(due_at) AS due_at FROM duetime_jobs
WHERE status = 'scheduled' AND due_at <= %(now)s
  AND (%(tenant)s IS NULL OR tenant = %(tenant)s);

-- name: earliest_due
-- (The claims of this dialect take no floor: the contract's statement.)
SELECT MIN(due_at) AS due_at FROM duetime_jobs
WHERE status = 'scheduled' AND due_at <= %(until)s
  AND (deadline_at IS NULL OR deadline_at > %(until)s)
  AND (%(all_queues)s OR queue IN %(queues)s)
  AND (%(all_tasks)s OR task IN %(tasks)s)
  AND (%(all_direct)s OR queue NOT IN %(outbox_queues)s);

-- name: attempt_samples
-- the newest attempts started since a point in time, for lag, throughput and failure figures
-- (the running ones from their jobs' rows: duetime_all_attempts), each with its job from
-- either table (a job that ended may be in the history table, migration 25); ties of a start
-- go newest job first
SELECT COALESCE(j.task, d.task) AS task, COALESCE(j.queue, d.queue) AS queue, a.status,
       a.error_category, a.due_at, a.started_at, a.finished_at
FROM duetime_all_attempts a
LEFT JOIN duetime_jobs j ON j.id = a.job_id
LEFT JOIN duetime_jobs_done d ON d.id = a.job_id
WHERE a.started_at >= %(since)s
  AND (j.id IS NOT NULL OR d.id IS NOT NULL)
  AND (%(tenant)s IS NULL OR COALESCE(j.tenant, d.tenant) = %(tenant)s)
ORDER BY a.started_at DESC, a.job_id DESC
LIMIT %(limit)s;

-- name: next_due
SELECT due_at FROM duetime_jobs
WHERE status = 'scheduled' AND due_at > %(now)s AND due_at <= %(until)s
  AND (%(all_queues)s OR queue IN %(queues)s)
ORDER BY due_at
LIMIT %(limit)s;

-- name: prune
-- The candidates are read without locks first (READ COMMITTED: INSERT ... SELECT is a
-- consistent read), then deleted by primary key with the condition checked again: a DELETE
-- that scanned the table itself would lock rows claims and completions hold, and deadlock.
CREATE TEMPORARY TABLE IF NOT EXISTS duetime_prune (id BIGINT NOT NULL PRIMARY KEY);
DELETE FROM duetime_prune;
INSERT INTO duetime_prune (id)
SELECT id FROM duetime_jobs
WHERE status IN ('succeeded', 'cancelled', 'expired') AND updated_at < %(before)s
ORDER BY updated_at
LIMIT %(limit)s;
-- Then the candidates that still qualify are locked and the others forgotten, so that the
-- statements after these (READ COMMITTED: each reads the newest rows) act on the same jobs.
-- No foreign key does it (migration 26): their attempts, dependency links and outbox events
-- go with them and their ticks are detached (each table joined to the candidates: a
-- DELETE ... WHERE ... IN (subquery) would read the whole table).
SELECT j.id FROM duetime_jobs j JOIN duetime_prune p ON p.id = j.id
WHERE j.status IN ('succeeded', 'cancelled', 'expired') AND j.updated_at < %(before)s
FOR UPDATE;
DELETE p FROM duetime_prune p
LEFT JOIN duetime_jobs j ON j.id = p.id
    AND j.status IN ('succeeded', 'cancelled', 'expired') AND j.updated_at < %(before)s
WHERE j.id IS NULL;
DELETE a FROM duetime_attempts a JOIN duetime_prune p ON a.job_id = p.id;
DELETE l FROM duetime_job_parents l JOIN duetime_prune p ON l.child_id = p.id;
DELETE l FROM duetime_job_parents l JOIN duetime_prune p ON l.parent_id = p.id;
DELETE o FROM duetime_outbox o JOIN duetime_prune p ON o.job_id = p.id;
UPDATE duetime_ticks t JOIN duetime_prune p ON t.job_id = p.id SET t.job_id = NULL;
DELETE j FROM duetime_jobs j JOIN duetime_prune p ON p.id = j.id
WHERE j.status IN ('succeeded', 'cancelled', 'expired') AND j.updated_at < %(before)s;

-- name: prune_done
-- prune's work on the history table (migration 25), the same way: the jobs that ended before
-- `before`, up to `limit` of them, with their attempts, links and outbox events, their ticks
-- detached.
CREATE TEMPORARY TABLE IF NOT EXISTS duetime_prune (id BIGINT NOT NULL PRIMARY KEY);
DELETE FROM duetime_prune;
-- One part per status, each read in updated_at order through (status, updated_at) and stopped
-- at the limit, then merged: a range over the three statuses would sort every row past the
-- retention on each batch, and the history table is where they pile up.
INSERT INTO duetime_prune (id)
SELECT id FROM (
    (SELECT id, updated_at FROM duetime_jobs_done
     WHERE status = 'succeeded' AND updated_at < %(before)s ORDER BY updated_at LIMIT %(limit)s)
    UNION ALL
    (SELECT id, updated_at FROM duetime_jobs_done
     WHERE status = 'cancelled' AND updated_at < %(before)s ORDER BY updated_at LIMIT %(limit)s)
    UNION ALL
    (SELECT id, updated_at FROM duetime_jobs_done
     WHERE status = 'expired' AND updated_at < %(before)s ORDER BY updated_at LIMIT %(limit)s)
) AS c
ORDER BY updated_at
LIMIT %(limit)s;
-- Then the candidates that still qualify are locked and the others forgotten, so that the
-- statements after these (READ COMMITTED: each reads the newest rows) act on the same jobs.
-- No foreign key does it (migration 26): their attempts, dependency links and outbox events
-- go with them and their ticks are detached (each table joined to the candidates: a
-- DELETE ... WHERE ... IN (subquery) would read the whole table).
SELECT j.id FROM duetime_jobs_done j JOIN duetime_prune p ON p.id = j.id
WHERE j.status IN ('succeeded', 'cancelled', 'expired') AND j.updated_at < %(before)s
FOR UPDATE;
DELETE p FROM duetime_prune p
LEFT JOIN duetime_jobs_done j ON j.id = p.id
    AND j.status IN ('succeeded', 'cancelled', 'expired') AND j.updated_at < %(before)s
WHERE j.id IS NULL;
DELETE a FROM duetime_attempts a JOIN duetime_prune p ON a.job_id = p.id;
DELETE l FROM duetime_job_parents l JOIN duetime_prune p ON l.child_id = p.id;
DELETE l FROM duetime_job_parents l JOIN duetime_prune p ON l.parent_id = p.id;
DELETE o FROM duetime_outbox o JOIN duetime_prune p ON o.job_id = p.id;
UPDATE duetime_ticks t JOIN duetime_prune p ON t.job_id = p.id SET t.job_id = NULL;
DELETE j FROM duetime_jobs_done j JOIN duetime_prune p ON p.id = j.id
WHERE j.status IN ('succeeded', 'cancelled', 'expired') AND j.updated_at < %(before)s;

-- name: queue_settings
SELECT queue, dispatch, paused, concurrency, max_backlog, weight, updated_at FROM duetime_queues
ORDER BY queue;

-- name: upsert_queue
INSERT INTO duetime_queues (queue, dispatch, paused, concurrency, max_backlog, weight,
    updated_at)
VALUES (%(queue)s, COALESCE(%(dispatch)s, 'direct'), COALESCE(%(paused)s, FALSE),
    CASE WHEN %(set_concurrency)s THEN %(concurrency)s END,
    CASE WHEN %(set_max_backlog)s THEN %(max_backlog)s END, COALESCE(%(weight)s, 1), %(now)s)
ON DUPLICATE KEY UPDATE dispatch = COALESCE(%(dispatch)s, dispatch),
    paused = COALESCE(%(paused)s, paused),
    concurrency = CASE WHEN %(set_concurrency)s THEN %(concurrency)s ELSE concurrency END,
    max_backlog = CASE WHEN %(set_max_backlog)s THEN %(max_backlog)s ELSE max_backlog END,
    weight = COALESCE(%(weight)s, weight),
    updated_at = %(now)s;

-- name: tenant_settings
SELECT tenant, concurrency, max_backlog, weight, updated_at FROM duetime_tenants ORDER BY tenant;

-- name: upsert_tenant
INSERT INTO duetime_tenants (tenant, concurrency, max_backlog, weight, updated_at)
VALUES (%(tenant)s, CASE WHEN %(set_concurrency)s THEN %(concurrency)s END,
    CASE WHEN %(set_max_backlog)s THEN %(max_backlog)s END, COALESCE(%(weight)s, 1), %(now)s)
ON DUPLICATE KEY UPDATE
    concurrency = CASE WHEN %(set_concurrency)s THEN %(concurrency)s ELSE concurrency END,
    max_backlog = CASE WHEN %(set_max_backlog)s THEN %(max_backlog)s ELSE max_backlog END,
    weight = COALESCE(%(weight)s, weight),
    updated_at = %(now)s;

-- name: lock_capped_queues
SELECT queue, concurrency FROM duetime_queues WHERE concurrency IS NOT NULL ORDER BY queue
FOR UPDATE;

-- name: lock_capped_tenants
SELECT tenant, concurrency FROM duetime_tenants WHERE concurrency IS NOT NULL ORDER BY tenant
FOR UPDATE;

-- name: running_counts
-- Through the running jobs, as expired_leases.
SELECT j.queue, j.tenant, COUNT(*) AS n
FROM duetime_jobs j
WHERE j.status IN ('running', 'cancel_requested') AND j.attempt_id IS NOT NULL
GROUP BY j.queue, j.tenant;

-- name: claim_candidates
-- A controlled claim's pick, read only (claim_chosen then takes the chosen ids). One branch
-- runs (every queue, or the queues named), each on its claim-order index. With limits, as
-- claim_pick_limited: not the jobs carrying a blocked key, nor the retries carrying a
-- retry_blocked one.
-- Only the priority classes of `classes` (Claimer.due_classes), as in claim: each class's
-- range of the index ends at now.
(SELECT id, queue, tenant, limits, attempts FROM duetime_jobs FORCE INDEX (duetime_jobs_due_any)
 WHERE %(all_queues)s AND status = 'scheduled' AND due_at <= %(now)s
   AND neg_priority IN %(classes)s
   AND (deadline_at IS NULL OR deadline_at > %(now)s)
   AND (%(all_tasks)s OR task IN %(tasks)s)
   AND (%(open_queues)s OR queue NOT IN %(skip_queues)s)
   AND (%(open_tenants)s OR tenant NOT IN %(skip_tenants)s)
   AND (%(no_skip_ids)s OR id NOT IN %(skip_ids)s)
   AND (limits IS NULL
        OR NOT EXISTS (SELECT 1 FROM JSON_TABLE(%(blocked)s, '$[*]'
                                                COLUMNS (k VARCHAR(110) PATH '$')) AS b
                       WHERE LOCATE(b.k, limits) > 0))
   AND (limits IS NULL OR attempts = 0
        OR NOT EXISTS (SELECT 1 FROM JSON_TABLE(%(retry_blocked)s, '$[*]'
                                                COLUMNS (k VARCHAR(110) PATH '$')) AS r
                       WHERE LOCATE(r.k, limits) > 0))
 ORDER BY neg_priority, due_at, id
 LIMIT %(limit)s)
UNION ALL
(SELECT id, queue, tenant, limits, attempts FROM duetime_jobs FORCE INDEX (duetime_jobs_due)
 WHERE NOT %(all_queues)s AND queue IN %(queues)s AND status = 'scheduled'
   AND neg_priority IN %(classes)s
   AND due_at <= %(now)s AND (deadline_at IS NULL OR deadline_at > %(now)s)
   AND (%(all_tasks)s OR task IN %(tasks)s)
   AND (%(open_queues)s OR queue NOT IN %(skip_queues)s)
   AND (%(open_tenants)s OR tenant NOT IN %(skip_tenants)s)
   AND (%(no_skip_ids)s OR id NOT IN %(skip_ids)s)
   AND (limits IS NULL
        OR NOT EXISTS (SELECT 1 FROM JSON_TABLE(%(blocked)s, '$[*]'
                                                COLUMNS (k VARCHAR(110) PATH '$')) AS b
                       WHERE LOCATE(b.k, limits) > 0))
   AND (limits IS NULL OR attempts = 0
        OR NOT EXISTS (SELECT 1 FROM JSON_TABLE(%(retry_blocked)s, '$[*]'
                                                COLUMNS (k VARCHAR(110) PATH '$')) AS r
                       WHERE LOCATE(r.k, limits) > 0))
 ORDER BY neg_priority, due_at, id
 LIMIT %(limit)s);

-- name: lower_candidates
-- A priority reservation's read (core/flow/share.PriorityShare): claim_candidates of the jobs of
-- priority below `below`, with their priority; neg_priority > -below is a range of the index.
-- Locked, skipping rows other claims hold: two workers' reservations do not pick the same jobs.
(SELECT id, priority, queue, tenant, limits, attempts FROM duetime_jobs FORCE INDEX (duetime_jobs_due_any)
 WHERE %(all_queues)s AND status = 'scheduled' AND due_at <= %(now)s
   AND neg_priority IN %(classes)s
   AND (deadline_at IS NULL OR deadline_at > %(now)s)
   AND (%(all_tasks)s OR task IN %(tasks)s)
   AND (%(open_queues)s OR queue NOT IN %(skip_queues)s)
   AND (%(open_tenants)s OR tenant NOT IN %(skip_tenants)s)
   AND neg_priority > -%(below)s
 ORDER BY neg_priority, due_at, id
 LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
UNION ALL
(SELECT id, priority, queue, tenant, limits, attempts FROM duetime_jobs FORCE INDEX (duetime_jobs_due)
 WHERE NOT %(all_queues)s AND queue IN %(queues)s AND status = 'scheduled'
   AND neg_priority IN %(classes)s
   AND due_at <= %(now)s AND (deadline_at IS NULL OR deadline_at > %(now)s)
   AND (%(all_tasks)s OR task IN %(tasks)s)
   AND (%(open_queues)s OR queue NOT IN %(skip_queues)s)
   AND (%(open_tenants)s OR tenant NOT IN %(skip_tenants)s)
   AND neg_priority > -%(below)s
 ORDER BY neg_priority, due_at, id
 LIMIT %(limit)s FOR UPDATE SKIP LOCKED);

-- name: queue_candidates
-- The candidates of one queue (a weighted queue the claim's first read did not reach), of
-- the priority classes of `classes` (as claim_candidates: one range per class).
SELECT id, queue, tenant, limits, attempts FROM duetime_jobs FORCE INDEX (duetime_jobs_due)
WHERE queue = %(queue)s AND status = 'scheduled' AND due_at <= %(now)s
  AND neg_priority IN %(classes)s
  AND (deadline_at IS NULL OR deadline_at > %(now)s)
  AND (%(all_tasks)s OR task IN %(tasks)s)
  AND (%(open_tenants)s OR tenant NOT IN %(skip_tenants)s)
ORDER BY neg_priority, due_at, id
LIMIT %(limit)s;

-- name: tenant_candidates
-- The candidates of one tenant (a weighted tenant the claim's first read did not reach, or
-- one of the tenants a claim rotates over), from its due jobs in claim order, of the
-- priority classes of `classes` (as claim_candidates: one range per class).
SELECT id, queue, tenant, limits, attempts FROM duetime_jobs FORCE INDEX (duetime_jobs_tenant_due)
WHERE tenant = %(tenant)s AND status = 'scheduled' AND due_at <= %(now)s
  AND neg_priority IN %(classes)s
  AND (deadline_at IS NULL OR deadline_at > %(now)s)
  AND (%(all_queues)s OR queue IN %(queues)s)
  AND (%(all_tasks)s OR task IN %(tasks)s)
  AND (%(open_queues)s OR queue NOT IN %(skip_queues)s)
ORDER BY neg_priority, due_at, id
LIMIT %(limit)s;

-- name: next_due_tenant
-- The first tenant after `after` (code-point order) with a job due at now: one seek in the
-- tenant index, so the tenants with due work are found one read each.
SELECT tenant FROM duetime_jobs FORCE INDEX (duetime_jobs_tenant_due)
WHERE status = 'scheduled' AND tenant > %(after)s AND due_at <= %(now)s
ORDER BY tenant
LIMIT 1;

-- name: claim_chosen
-- As claim, for the jobs of `ids` still scheduled, due, not past their deadline and of a queue
-- not paused now, skipping rows another transaction locked; the attempts' lease is
-- lease_seconds when given (the relay's dispatch), else each job's own.
CREATE TEMPORARY TABLE IF NOT EXISTS duetime_claim (id BIGINT NOT NULL PRIMARY KEY);
DELETE FROM duetime_claim;
INSERT INTO duetime_claim (id)
SELECT id FROM duetime_jobs
WHERE id IN %(ids)s AND status = 'scheduled' AND due_at <= %(now)s
  AND (deadline_at IS NULL OR deadline_at > %(now)s)
ORDER BY id
FOR UPDATE SKIP LOCKED;
-- a paused queue's jobs: left out as its row says now, read without a lock (SELECT ... INTO is
-- a consistent read; a DML statement reading the queues would share-lock their rows)
SELECT JSON_ARRAYAGG(queue) INTO @duetime_paused FROM duetime_queues WHERE paused;
DELETE c FROM duetime_claim c
JOIN duetime_jobs j ON j.id = c.id
WHERE JSON_CONTAINS(COALESCE(@duetime_paused, '[]'), JSON_QUOTE(j.queue));
-- the attempts start on their jobs' rows (migration 22), their ids the block this process
-- reserved (first_attempt_id on, store/sql/attempt_ids.py) in job id order; status goes last
-- (MySQL assigns left to right)
UPDATE duetime_jobs AS j
JOIN (SELECT id, ROW_NUMBER() OVER (ORDER BY id) AS n FROM duetime_claim) AS c ON c.id = j.id
SET j.generation = j.generation + 1, j.attempts = j.attempts + 1, j.updated_at = %(now)s,
    j.claim_token = CAST(CONV(LEFT(MD5(CONCAT(UUID(), RAND())), 15), 16, 10) AS UNSIGNED) + 1,
    j.attempt_id = %(first_attempt_id)s + c.n - 1, j.worker_id = %(worker_id)s,
    j.lease_expires_at = DATE_ADD(%(now)s, INTERVAL FLOOR(COALESCE(%(lease_seconds)s, j.lease_seconds) * 1000000) MICROSECOND),
    j.started_at = %(now)s, j.late_outcome = NULL, j.late_reported_at = NULL,
    j.status = JSON_UNQUOTE(JSON_EXTRACT(%(moves)s, CONCAT('$.', j.status)))
WHERE JSON_EXTRACT(%(moves)s, CONCAT('$.', j.status)) IS NOT NULL;
-- as claim: the attempt is the job's row's (migration 22)
SELECT
@claimed_columns
       , 0 AS claim_epoch  -- last, as CLAIMED_COLUMNS and PostgreSQL's claims have it
FROM duetime_jobs j
WHERE j.id IN (SELECT id FROM duetime_claim) AND j.status = 'running'
  AND j.attempt_id IS NOT NULL
ORDER BY j.priority DESC, j.due_at, j.id;

-- name: lock_queue_backlog
SELECT max_backlog FROM duetime_queues WHERE queue = %(queue)s FOR UPDATE;

-- name: lock_tenant_backlog
SELECT max_backlog FROM duetime_tenants WHERE tenant = %(tenant)s FOR UPDATE;

-- name: queue_backlog
SELECT COUNT(*) AS n FROM duetime_jobs
WHERE queue = %(queue)s AND status IN ('scheduled', 'waiting');

-- name: tenant_backlog
SELECT COUNT(*) AS n FROM duetime_jobs
WHERE tenant = %(tenant)s AND status IN ('scheduled', 'waiting');

-- name: flow_counts
-- One read of the job counts index (status, tenant, queue, due_at: migration 12), covering.
SELECT queue, tenant,
       SUM(CASE WHEN status IN ('scheduled', 'waiting') THEN 1 ELSE 0 END) AS backlog,
       SUM(CASE WHEN status IN ('running', 'cancel_requested') THEN 1 ELSE 0 END) AS running,
       SUM(CASE WHEN status = 'scheduled' AND due_at <= %(now)s THEN 1 ELSE 0 END) AS waiting,
       MIN(CASE WHEN status = 'scheduled' AND due_at <= %(now)s THEN due_at END) AS oldest_due_at
FROM duetime_jobs
WHERE status IN ('scheduled', 'waiting', 'running', 'cancel_requested')
GROUP BY queue, tenant
ORDER BY queue, tenant;

-- name: dispatch_outbox
-- The claim of outbox-mode queues, for the relay: the picked ids (FOR UPDATE SKIP LOCKED) go
-- to a temporary table, the jobs move, their attempts start held by `holder` (until a worker
-- accepts one) with a lease of lease_seconds, one outbox event per attempt is written in claim
-- order, and the events come back.
CREATE TEMPORARY TABLE IF NOT EXISTS duetime_dispatch (id BIGINT NOT NULL PRIMARY KEY);
DELETE FROM duetime_dispatch;
INSERT INTO duetime_dispatch (id)
(SELECT id FROM duetime_jobs
 WHERE status = 'scheduled' AND due_at <= %(now)s
   AND (deadline_at IS NULL OR deadline_at > %(now)s)
   AND queue IN (SELECT q.queue FROM duetime_queues q
                 WHERE q.dispatch = 'outbox' AND NOT q.paused)
 ORDER BY neg_priority, due_at, id
 LIMIT %(limit)s
 FOR UPDATE SKIP LOCKED);
-- the attempts start on their jobs' rows (migration 22), their ids the block this process
-- reserved (first_attempt_id on, store/sql/attempt_ids.py) in job id order; status goes last
-- (MySQL assigns left to right)
UPDATE duetime_jobs AS j
JOIN (SELECT id, ROW_NUMBER() OVER (ORDER BY id) AS n FROM duetime_dispatch) AS c ON c.id = j.id
SET j.generation = j.generation + 1, j.attempts = j.attempts + 1, j.updated_at = %(now)s,
    j.claim_token = CAST(CONV(LEFT(MD5(CONCAT(UUID(), RAND())), 15), 16, 10) AS UNSIGNED) + 1,
    j.attempt_id = %(first_attempt_id)s + c.n - 1, j.worker_id = %(holder)s,
    j.lease_expires_at = DATE_ADD(%(now)s, INTERVAL FLOOR(%(lease_seconds)s * 1000000) MICROSECOND),
    j.started_at = %(now)s, j.late_outcome = NULL, j.late_reported_at = NULL,
    j.status = JSON_UNQUOTE(JSON_EXTRACT(%(moves)s, CONCAT('$.', j.status)))
WHERE JSON_EXTRACT(%(moves)s, CONCAT('$.', j.status)) IS NOT NULL;
INSERT INTO duetime_outbox (job_id, attempt_id, queue, task, generation, version, created_at,
    claim_token, trace_context)
SELECT j.id, j.attempt_id, j.queue, j.task, j.generation, j.version, %(now)s, j.claim_token,
       j.trace_context
FROM duetime_jobs j
WHERE j.id IN (SELECT id FROM duetime_dispatch) AND j.status = 'running'
  AND j.attempt_id IS NOT NULL
ORDER BY j.neg_priority, j.due_at, j.id;
SELECT o.* FROM duetime_outbox o
JOIN duetime_jobs j ON j.id = o.job_id AND j.generation = o.generation
WHERE o.job_id IN (SELECT id FROM duetime_dispatch) AND o.created_at = %(now)s
ORDER BY o.id;

-- name: insert_outbox_events
-- The events of attempts a controlled dispatch started (claim_chosen held by `holder`): one
-- per attempt of `attempt_ids` (of the jobs of `job_ids`) still running and held, written in
-- claim order; the events come back.
INSERT INTO duetime_outbox (job_id, attempt_id, queue, task, generation, version, created_at,
    claim_token, trace_context)
SELECT j.id, j.attempt_id, j.queue, j.task, j.generation, j.version, %(now)s, j.claim_token,
       j.trace_context
FROM duetime_jobs j
WHERE j.id IN %(job_ids)s AND j.attempt_id IN %(attempt_ids)s
  AND j.worker_id = %(holder)s AND j.status = 'running'
ORDER BY j.neg_priority, j.due_at, j.id;
SELECT * FROM duetime_outbox
WHERE attempt_id IN %(attempt_ids)s AND created_at = %(now)s
ORDER BY id;

-- name: take_events
-- A relay leases up to `limit` unpublished events nobody holds (or whose relay lease ended,
-- or that it holds itself: taken again after a failed publish),
-- oldest first, skipping rows another relay is taking.
CREATE TEMPORARY TABLE IF NOT EXISTS duetime_take (id BIGINT NOT NULL PRIMARY KEY);
DELETE FROM duetime_take;
INSERT INTO duetime_take (id)
(SELECT id FROM duetime_outbox
 WHERE published_at IS NULL
   AND (relay_until IS NULL OR relay_until <= %(now)s OR relay_id = %(relay_id)s)
 ORDER BY id
 LIMIT %(limit)s
 FOR UPDATE SKIP LOCKED);
UPDATE duetime_outbox SET relay_id = %(relay_id)s, relay_until = %(until)s
WHERE id IN (SELECT id FROM duetime_take);
SELECT o.* FROM duetime_outbox o JOIN duetime_take t ON t.id = o.id ORDER BY o.id;

-- name: mark_published
-- The events the broker confirmed; the attempts no worker accepted yet get their lease from
-- now, on their jobs' rows (migration 22), locked first in id order.
SELECT id FROM duetime_jobs
WHERE id IN (SELECT job_id FROM duetime_outbox WHERE id IN %(ids)s)
ORDER BY id
FOR UPDATE;
UPDATE duetime_jobs j JOIN duetime_outbox o ON o.job_id = j.id AND o.attempt_id = j.attempt_id
SET j.lease_expires_at = DATE_ADD(%(now)s, INTERVAL FLOOR(%(lease_seconds)s * 1000000) MICROSECOND)
WHERE o.id IN %(ids)s AND o.published_at IS NULL
  AND j.status IN ('running', 'cancel_requested') AND j.worker_id = %(holder)s;
UPDATE duetime_outbox SET published_at = %(now)s WHERE id IN %(ids)s AND published_at IS NULL;

-- name: accept_dispatch
-- A worker takes a dispatched attempt, found by its job and claim token (never by its id
-- alone): only while the job still holds that generation and claim token (and that version,
-- unless cancellation was requested since) and no worker took it before; the job's deadline
-- has not passed; the attempt's lease becomes the job's own, from now. The attempt is the
-- job's row's (migration 22). MySQL assigns left to right: worker_id (the fence) goes last.
UPDATE duetime_jobs
SET started_at = %(now)s,
    lease_expires_at = DATE_ADD(%(now)s, INTERVAL FLOOR(lease_seconds * 1000000) MICROSECOND),
    worker_id = %(worker_id)s
WHERE id = %(job_id)s AND generation = %(generation)s AND claim_token = %(claim_token)s
  AND ((status = 'running' AND version = %(version)s) OR status = 'cancel_requested')
  AND (deadline_at IS NULL OR deadline_at > %(now)s)
  AND attempt_id IS NOT NULL AND worker_id = %(holder)s;

-- name: withdraw_dispatched
-- The attempts to withdraw are found (a read without locks), their jobs' rows locked in id
-- order and each found again under the lock (a worker's accept_dispatch that came first keeps
-- its attempt); their unpublished events go, and the jobs move back, their attempts cleared
-- (a withdrawn attempt leaves no row; migration 22).
CREATE TEMPORARY TABLE IF NOT EXISTS duetime_withdraw (
    job_id BIGINT NOT NULL PRIMARY KEY, attempt_id BIGINT NOT NULL);
DELETE FROM duetime_withdraw;
INSERT INTO duetime_withdraw (job_id, attempt_id)
SELECT j.id, j.attempt_id
FROM duetime_jobs j
WHERE j.status IN ('running', 'cancel_requested')  -- through the running jobs
  AND j.attempt_id IS NOT NULL AND j.worker_id = %(holder)s
  AND (j.id IN %(ids)s
       OR (%(direct)s AND j.queue NOT IN (
             SELECT q.queue FROM duetime_queues q WHERE q.dispatch = 'outbox')));
SELECT j.id FROM duetime_jobs j JOIN duetime_withdraw w ON w.job_id = j.id
ORDER BY j.id
FOR UPDATE;
DELETE FROM duetime_withdraw
WHERE NOT EXISTS (
    SELECT 1 FROM duetime_jobs j
    WHERE j.id = duetime_withdraw.job_id AND j.attempt_id = duetime_withdraw.attempt_id
      AND j.worker_id = %(holder)s
      AND JSON_EXTRACT(%(moves)s, CONCAT('$.', j.status)) IS NOT NULL);
DELETE o FROM duetime_outbox o JOIN duetime_withdraw w ON o.attempt_id = w.attempt_id
WHERE o.published_at IS NULL;
UPDATE duetime_jobs j JOIN duetime_withdraw w ON w.job_id = j.id
SET j.attempts = j.attempts - 1, j.version = j.version + 1, j.updated_at = %(now)s,
    j.status = JSON_UNQUOTE(JSON_EXTRACT(%(moves)s, CONCAT('$.', j.status))),
    j.worker_id = NULL, j.lease_expires_at = NULL, j.started_at = NULL,
    j.late_outcome = NULL, j.late_reported_at = NULL, j.attempt_id = NULL;
SELECT j.id, j.queue, j.status, j.due_at FROM duetime_jobs j
JOIN duetime_withdraw w ON w.job_id = j.id
ORDER BY j.id;

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
WHERE j.id = %(job_id)s AND a.job_id = %(job_id)s AND a.claim_token = %(claim_token)s;

-- name: outbox_figures
SELECT queue,
       SUM(CASE WHEN published_at IS NULL THEN 1 ELSE 0 END) AS backlog,
       MIN(CASE WHEN published_at IS NULL THEN created_at END) AS oldest_created_at,
       SUM(CASE WHEN published_at >= %(since)s THEN 1 ELSE 0 END) AS published
FROM duetime_outbox
WHERE published_at IS NULL OR published_at >= %(since)s
GROUP BY queue
ORDER BY queue;

-- name: dispatched_figures
-- Through the running jobs (as expired_leases): the attempts held by the outbox, by their
-- job's queue.
SELECT j.queue, COUNT(*) AS dispatched, MIN(j.started_at) AS oldest_dispatched_at
FROM duetime_jobs j
WHERE j.status IN ('running', 'cancel_requested')
  AND j.attempt_id IS NOT NULL AND j.worker_id = %(holder)s
GROUP BY j.queue
ORDER BY j.queue;

-- name: prune_outbox
DELETE FROM duetime_outbox
WHERE published_at IS NOT NULL AND published_at < %(before)s
ORDER BY published_at
LIMIT %(limit)s;

-- Limits per dependency (store/sql/limits.py).

-- name: limit_names
SELECT name FROM duetime_limits ORDER BY name;

-- name: limit_rows
SELECT * FROM duetime_limits ORDER BY name;

-- name: lock_limits
-- every limited claim locks every limit row, in name order: they take turns, never deadlock
SELECT * FROM duetime_limits ORDER BY name FOR UPDATE;

-- name: limit_running
SELECT j.limits AS limits, COUNT(*) AS running
FROM duetime_jobs j
WHERE j.status IN ('running', 'cancel_requested') AND j.limits IS NOT NULL
  AND j.attempt_id IS NOT NULL
  AND (j.lease_expires_at > %(now)s
       -- dispatched to the broker, its event not yet published: running, though no lease runs
       OR (j.worker_id = %(holder)s AND EXISTS (
           SELECT 1 FROM duetime_outbox o
           WHERE o.attempt_id = j.attempt_id AND o.published_at IS NULL)))
GROUP BY j.limits;

-- name: limit_waiting
SELECT limits, COUNT(*) AS waiting, MIN(due_at) AS oldest_due_at FROM duetime_jobs
WHERE status = 'scheduled' AND due_at <= %(now)s AND limits IS NOT NULL
GROUP BY limits;

-- name: claim_pick_limited
-- The claim's pick when limits are set: the claim-order index, without the
-- jobs carrying a blocked key, without the retries (attempts > 0) carrying a key of
-- retry_blocked (both JSON arrays of '"key"' strings, looked for in the limits text), and
-- without those already looked at (skip, a JSON array of ids); rows locked, others' skipped.
-- Only the priority classes of `classes`, as in claim: each class's range ends at now.
SELECT id, limits, attempts FROM duetime_jobs FORCE INDEX (duetime_jobs_due_any)
WHERE status = 'scheduled' AND neg_priority IN %(classes)s AND due_at <= %(now)s
  AND (deadline_at IS NULL OR deadline_at > %(now)s)
  AND (%(all_queues)s OR queue IN %(queues)s)
  AND (%(all_tasks)s OR task IN %(tasks)s)
  AND (%(all_direct)s OR queue NOT IN %(outbox_queues)s)
  AND id NOT IN (SELECT s.id FROM JSON_TABLE(%(skip)s, '$[*]' COLUMNS (id BIGINT PATH '$')) AS s)
  AND (limits IS NULL
       OR NOT EXISTS (SELECT 1 FROM JSON_TABLE(%(blocked)s, '$[*]'
                                               COLUMNS (k VARCHAR(110) PATH '$')) AS b
                      WHERE LOCATE(b.k, limits) > 0))
  AND (limits IS NULL OR attempts = 0
       OR NOT EXISTS (SELECT 1 FROM JSON_TABLE(%(retry_blocked)s, '$[*]'
                                               COLUMNS (k VARCHAR(110) PATH '$')) AS r
                      WHERE LOCATE(r.k, limits) > 0))
ORDER BY neg_priority, due_at, id
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: save_limit_state
UPDATE duetime_limits
SET tokens = %(tokens)s,
    refilled_at = %(refilled_at)s,
    window_at = %(window_at)s,
    cur_starts = %(cur_starts)s,
    cur_retries = %(cur_retries)s,
    cur_failures = %(cur_failures)s,
    cur_successes = %(cur_successes)s,
    prev_starts = %(prev_starts)s,
    prev_retries = %(prev_retries)s,
    prev_failures = %(prev_failures)s,
    prev_successes = %(prev_successes)s,
    breaker = %(breaker)s,
    breaker_until = %(breaker_until)s
WHERE name = %(name)s;

-- name: upsert_limit
INSERT INTO duetime_limits (name, rate_count, rate_period, burst, concurrency, retry_budget,
    breaker_threshold, breaker_cooldown, updated_at)
VALUES (%(name)s, %(rate_count)s, %(rate_period)s, %(burst)s, %(concurrency)s,
    %(retry_budget)s, %(breaker_threshold)s, %(breaker_cooldown)s, %(now)s)
ON DUPLICATE KEY UPDATE
    rate_count = VALUES(rate_count), rate_period = VALUES(rate_period), burst = VALUES(burst),
    concurrency = VALUES(concurrency), retry_budget = VALUES(retry_budget),
    breaker_threshold = VALUES(breaker_threshold), breaker_cooldown = VALUES(breaker_cooldown),
    updated_at = VALUES(updated_at);

-- name: delete_limit
DELETE FROM duetime_limits WHERE name = %(name)s;

-- name: pause_limit
INSERT INTO duetime_limits (name, paused_until, updated_at)
VALUES (%(name)s, %(until)s, %(now)s)
ON DUPLICATE KEY UPDATE
    paused_until = GREATEST(COALESCE(paused_until, VALUES(paused_until)), VALUES(paused_until));

-- name: lock_limits_named
SELECT * FROM duetime_limits WHERE name IN %(names)s ORDER BY name FOR UPDATE;

-- name: job_limits
SELECT id, limits FROM duetime_jobs WHERE id IN %(ids)s AND limits IS NOT NULL;

-- Dependencies (store/sql/dependencies.py; docs/workflows.md, "Dependencies") ---------------

-- name: lock_parents
-- Both tables (a job that ended may be in the history table, migration 25): one locking part
-- per table, each in id order, the jobs table's first. A locking read sees the newest
-- committed row, so a job that moved to the history table while the first part waited for it
-- is found by the second; one that moved back (a replay) is read again by
-- store/sql/shared.py lock_either.
(SELECT id, tenant, status, 0 AS done FROM duetime_jobs WHERE id IN %(ids)s ORDER BY id
 FOR UPDATE)
UNION ALL
(SELECT id, tenant, status, 1 AS done FROM duetime_jobs_done WHERE id IN %(ids)s ORDER BY id
 FOR UPDATE);

-- name: restore_job
-- A job of the history table back in the jobs table, its row as it is (an operator's move of
-- an ended job: store/sql/jobs.py Jobs.transition); the caller holds its row lock.
INSERT INTO duetime_jobs (
@job_columns
)
SELECT
@job_columns
FROM duetime_jobs_done WHERE id = %(id)s;
DELETE FROM duetime_jobs_done WHERE id = %(id)s;

-- name: mark_parents
UPDATE duetime_jobs SET has_children = 1
WHERE id IN %(ids)s AND has_children IS NULL;

-- name: insert_links
INSERT INTO duetime_job_parents (child_id, parent_id, outcome)
SELECT v.child_id, v.parent_id, v.outcome
FROM JSON_TABLE(%(batch)s, '$[*]' COLUMNS (
        child_id BIGINT PATH '$.child_id',
        parent_id BIGINT PATH '$.parent_id',
        outcome VARCHAR(20) PATH '$.outcome')) AS v;

-- name: set_dependency
-- MySQL assigns left to right: status goes last
UPDATE duetime_jobs AS j
JOIN JSON_TABLE(%(batch)s, '$[*]' COLUMNS (
        id BIGINT PATH '$.id',
        status VARCHAR(20) PATH '$.status',
        due_at DATETIME(6) PATH '$.due_at',
        on_parent_failure VARCHAR(16) PATH '$.on_parent_failure',
        release_delay DOUBLE PATH '$.release_delay',
        cancel_reason LONGTEXT PATH '$.cancel_reason',
        parents_left INT PATH '$.parents_left')) AS v ON j.id = v.id
SET j.due_at = v.due_at, j.on_parent_failure = v.on_parent_failure,
    j.release_delay = v.release_delay, j.cancel_reason = v.cancel_reason,
    j.parents_left = v.parents_left, j.status = v.status;

-- name: ended_parents
-- of these jobs, the ended ones whose children have not been told
SELECT id, status FROM duetime_jobs
WHERE id IN %(ids)s AND has_children = 1
  AND status IN ('succeeded', 'dead', 'cancelled', 'expired')
ORDER BY id
FOR UPDATE;

-- name: untold_children
SELECT child_id, parent_id FROM duetime_job_parents
WHERE parent_id IN %(ids)s AND outcome IS NULL
ORDER BY child_id, parent_id;

-- name: lock_children
SELECT id, status, queue, due_at, on_parent_failure, release_delay, has_children, parents_left
FROM duetime_jobs
WHERE id IN %(ids)s
ORDER BY id
FOR UPDATE;

-- name: tell_children
-- each parent's outcome on its links not told yet; the parents have no child left to tell
UPDATE duetime_job_parents AS l
JOIN JSON_TABLE(%(batch)s, '$[*]' COLUMNS (
        parent_id BIGINT PATH '$.parent_id',
        outcome VARCHAR(20) PATH '$.outcome')) AS v ON l.parent_id = v.parent_id
SET l.outcome = v.outcome
WHERE l.outcome IS NULL;
UPDATE duetime_jobs AS j
JOIN JSON_TABLE(%(batch)s, '$[*]' COLUMNS (parent_id BIGINT PATH '$.parent_id')) AS v
    ON j.id = v.parent_id
SET j.has_children = NULL;

-- name: count_parents_left
UPDATE duetime_jobs AS j
JOIN JSON_TABLE(%(batch)s, '$[*]' COLUMNS (
        id BIGINT PATH '$.id',
        parents_left INT PATH '$.parents_left')) AS v ON j.id = v.id
SET j.parents_left = v.parents_left;

-- name: unblock_jobs
UPDATE duetime_jobs AS j
JOIN JSON_TABLE(%(batch)s, '$[*]' COLUMNS (
        id BIGINT PATH '$.id',
        due_at DATETIME(6) PATH '$.due_at')) AS v ON j.id = v.id
SET j.due_at = v.due_at, j.version = j.version + 1, j.updated_at = %(now)s,
    j.status = JSON_UNQUOTE(JSON_EXTRACT(%(moves)s, CONCAT('$.', j.status)))
WHERE JSON_EXTRACT(%(moves)s, CONCAT('$.', j.status)) IS NOT NULL;

-- name: cancel_blocked
UPDATE duetime_jobs AS j
JOIN JSON_TABLE(%(batch)s, '$[*]' COLUMNS (
        id BIGINT PATH '$.id',
        reason LONGTEXT PATH '$.reason')) AS v ON j.id = v.id
SET j.cancel_reason = v.reason, j.version = j.version + 1, j.updated_at = %(now)s,
    j.status = JSON_UNQUOTE(JSON_EXTRACT(%(moves)s, CONCAT('$.', j.status)))
WHERE JSON_EXTRACT(%(moves)s, CONCAT('$.', j.status)) IS NOT NULL;

-- name: job_parents
-- Both tables (a job that ended may be in the history table, migration 25); each part stops
-- at the limit, in id order.
SELECT id, status FROM (
    SELECT * FROM (
        SELECT j.id, j.status FROM duetime_job_parents l JOIN duetime_jobs j ON j.id = l.parent_id
        WHERE l.child_id = %(id)s
        ORDER BY j.id
        LIMIT %(limit)s) AS hot
    UNION ALL
    SELECT * FROM (
        SELECT d.id, d.status FROM duetime_job_parents l
        JOIN duetime_jobs_done d ON d.id = l.parent_id
        WHERE l.child_id = %(id)s
        ORDER BY d.id
        LIMIT %(limit)s) AS done) AS r
ORDER BY id
LIMIT %(limit)s;

-- name: parent_results
-- Both tables (a job that ended may be in the history table, migration 25).
SELECT j.id, j.result FROM duetime_job_parents l JOIN duetime_jobs j ON j.id = l.parent_id
WHERE l.child_id = %(id)s AND j.status = 'succeeded'
UNION ALL
SELECT d.id, d.result FROM duetime_job_parents l JOIN duetime_jobs_done d ON d.id = l.parent_id
WHERE l.child_id = %(id)s AND d.status = 'succeeded'
ORDER BY id;

-- name: job_children
-- Both tables (a job that ended may be in the history table, migration 25); each part stops
-- at the limit, in id order.
SELECT id, status FROM (
    SELECT * FROM (
        SELECT j.id, j.status FROM duetime_job_parents l JOIN duetime_jobs j ON j.id = l.child_id
        WHERE l.parent_id = %(id)s
        ORDER BY j.id
        LIMIT %(limit)s) AS hot
    UNION ALL
    SELECT * FROM (
        SELECT d.id, d.status FROM duetime_job_parents l
        JOIN duetime_jobs_done d ON d.id = l.child_id
        WHERE l.parent_id = %(id)s
        ORDER BY d.id
        LIMIT %(limit)s) AS done) AS r
ORDER BY id
LIMIT %(limit)s;

-- name: unstarted_parents
SELECT id FROM duetime_jobs
WHERE schedule_id = %(schedule_id)s AND status IN ('scheduled', 'waiting', 'cancelled')
  AND generation = 0 AND has_children = 1 AND (%(origin)s IS NULL OR origin = %(origin)s)
ORDER BY id
FOR UPDATE;

-- name: lock_sequence
-- The sequence's row, made if absent, locked until the transaction ends.
INSERT INTO duetime_sequences (tenant, sequence_key)
VALUES (%(tenant)s, %(sequence_key)s)
ON DUPLICATE KEY UPDATE tenant = tenant;

-- name: drop_sequence
DELETE FROM duetime_sequences
WHERE tenant = %(tenant)s AND sequence_key = %(sequence_key)s;

-- name: sequence_busy
-- Both tables (a job that ended may be in the history table, migration 25): of the
-- jobs that ended, a dead one that holds its sequence keeps it busy.
SELECT id FROM duetime_jobs
WHERE sequence_key = %(sequence_key)s AND tenant = %(tenant)s AND id <> %(exclude)s
  AND (status IN ('scheduled', 'running', 'cancel_requested', 'parked')
       OR (%(waiting)s AND status = 'waiting')
       OR (status = 'dead' AND sequence_hold = 1))
UNION ALL
SELECT id FROM duetime_jobs_done
WHERE sequence_key = %(sequence_key)s AND tenant = %(tenant)s AND id <> %(exclude)s
  AND status = 'dead' AND sequence_hold = 1
LIMIT 1;

-- name: sequence_next
SELECT id, queue, due_at FROM duetime_jobs
WHERE sequence_key = %(sequence_key)s AND tenant = %(tenant)s AND status = 'waiting'
  AND id > %(after)s
ORDER BY id
LIMIT 1;

-- name: release_sequence_job
UPDATE duetime_jobs
SET version = version + 1, updated_at = %(now)s,
    status = JSON_UNQUOTE(JSON_EXTRACT(%(moves)s, CONCAT('$.', status)))
WHERE id = %(id)s AND JSON_EXTRACT(%(moves)s, CONCAT('$.', status)) IS NOT NULL;

-- name: rejoin_sequence
UPDATE duetime_jobs
SET status = 'waiting', version = version + 1, updated_at = %(now)s
WHERE id = %(id)s AND status = 'scheduled' AND sequence_key IS NOT NULL;

-- name: sequence_keys_of
SELECT DISTINCT tenant, sequence_key FROM duetime_jobs
WHERE id IN %(ids)s AND sequence_key IS NOT NULL;

-- name: sequence_ahead
-- Both tables (a job that ended may be in the history table, migration 25): of the
-- jobs that ended, a dead one that holds its sequence is ahead.
SELECT (
    SELECT COUNT(*) FROM duetime_jobs
    WHERE sequence_key = %(sequence_key)s AND tenant = %(tenant)s AND id < %(id)s
      AND (status IN ('scheduled', 'waiting', 'running', 'cancel_requested', 'parked')
           OR (status = 'dead' AND sequence_hold = 1))
) + (
    SELECT COUNT(*) FROM duetime_jobs_done
    WHERE sequence_key = %(sequence_key)s AND tenant = %(tenant)s AND id < %(id)s
      AND status = 'dead' AND sequence_hold = 1
) AS ahead;

-- name: clear_unique
UPDATE duetime_jobs SET unique_key = NULL
WHERE unique_key = %(unique_key)s AND tenant = %(tenant)s AND unique_until <= %(now)s;

-- name: job_by_unique
-- a locking read: it sees the newest committed row (as jobs_by_keys)
SELECT * FROM duetime_jobs WHERE unique_key = %(unique_key)s AND tenant = %(tenant)s
LOCK IN SHARE MODE;
