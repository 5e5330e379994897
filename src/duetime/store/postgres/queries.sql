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

-- name: list_jobs
SELECT * FROM duetime_jobs
WHERE (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
  AND (%(status)s::text IS NULL OR status = %(status)s::text)
  AND (%(task)s::text IS NULL OR task = %(task)s::text)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(before_id)s::bigint IS NULL OR id < %(before_id)s::bigint)
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
INSERT INTO duetime_attempts (job_id, generation, worker_id, status, lease_expires_at, started_at)
SELECT id, generation, %(worker_id)s::text, 'running',
       %(now)s + trunc(lease_seconds * 1000000)::bigint * interval '1 microsecond', %(now)s
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
WHERE id IN (
    SELECT id FROM duetime_jobs
    WHERE status = 'scheduled' AND deadline_at IS NOT NULL AND deadline_at <= %(now)s
    ORDER BY deadline_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED)
  AND (%(moves)s::jsonb ->> status) IS NOT NULL;

-- name: transition
UPDATE duetime_jobs
SET status = (%(moves)s::jsonb ->> status),
    due_at = COALESCE(%(due_at)s::timestamptz, due_at),
    attempts = CASE WHEN %(replay)s::boolean THEN 0 ELSE attempts END,
    deadline_at = CASE WHEN %(replay)s::boolean
                            AND deadline_at <= COALESCE(%(due_at)s::timestamptz, due_at)
                       THEN NULL ELSE deadline_at END,
    cancel_requested_at = CASE WHEN (%(moves)s::jsonb ->> status) = 'cancel_requested'
                               THEN COALESCE(cancel_requested_at, %(now)s)
                               ELSE cancel_requested_at END,
    version = version + 1,
    updated_at = %(now)s
WHERE id = %(job_id)s
  AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
  AND (%(moves)s::jsonb ->> status) IS NOT NULL
  AND (%(due_at)s::timestamptz IS NULL OR %(replay)s::boolean OR deadline_at IS NULL
       OR deadline_at > %(due_at)s::timestamptz)
RETURNING id;

-- name: schema_version
SELECT COALESCE(MAX(version), 0) AS version FROM duetime_migrations;
