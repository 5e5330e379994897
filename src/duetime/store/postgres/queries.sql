-- Named statements of the PostgreSQL store: the same names as sqlite/queries.sql.
-- Job moves take %(moves)s, a JSON object {from_status: to_status} from core.states.TRANSITIONS:
-- (%(moves)s::jsonb ->> status) is the new status, NULL when the move is illegal.
-- A lease of lease_seconds ends at now + trunc(lease_seconds * 1e6) microseconds, as in SQLite.

-- name: insert_job
-- Many jobs in one statement: each parameter is an array with one element per job. The ids are
-- reserved by PostgresStore.enqueue, and rows go in in the order of the arrays (see the store).
INSERT INTO duetime_jobs (id, tenant, queue, task, args, priority, due_at, deadline_at, status,
    max_attempts, retry_base, retry_cap, lease_seconds, timeout_seconds, idempotency_key,
    request_hash, business_key, created_at, updated_at)
SELECT id, tenant, queue, task, args::jsonb, priority, due_at, deadline_at, 'scheduled',
    max_attempts, retry_base, retry_cap, lease_seconds, timeout_seconds, idempotency_key,
    request_hash, business_key, %(now)s, %(now)s
FROM unnest(%(id)b::bigint[], %(tenant)b::text[], %(queue)b::text[], %(task)b::text[],
    %(args)b::text[], %(priority)b::integer[], %(due_at)b::timestamptz[],
    %(deadline_at)b::timestamptz[], %(max_attempts)b::integer[],
    %(retry_base)b::double precision[], %(retry_cap)b::double precision[],
    %(lease_seconds)b::double precision[], %(timeout_seconds)b::double precision[],
    %(idempotency_key)b::text[], %(request_hash)b::text[], %(business_key)b::text[])
    WITH ORDINALITY AS new (id, tenant, queue, task, args, priority, due_at, deadline_at,
        max_attempts, retry_base, retry_cap, lease_seconds, timeout_seconds, idempotency_key,
        request_hash, business_key, position)
ORDER BY position
ON CONFLICT (tenant, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING *;

-- name: job_by_key
-- Many keys at once: %(tenant)s and %(key)s are arrays, pairwise.
SELECT * FROM duetime_jobs
WHERE (tenant, idempotency_key) IN (
    SELECT * FROM unnest(%(tenant)s::text[], %(key)s::text[]));

-- name: select_job
SELECT * FROM duetime_jobs
WHERE id = %(id)s AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text);

-- name: select_attempts
SELECT * FROM duetime_attempts WHERE job_id = %(id)s ORDER BY generation;

-- name: select_attempts_of_jobs
SELECT * FROM duetime_attempts WHERE job_id = ANY(%(ids)s) ORDER BY job_id, generation;

-- name: list_jobs
SELECT * FROM duetime_jobs
WHERE (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
  AND (%(status)s::text IS NULL OR status = %(status)s::text)
  AND (%(task)s::text IS NULL OR task = %(task)s::text)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(schedule_id)s::bigint IS NULL OR schedule_id = %(schedule_id)s::bigint)
  AND (%(before_id)s::bigint IS NULL OR id < %(before_id)s::bigint)
  AND (%(due_after)s::timestamptz IS NULL OR due_at >= %(due_after)s::timestamptz)
  AND (%(due_before)s::timestamptz IS NULL OR due_at < %(due_before)s::timestamptz)
ORDER BY id DESC
LIMIT %(limit)s;

-- name: pick_due
-- A claim is ONE statement that PostgresStore.claim puts together from three parts:
--   WITH picked AS (pick_due), claimed AS (claim_job), started AS (insert_attempt)
--   SELECT each claimed job with its new attempt.
SELECT id FROM duetime_jobs
WHERE status = 'scheduled'
  AND due_at <= %(now)s
  AND (deadline_at IS NULL OR deadline_at > %(now)s)
  AND (%(queues)s::text[] IS NULL OR queue = ANY (%(queues)s::text[]))
ORDER BY priority DESC, due_at, id
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED

-- name: claim_job
UPDATE duetime_jobs AS j
SET status = 'running', generation = j.generation + 1, attempts = j.attempts + 1,
    updated_at = %(now)s
FROM picked
WHERE j.id = picked.id AND j.status = 'scheduled'
RETURNING j.*

-- name: insert_attempt
INSERT INTO duetime_attempts (job_id, generation, worker_id, status, lease_expires_at, started_at,
    due_at)
SELECT id, generation, %(worker_id)s::text, 'running',
       %(now)s + trunc(lease_seconds * 1000000)::bigint * interval '1 microsecond', %(now)s, due_at
FROM claimed
ORDER BY priority DESC, due_at, id
RETURNING *

-- name: renew_lease
-- The job row is share-locked first, as every writer locks the job before its attempt: a
-- renewal and a reap (which locks the job, then checks the lease) are thus serialized.
WITH j AS (
    SELECT id, status, lease_seconds FROM duetime_jobs WHERE id = %(job_id)s FOR SHARE
)
UPDATE duetime_attempts AS a
SET lease_expires_at = %(now)s + trunc(j.lease_seconds * 1000000)::bigint * interval '1 microsecond'
FROM j
WHERE a.job_id = j.id
  AND a.id = %(attempt_id)s AND a.generation = %(generation)s AND a.status = 'running'
RETURNING a.lease_expires_at, j.status AS job_status;

-- name: finish_job
UPDATE duetime_jobs
SET status = (%(moves)s::jsonb ->> status),
    due_at = COALESCE(%(due_at)s::timestamptz, due_at),
    updated_at = %(now)s
WHERE id = %(job_id)s
  AND generation = %(generation)s
  AND (%(moves)s::jsonb ->> status) IS NOT NULL
  AND (NOT %(only_if_expired)s::boolean OR EXISTS (
        SELECT 1 FROM duetime_attempts
        WHERE id = %(attempt_id)s AND status = 'running' AND lease_expires_at <= %(now)s))
RETURNING status;

-- name: finish_attempt
UPDATE duetime_attempts
SET status = %(status)s::text, finished_at = %(now)s, error_category = %(error_category)s::text,
    error_message = %(error_message)s::text, error_traceback = %(error_traceback)s::text
WHERE id = %(attempt_id)s AND generation = %(generation)s AND status = 'running';

-- name: late_report
UPDATE duetime_attempts SET late_outcome = %(outcome)s::text, late_reported_at = %(now)s
WHERE id = %(attempt_id)s AND generation = %(generation)s;

-- name: expired_leases
SELECT a.id AS attempt_id, a.job_id, a.generation, j.status, j.attempts, j.max_attempts,
       j.retry_base, j.retry_cap
FROM duetime_attempts a JOIN duetime_jobs j ON j.id = a.job_id
WHERE a.status = 'running' AND a.lease_expires_at <= %(now)s
ORDER BY a.lease_expires_at, a.id
LIMIT %(limit)s;

-- name: expire_overdue
UPDATE duetime_jobs
SET status = (%(moves)s::jsonb ->> status), version = version + 1, updated_at = %(now)s
WHERE id = ANY (ARRAY(  -- candidates picked once (see release_waiting)
    SELECT id FROM duetime_jobs
    WHERE status = 'scheduled' AND deadline_at IS NOT NULL AND deadline_at <= %(now)s
    ORDER BY deadline_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED))
  AND (%(moves)s::jsonb ->> status) IS NOT NULL;

-- name: transition
UPDATE duetime_jobs
SET status = (%(moves)s::jsonb ->> status),
    due_at = COALESCE(%(due_at)s::timestamptz, due_at),
    attempts = CASE WHEN %(replay)s::boolean THEN 0 ELSE attempts END,
    deadline_at = CASE WHEN %(replay)s::boolean
                            AND deadline_at <= COALESCE(%(due_at)s::timestamptz, due_at)
                       THEN NULL ELSE deadline_at END,
    cancel_requested_at = CASE
        WHEN %(replay)s::boolean THEN NULL  -- a replay starts afresh
        WHEN (%(moves)s::jsonb ->> status) = 'cancel_requested'
             AND status <> 'cancel_requested' THEN %(now)s  -- a repeated request keeps its time
        ELSE cancel_requested_at END,
    version = version + 1,
    updated_at = %(now)s
WHERE id = %(job_id)s
  AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
  AND (%(moves)s::jsonb ->> status) IS NOT NULL
  AND (%(due_at)s::timestamptz IS NULL OR %(replay)s::boolean OR deadline_at IS NULL
       OR deadline_at > %(due_at)s::timestamptz)
RETURNING id;

-- name: insert_occurrence
-- One occurrence of a schedule; PostgresStore holds the schedule's row lock while it inserts.
INSERT INTO duetime_jobs (tenant, queue, task, args, priority, due_at, deadline_at, status,
    max_attempts, retry_base, retry_cap, lease_seconds, timeout_seconds, idempotency_key,
    request_hash, business_key, created_at, updated_at, schedule_id, schedule_name, nominal_at,
    covers, origin)
VALUES (%(tenant)s::text, %(queue)s::text, %(task)s::text, %(args)s::jsonb,
    %(priority)s::integer, %(due_at)s::timestamptz, NULL, %(status)s::text,
    %(max_attempts)s::integer, %(retry_base)s::double precision,
    %(retry_cap)s::double precision, %(lease_seconds)s::double precision,
    %(timeout_seconds)s::double precision, NULL, %(request_hash)s::text,
    %(business_key)s::text, %(now)s, %(now)s, %(schedule_id)s::bigint, %(schedule_name)s::text,
    %(nominal_at)s::timestamptz, %(covers)s::jsonb, %(origin)s::text)
ON CONFLICT (schedule_id, nominal_at) WHERE schedule_id IS NOT NULL DO NOTHING
RETURNING id;

-- name: occurrence_id
SELECT id FROM duetime_jobs
WHERE schedule_id = %(schedule_id)s AND nominal_at = %(nominal_at)s::timestamptz;

-- name: active_occurrences
SELECT id, nominal_at, status, generation, origin FROM duetime_jobs
WHERE schedule_id = %(schedule_id)s
  AND status IN ('scheduled', 'waiting', 'running', 'cancel_requested')
ORDER BY nominal_at;

-- name: delete_unstarted
DELETE FROM duetime_jobs
WHERE schedule_id = %(schedule_id)s AND status IN ('scheduled', 'waiting') AND generation = 0
  AND origin = 'tick';

-- name: release_waiting
-- Safe with several callers at once: a waiting row is locked (SKIP LOCKED: another caller has
-- it) and, once locked, re-checked in its newest version (READ COMMITTED), so a row another
-- caller released or cancelled meanwhile is left alone. One row per schedule at most: the
-- oldest waiting one. The candidates are picked once (ARRAY(...) is an init plan): a
-- subquery with LIMIT and SKIP LOCKED that the plan re-ran per row could yield other rows on
-- each run under concurrency, and so move more rows than the limit.
UPDATE duetime_jobs
SET status = (%(moves)s::jsonb ->> status), due_at = %(now)s, version = version + 1,
    updated_at = %(now)s
WHERE id = ANY (ARRAY(
    SELECT w.id FROM duetime_jobs w
    WHERE w.status = 'waiting' AND w.schedule_id IS NOT NULL
      AND w.nominal_at = (SELECT MIN(x.nominal_at) FROM duetime_jobs x
                          WHERE x.schedule_id = w.schedule_id AND x.status = 'waiting')
      AND NOT EXISTS (SELECT 1 FROM duetime_jobs a
                      WHERE a.schedule_id = w.schedule_id
                        AND a.status IN ('scheduled', 'running', 'cancel_requested'))
    ORDER BY w.nominal_at, w.id
    LIMIT %(limit)s
    FOR UPDATE OF w SKIP LOCKED))
  AND status = 'waiting'
  AND (%(moves)s::jsonb ->> status) IS NOT NULL;

-- name: insert_schedule
INSERT INTO duetime_schedules (tenant, name, spec, definition_hash, paused, anchor_at,
    next_fire_at, created_at, updated_at)
VALUES (%(tenant)s::text, %(name)s::text, %(spec)s::jsonb, %(definition_hash)s::text, false,
    %(anchor_at)s::timestamptz, %(next_fire_at)s::timestamptz, %(now)s, %(now)s)
ON CONFLICT (tenant, name) DO NOTHING
RETURNING *;

-- name: select_schedule
-- PostgresStore.apply_schedule and delete_schedule run this with FOR UPDATE appended.
SELECT * FROM duetime_schedules WHERE tenant = %(tenant)s::text AND name = %(name)s::text

-- name: list_schedules
-- Names in code-point order, as SQLite compares text (not the database's collation).
SELECT * FROM duetime_schedules
WHERE (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
ORDER BY name COLLATE "C", tenant COLLATE "C";

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
SET spec = COALESCE(%(spec)s::jsonb, spec),
    definition_hash = COALESCE(%(definition_hash)s::text, definition_hash),
    paused = COALESCE(%(paused)s::boolean, paused),
    anchor_at = COALESCE(%(anchor_at)s::timestamptz, anchor_at),
    next_fire_at = CASE WHEN %(move_cursor)s::boolean THEN %(next_fire_at)s::timestamptz
                        ELSE next_fire_at END,
    version = version + %(bump)s::integer,
    updated_at = %(now)s
WHERE id = %(id)s;

-- name: delete_schedule
DELETE FROM duetime_schedules WHERE id = %(id)s;

-- name: cancel_unstarted
UPDATE duetime_jobs
SET status = (%(moves)s::jsonb ->> status), version = version + 1, updated_at = %(now)s
WHERE schedule_id = %(schedule_id)s AND status IN ('scheduled', 'waiting') AND generation = 0
  AND (%(moves)s::jsonb ->> status) IS NOT NULL;

-- name: insert_tick
INSERT INTO duetime_ticks (schedule_id, nominal_at, outcome, origin, job_id, detail, recorded_at)
VALUES (%(schedule_id)s, %(nominal_at)s::timestamptz, %(outcome)s::text, %(origin)s::text,
    %(job_id)s::bigint, %(detail)s::text, %(now)s)
ON CONFLICT (schedule_id, nominal_at, outcome, origin)
DO UPDATE SET job_id = excluded.job_id, detail = excluded.detail,
    recorded_at = excluded.recorded_at;

-- name: list_ticks
SELECT t.*, j.status AS job_status,
       (SELECT MIN(a.started_at) FROM duetime_attempts a WHERE a.job_id = t.job_id) AS started_at
FROM duetime_ticks t LEFT JOIN duetime_jobs j ON j.id = t.job_id
WHERE t.schedule_id = %(schedule_id)s
  AND (%(before_id)s::bigint IS NULL OR t.id < %(before_id)s::bigint)
ORDER BY t.id DESC
LIMIT %(limit)s;

-- name: latest_run
SELECT id FROM duetime_jobs
WHERE schedule_id = %(schedule_id)s AND generation > 0
ORDER BY nominal_at DESC
LIMIT 1;

-- name: schema_version
SELECT COALESCE(MAX(version), 0) AS version FROM duetime_migrations;

-- name: upsert_node
INSERT INTO duetime_nodes (id, hostname, pid, queues, concurrency, duties, version, started_at,
    last_seen_at)
VALUES (%(id)s, %(hostname)s, %(pid)s, %(queues)s::jsonb, %(concurrency)s, %(duties)s::jsonb,
    %(version)s, %(now)s, %(now)s)
ON CONFLICT (id) DO UPDATE SET last_seen_at = excluded.last_seen_at, stopped_at = NULL;

-- name: touch_node
UPDATE duetime_nodes SET last_seen_at = %(now)s WHERE id = %(id)s;

-- name: stop_node
UPDATE duetime_nodes SET last_seen_at = %(now)s, stopped_at = %(now)s WHERE id = %(id)s;

-- name: list_nodes
SELECT n.*,
       ARRAY(SELECT a.job_id FROM duetime_attempts a
             WHERE a.worker_id = n.id AND a.status = 'running' ORDER BY a.job_id) AS holding
FROM duetime_nodes n
ORDER BY n.started_at DESC
LIMIT %(limit)s;

-- name: insert_token
INSERT INTO duetime_tokens (tenant, role, name, prefix, secret_hash, created_at)
VALUES (%(tenant)s, %(role)s, %(name)s, %(prefix)s, %(secret_hash)s, %(now)s)
RETURNING *;

-- name: list_tokens
SELECT * FROM duetime_tokens
WHERE (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
ORDER BY id;

-- name: revoke_token
UPDATE duetime_tokens SET revoked_at = COALESCE(revoked_at, %(now)s)
WHERE id = %(id)s
RETURNING *;

-- name: token_by_hash
-- last_used_at is kept to the minute, so a busy token does not write on every request
UPDATE duetime_tokens SET last_used_at = %(now)s
WHERE secret_hash = %(secret_hash)s
  AND (last_used_at IS NULL OR last_used_at < %(now)s - interval '1 minute')
RETURNING *;

-- name: token_by_hash_read
SELECT * FROM duetime_tokens WHERE secret_hash = %(secret_hash)s;

-- name: job_counts
SELECT status, queue, count(*) AS n FROM duetime_jobs
WHERE (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
GROUP BY status, queue
ORDER BY status, queue;

-- name: oldest_overdue
SELECT min(due_at) AS due_at FROM duetime_jobs
WHERE status = 'scheduled' AND due_at <= %(now)s
  AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text);

-- name: attempt_samples
-- the newest attempts started since a point in time, for lag, throughput and failure figures
SELECT j.task, j.queue, a.status, a.error_category, a.due_at, a.started_at, a.finished_at
FROM duetime_attempts a JOIN duetime_jobs j ON j.id = a.job_id
WHERE a.started_at >= %(since)s
  AND (%(tenant)s::text IS NULL OR j.tenant = %(tenant)s::text)
ORDER BY a.started_at DESC
LIMIT %(limit)s;
