-- The PostgreSQL dialect's named statements; their contracts are in store/statements.py.
-- Instants are timestamptz; lists arrive as arrays. A lease of lease_seconds ends at
-- now + trunc(lease_seconds * 1e6) microseconds, as in every dialect.
-- Every writer locks a job's row before its attempt's row.
-- A batch of records (driver.Rows) is one JSON array read with json_to_recordset: each batch
-- is read once, and json builds no tree of the whole batch as jsonb_to_recordset's jsonb
-- does first (about 0.9 us of the server's CPU a record less, docs/performance.md).

-- part: classes
-- The priority classes of the scheduled jobs, highest first: a skip scan of the claim-order
-- index (PostgreSQL 15 has none of its own), one seek per class. A statement that names it
-- (@classes) walks the due rows of each class alone, one range (priority = c, due_at <= now)
-- in (due_at, id) order, instead of every entry due later (docs/performance.md, "The claim
-- walked class by class"). The seeks go up from the lowest class: each lands on its class's
-- last entry (due latest: live), where a seek down would land on its first (due earliest:
-- the entries of the jobs claimed since the last vacuum, dead, stepped over one by one, and
-- under an old snapshot each read from the heap). The few classes are then put highest first.
WITH RECURSIVE up AS (
    (SELECT priority FROM duetime_jobs WHERE status = 'scheduled'
     ORDER BY priority
     LIMIT 1)
    UNION ALL
    SELECT (SELECT j.priority FROM duetime_jobs j
            WHERE j.status = 'scheduled' AND j.priority > u.priority
            ORDER BY j.priority
            LIMIT 1)
    FROM up u
    WHERE u.priority IS NOT NULL
), classes AS (
    SELECT priority FROM up WHERE priority IS NOT NULL ORDER BY priority DESC
)

-- part: floored_classes
-- The part classes for the claim, whose walks start at its `floor` (NULL: none): only the
-- classes with an entry due from the floor on, each seek stepping over the entries due
-- before it in the index alone. Without the bound, a seek that lands on a class's last
-- entries while they are dead (every due job claimed, a transaction held open somewhere so
-- that none can be removed) read each of them from the heap, the class's whole run of
-- claimed jobs: 10 ms at 60,000 such entries, against 0.9 ms with it
-- (docs/performance.md, "The claim's floor"). Yet such a seek still steps over every entry
-- of a class it finds nothing in, in the index: PostgreSQL 15 bounds a walk by due_at only
-- within one priority. `known` (NULL or empty: none) names classes the claimer saw lately
-- (Claimer.known_classes): each is taken as it is, without a seek (its walk, a range of one
-- priority, finds nothing if it has no due job), and the seeks look only between them,
-- where a range of priorities bounds each (no entry to step over when no other class
-- exists). An empty claim under a transaction held open then costs its walks from the floor
-- alone, not every entry the hold kept (docs/performance.md, "The seeks between the known
-- classes").
WITH RECURSIVE up AS (
    SELECT (
        SELECT CASE WHEN n.k IS NULL THEN
            (SELECT priority FROM duetime_jobs WHERE status = 'scheduled'
               AND due_at >= COALESCE(%(floor)s::timestamptz, '-infinity')
             ORDER BY priority
             LIMIT 1)
        ELSE COALESCE(
            (SELECT priority FROM duetime_jobs WHERE status = 'scheduled' AND priority < n.k
               AND due_at >= COALESCE(%(floor)s::timestamptz, '-infinity')
             ORDER BY priority
             LIMIT 1),
            n.k) END
        FROM (SELECT MIN(k) AS k FROM unnest(%(known)s::integer[]) AS k) AS n
    ) AS priority
    UNION ALL
    SELECT (
        SELECT CASE WHEN n.k IS NULL THEN
            (SELECT j.priority FROM duetime_jobs j
             WHERE j.status = 'scheduled' AND j.priority > u.priority
               AND j.due_at >= COALESCE(%(floor)s::timestamptz, '-infinity')
             ORDER BY j.priority
             LIMIT 1)
        ELSE COALESCE(
            (SELECT j.priority FROM duetime_jobs j
             WHERE j.status = 'scheduled' AND j.priority > u.priority AND j.priority < n.k
               AND j.due_at >= COALESCE(%(floor)s::timestamptz, '-infinity')
             ORDER BY j.priority
             LIMIT 1),
            n.k) END
        FROM (SELECT MIN(k) AS k FROM unnest(%(known)s::integer[]) AS k
              WHERE k > u.priority) AS n
    )
    FROM up u
    WHERE u.priority IS NOT NULL
), classes AS (
    SELECT priority FROM up WHERE priority IS NOT NULL ORDER BY priority DESC
)

-- name: migrations_table_exists
SELECT 1 AS found WHERE to_regclass('duetime_migrations') IS NOT NULL;

-- name: create_migrations_table
CREATE TABLE IF NOT EXISTS duetime_migrations (
    version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL);

-- name: lock_migrations
-- "duetime\0" as a number; released when the transaction ends
SELECT pg_advisory_xact_lock(7238803526727329024);

-- name: unlock_migrations
-- the advisory lock above ends with the transaction
SELECT 1;

-- name: schema_version
SELECT COALESCE(MAX(version), 0) AS version FROM duetime_migrations;

-- name: insert_migration
INSERT INTO duetime_migrations (version, name, applied_at)
VALUES (%(version)s, %(name)s, %(now)s);

-- name: reserve_attempt_ids
-- The claim gives each attempt its id itself (nextval of the attempts' sequence, migration
-- 22): nothing to reserve (store/sql/attempt_ids.py).
SELECT NULL::bigint AS first_id;

-- name: reserve_job_ids
-- from the jobs' own sequence: never handed out twice, whatever commits or rolls back. The
-- sequence is looked up once (a sub-select), not per id, and cast to regclass inside it: cast
-- outside, the name was looked up again for each id (0.58 ms of 1,000 ids, 0.32 without);
-- the ids come back as one array.
SELECT array_agg(nextval((SELECT pg_get_serial_sequence('duetime_jobs', 'id')::regclass))) AS ids
FROM generate_series(1, %(count)s);

-- name: enqueue_one
-- One statement, so that with no transaction of the caller's it runs alone in autocommit: one
-- round trip. pg_notify is delivered when it commits (with the caller's transaction, if any).
WITH job AS (
    INSERT INTO duetime_jobs (tenant, queue, task, args, priority, due_at, deadline_at, status,
        max_attempts, retry_base, retry_cap, lease_seconds, timeout_seconds, idempotency_key,
        request_hash, business_key, created_at, updated_at, schedule_id, schedule_name,
        nominal_at, covers, origin, limits, trace_context,
    sequence_key, sequence_hold, unique_key, unique_until)
    VALUES (%(tenant)s, %(queue)s, %(task)s, %(args)s::jsonb, %(priority)s, %(due_at)s,
        %(deadline_at)s, %(status)s, %(max_attempts)s, %(retry_base)s, %(retry_cap)s,
        %(lease_seconds)s, %(timeout_seconds)s, %(idempotency_key)s, %(request_hash)s,
        %(business_key)s, %(now)s, %(now)s, %(schedule_id)s, %(schedule_name)s, %(nominal_at)s,
        %(covers)s::jsonb, %(origin)s, %(limits)s, %(trace_context)s,
    %(sequence_key)s, %(sequence_hold)s, %(unique_key)s, %(unique_until)s)
    ON CONFLICT DO NOTHING
    RETURNING id
)
SELECT id, pg_notify('duetime_due', %(wake)s::text) AS woke FROM job;

-- name: insert_job
INSERT INTO duetime_jobs (id, tenant, queue, task, args, priority, due_at, deadline_at, status,
    max_attempts, retry_base, retry_cap, lease_seconds, timeout_seconds, idempotency_key,
    request_hash, business_key, created_at, updated_at, schedule_id, schedule_name, nominal_at,
    covers, origin, limits, trace_context)
VALUES (%(id)s, %(tenant)s, %(queue)s, %(task)s, %(args)s::jsonb, %(priority)s, %(due_at)s,
    %(deadline_at)s, %(status)s, %(max_attempts)s, %(retry_base)s, %(retry_cap)s,
    %(lease_seconds)s, %(timeout_seconds)s, %(idempotency_key)s, %(request_hash)s,
    %(business_key)s, %(now)s, %(now)s, %(schedule_id)s, %(schedule_name)s, %(nominal_at)s,
    %(covers)s::jsonb, %(origin)s, %(limits)s, %(trace_context)s)
ON CONFLICT DO NOTHING;

-- name: insert_new_jobs
-- Fed by COPY (binary): the driver sends each job's parameters in this column order; created_at
-- and updated_at both take `now`.
COPY duetime_jobs (id, tenant, queue, task, args, priority, due_at, deadline_at, status,
    max_attempts, retry_base, retry_cap, lease_seconds, timeout_seconds, idempotency_key,
    request_hash, business_key, created_at, updated_at, schedule_id, schedule_name, nominal_at,
    covers, origin, limits, trace_context)
FROM STDIN (FORMAT BINARY);

-- name: insert_job_batch
-- enqueue_many's jobs: what they share as parameters, what differs in `rows`, a JSON array of
-- [args (its JSON object), due_at (null: the shared one), business_key] (the driver's
-- job_batch). The jobs take their ids from the jobs' sequence here (PostgresDriver.numbers_jobs,
-- looked up once as in reserve_job_ids): no round trip of reserve_job_ids before the insert.
-- Each row is numbered once (a materialized CTE) and the ids come back as one array in the
-- rows' order (each row's ordinal), so nothing rests on the order in which the insert reads
-- its rows. A `wake` not null is sent (pg_notify) by the statement itself: a batch of one
-- insert that commits alone is one round trip. One statement. The array is read as jsonb,
-- parsed once: as json, each ->> below parsed its row's text again (about 1 us of the
-- server's 11 to 13 per job), and args given as a string of JSON text were parsed again.
WITH numbered AS MATERIALIZED (
    SELECT nextval((SELECT pg_get_serial_sequence('duetime_jobs', 'id')::regclass)) AS id,
        e.r, e.n
    FROM jsonb_array_elements(%(rows)s::jsonb) WITH ORDINALITY AS e (r, n)
), made AS (
    INSERT INTO duetime_jobs (id, tenant, queue, task, args, priority, due_at, deadline_at,
        status, max_attempts, retry_base, retry_cap, lease_seconds, timeout_seconds,
        idempotency_key, request_hash, business_key, created_at, updated_at, schedule_id,
        schedule_name, nominal_at, covers, origin, limits, trace_context)
    SELECT id, %(tenant)s::text, %(queue)s::text, %(task)s::text, r -> 0, %(priority)s::int,
        COALESCE((r ->> 1)::timestamptz, %(due_at)s::timestamptz),
        %(deadline_at)s::timestamptz, %(status)s::text, %(max_attempts)s::int,
        %(retry_base)s::float8, %(retry_cap)s::float8, %(lease_seconds)s::float8,
        %(timeout_seconds)s::float8, NULL, %(request_hash)s::text, r ->> 2,
        %(now)s::timestamptz, %(now)s::timestamptz, NULL, NULL, NULL, NULL, %(origin)s::text,
        %(limits)s::text, %(trace_context)s::text
    FROM numbered
)
SELECT array_agg(id ORDER BY n) AS ids,
    (SELECT pg_notify('duetime_due', %(wake)s::text) WHERE %(wake)s::text IS NOT NULL) AS woke
FROM numbered;

-- name: jobs_by_ids
-- Both tables (a job that ended may be in the history table, migration 25).
SELECT
@job_columns
FROM duetime_jobs WHERE id = ANY (%(ids)s::bigint[])
UNION ALL
SELECT
@job_columns
FROM duetime_jobs_done WHERE id = ANY (%(ids)s::bigint[]);

-- name: jobs_by_keys
SELECT * FROM duetime_jobs
WHERE tenant = ANY (%(tenants)s::text[]) AND idempotency_key = ANY (%(keys)s::text[]);

-- name: select_job
-- Both tables (a job that ended may be in the history table, migration 25).
SELECT
@job_columns
FROM duetime_jobs WHERE id = %(id)s AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
UNION ALL
SELECT
@job_columns
FROM duetime_jobs_done WHERE id = %(id)s AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text);

-- name: select_attempts
-- every attempt, the running one from its job's row (migration 22: duetime_all_attempts)
SELECT * FROM duetime_all_attempts WHERE job_id = %(id)s ORDER BY generation;

-- name: select_attempts_of_jobs
SELECT * FROM duetime_all_attempts WHERE job_id = ANY (%(ids)s::bigint[])
ORDER BY job_id, generation;

-- part: listed
-- list_jobs' filters, the same on both tables
WHERE (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
  AND (%(status)s::text IS NULL OR status = %(status)s::text)
  AND (%(task)s::text IS NULL OR task = %(task)s::text)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(schedule_id)s::bigint IS NULL OR schedule_id = %(schedule_id)s::bigint)
  AND (%(before_id)s::bigint IS NULL OR id < %(before_id)s::bigint)
  AND (%(due_after)s::timestamptz IS NULL OR due_at >= %(due_after)s::timestamptz)
  AND (%(due_before)s::timestamptz IS NULL OR due_at < %(due_before)s::timestamptz)
  AND (%(business_key)s::text IS NULL OR business_key = %(business_key)s::text)
  AND (%(idempotency_key)s::text IS NULL OR idempotency_key = %(idempotency_key)s::text)
  AND (%(args_like)s::text IS NULL OR lower(args::text) LIKE %(args_like)s::text ESCAPE '!')

-- name: list_jobs
-- Both tables (a job that ended may be in the history table, migration 25): each part reads
-- newest first to the limit, through its own listing index, and the two merge.
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
SELECT id FROM duetime_jobs WHERE schedule_id = %(schedule_id)s AND nominal_at = %(nominal_at)s::timestamptz
UNION ALL
SELECT id FROM duetime_jobs_done WHERE schedule_id = %(schedule_id)s AND nominal_at = %(nominal_at)s::timestamptz;

-- name: claim
-- One statement: pick the due jobs (FOR UPDATE SKIP LOCKED: concurrent claimers skip each
-- other's rows instead of waiting), move them by the moves, start their attempts. 'scheduled'
-- is written out (not taken from the moves) so the partial indexes serve the pick. Only tasks
-- of `tasks` are taken (any task when all_tasks): a worker claims only what it can run. Jobs
-- of outbox_queues are left to the relay (dispatch_outbox): a list passed in, not a subquery
-- (whose unknown result skewed the estimates of the plans made per call). A
-- job of a paused queue is not started: the pick leaves out nothing for it (a claim runs this
-- statement when the store's copy of the control rows has no pause), but the move checks the
-- queue's row as it is now, so a pause made elsewhere holds at once; rows picked that way are
-- left as they were (free again at the commit).
-- Sorting is off for this transaction first: the pick then walks the claim-order index and
-- stops after `limit` rows, whatever the statistics say. Right after a bulk load (the 9:00
-- burst), before autovacuum has analyzed the table, the planner would otherwise believe few
-- rows are due and read and sort all of them (20 ms a claim at 30,000 due, not 0.3 ms).
-- (The sorts left, of `limit` rows, then look costly: JIT is off on duetime's connections.)
-- The pick walks the claim-order index class by class (the part classes), highest
-- class first, each walk one range (priority = c, due_at <= now) in (due_at, id) order: rows
-- come in claim order, so the limit stops the walks, and when fewer jobs are due than the
-- limit each walk ends at its class's last due row (one walk of the whole index, with
-- due_at <= now a filter, went on through every entry due later: PostgreSQL 15 has no skip
-- scan). `floor` (NULL: none) bounds each walk from below: a worker's claims start where its
-- last claim that took every due job left off, less a margin, lowered by wake-ups and by its
-- timer's looks below it (runtime/fairness.py, core/claim_floor.py, runtime/timer.py);
-- so do its seeks of the classes
-- (the part floored_classes). Under a transaction held open the
-- entries of the jobs claimed since it began stay in the index, dead yet not removable, and
-- a walk from each class's first entry stepped over all of them at every claim
-- (docs/performance.md, "The claim's floor").
-- The claim is prepared on each connection and planned once there (a generic plan: planning
-- it for each call's parameters was half of a small claim's CPU). That plan serves every
-- later call whatever the table holds by then (the first claim may find it empty, the next
-- a burst of a million), so it must not rest on the statistics of its day: with sequential
-- scans, hash and merge joins off as well, every step is an index walk or a nested loop of
-- index lookups (the pick walks the claim-order index, the move finds each picked job by
-- its key), the plan the plan tests check (tests/integration/test_plans.py, the generic
-- plans built on an empty table in test_plans_unanalyzed.py). An ANALYZE or a migration of
-- the table makes PostgreSQL plan it again, under the same settings.
-- The move takes its rows by their keys (id = ANY of the picked ids, an init plan), not by a
-- join to picked: after a VACUUM ANALYZE under a transaction held open has recorded the
-- table as empty, a join let the planner walk the whole primary key, every dead entry, for
-- each claim, and look each row up in picked (70 ms at 60,000 claimed jobs; the settings
-- cannot forbid a walk the pick itself needs). A list of keys leaves it one way: one seek
-- per key (docs/performance.md, "The claim's move and the heartbeat after a vacuum").
SELECT set_config('enable_sort', 'off', true), set_config('enable_seqscan', 'off', true),
       set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true),
       set_config('plan_cache_mode', 'force_generic_plan', true);
@floored_classes
, picked AS (
    SELECT p.id FROM classes c
    CROSS JOIN LATERAL (
        SELECT j.id FROM duetime_jobs j
        WHERE j.status = 'scheduled' AND j.priority = c.priority
          AND j.due_at <= %(now)s
          AND j.due_at >= COALESCE(%(floor)s::timestamptz, '-infinity')
          AND (j.deadline_at IS NULL OR j.deadline_at > %(now)s)
          AND (%(all_queues)s::boolean OR j.queue = ANY (%(queues)s::text[]))
          AND (%(all_tasks)s::boolean OR j.task = ANY (%(tasks)s::text[]))
          AND NOT (j.queue = ANY (%(outbox_queues)s::text[]))
        ORDER BY j.due_at, j.id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED) p
    LIMIT %(limit)s
), claimed AS (
    UPDATE duetime_jobs AS j
    SET status = (%(moves)s::jsonb ->> j.status), generation = j.generation + 1,
        claim_token = GREATEST(('x' || substr(translate(gen_random_uuid()::text, '-', ''), 1, 16))::bit(64)::bigint
            & 9223372036854775807, 1),
        attempts = j.attempts + 1, updated_at = %(now)s,
        -- the attempt starts on the job's row (migration 22): its id from the attempts'
        -- sequence, its row written once, at its end
        attempt_id = nextval('duetime_attempts_id_seq'), worker_id = %(worker_id)s::text,
        lease_expires_at = %(now)s + trunc(j.lease_seconds * 1000000)::bigint
            * interval '1 microsecond',
        started_at = %(now)s, late_outcome = NULL, late_reported_at = NULL
    WHERE j.id = ANY (ARRAY(SELECT id FROM picked)) AND (%(moves)s::jsonb ->> j.status) IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM duetime_queues q WHERE q.queue = j.queue AND q.paused)
    RETURNING
@claimed_columns
)
SELECT j.*,
       -- the timeline: the first 8 hex digits of the current WAL file's name
       (SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint)
           AS claim_epoch
FROM claimed AS j
ORDER BY j.priority DESC, j.due_at, j.id;

-- name: due_class_bounds
-- (Unused here: the claims walk the classes themselves; Driver.names_classes.)
SELECT
    (SELECT MAX(priority) FROM duetime_jobs WHERE status = 'scheduled') AS top_class,
    (SELECT MIN(priority) FROM duetime_jobs WHERE status = 'scheduled') AS end_class;

-- name: due_class_after
SELECT MAX(priority) AS class FROM duetime_jobs
WHERE status = 'scheduled' AND priority < %(after)s;

-- name: claim_queues
-- The claim of a worker of 1 to 4 named queues (store/sql/shared.py claim_statement), as claim
-- otherwise. Each named queue walks its own claim-order index (duetime_jobs_due) class by
-- class, as claim walks duetime_jobs_due_any: up_k finds the k-th queue's priorities with
-- scheduled jobs (one seek each, going up as the part classes does; classes_k puts them
-- highest first), each class's walk is one range
-- (queue, priority = c, due_at <= now) in (due_at, id) order, and a queue's walks stop at
-- `limit` rows; the best `limit` of the queues' rows are taken. The queue's name is a
-- constant of the plan in each branch (a name from a join would let the planner walk
-- duetime_jobs_due_any, filtering the queue). A worker of quiet queues
-- does not read the due jobs of the others one by one, nor the entries of its queues' jobs
-- due later. Rows a queue's walk locked but the claim does not take are free again at its
-- commit. (In claim itself, this form would cost every claim of all queues more to plan.)
-- Each seek and walk starts at `floor` as claim's do, and the seeks take the classes of
-- `known` as they are and look only between them (the part floored_classes).
-- Prepared as claim is, but planned for each call's parameters: a generic plan would not see
-- the queues' names, and a table whose statistics know of one queue alone would have every
-- queue's walk read duetime_jobs_due_any, the other queues' due jobs filtered out one by one.
SET LOCAL enable_sort = off;
SET LOCAL plan_cache_mode = force_custom_plan;
WITH RECURSIVE up_1 AS (
    SELECT (
        SELECT CASE WHEN n.k IS NULL THEN
            (SELECT priority FROM duetime_jobs
             WHERE status = 'scheduled' AND queue = (%(queues)s::text[])[1]
               AND due_at >= COALESCE(%(floor)s::timestamptz, '-infinity')
             ORDER BY priority
             LIMIT 1)
        ELSE COALESCE(
            (SELECT priority FROM duetime_jobs
             WHERE status = 'scheduled' AND queue = (%(queues)s::text[])[1] AND priority < n.k
               AND due_at >= COALESCE(%(floor)s::timestamptz, '-infinity')
             ORDER BY priority
             LIMIT 1),
            n.k) END
        FROM (SELECT MIN(k) AS k FROM unnest(%(known)s::integer[]) AS k) AS n
        WHERE cardinality(%(queues)s::text[]) >= 1
    ) AS priority
    UNION ALL
    SELECT (
        SELECT CASE WHEN n.k IS NULL THEN
            (SELECT j.priority FROM duetime_jobs j
             WHERE j.status = 'scheduled' AND j.queue = (%(queues)s::text[])[1]
               AND j.priority > u.priority
               AND j.due_at >= COALESCE(%(floor)s::timestamptz, '-infinity')
             ORDER BY j.priority
             LIMIT 1)
        ELSE COALESCE(
            (SELECT j.priority FROM duetime_jobs j
             WHERE j.status = 'scheduled' AND j.queue = (%(queues)s::text[])[1]
               AND j.priority > u.priority AND j.priority < n.k
               AND j.due_at >= COALESCE(%(floor)s::timestamptz, '-infinity')
             ORDER BY j.priority
             LIMIT 1),
            n.k) END
        FROM (SELECT MIN(k) AS k FROM unnest(%(known)s::integer[]) AS k
              WHERE k > u.priority) AS n
    )
    FROM up_1 u
    WHERE u.priority IS NOT NULL
), classes_1 AS (
    SELECT priority FROM up_1 WHERE priority IS NOT NULL ORDER BY priority DESC
), up_2 AS (
    SELECT (
        SELECT CASE WHEN n.k IS NULL THEN
            (SELECT priority FROM duetime_jobs
             WHERE status = 'scheduled' AND queue = (%(queues)s::text[])[2]
               AND due_at >= COALESCE(%(floor)s::timestamptz, '-infinity')
             ORDER BY priority
             LIMIT 1)
        ELSE COALESCE(
            (SELECT priority FROM duetime_jobs
             WHERE status = 'scheduled' AND queue = (%(queues)s::text[])[2] AND priority < n.k
               AND due_at >= COALESCE(%(floor)s::timestamptz, '-infinity')
             ORDER BY priority
             LIMIT 1),
            n.k) END
        FROM (SELECT MIN(k) AS k FROM unnest(%(known)s::integer[]) AS k) AS n
        WHERE cardinality(%(queues)s::text[]) >= 2
    ) AS priority
    UNION ALL
    SELECT (
        SELECT CASE WHEN n.k IS NULL THEN
            (SELECT j.priority FROM duetime_jobs j
             WHERE j.status = 'scheduled' AND j.queue = (%(queues)s::text[])[2]
               AND j.priority > u.priority
               AND j.due_at >= COALESCE(%(floor)s::timestamptz, '-infinity')
             ORDER BY j.priority
             LIMIT 1)
        ELSE COALESCE(
            (SELECT j.priority FROM duetime_jobs j
             WHERE j.status = 'scheduled' AND j.queue = (%(queues)s::text[])[2]
               AND j.priority > u.priority AND j.priority < n.k
               AND j.due_at >= COALESCE(%(floor)s::timestamptz, '-infinity')
             ORDER BY j.priority
             LIMIT 1),
            n.k) END
        FROM (SELECT MIN(k) AS k FROM unnest(%(known)s::integer[]) AS k
              WHERE k > u.priority) AS n
    )
    FROM up_2 u
    WHERE u.priority IS NOT NULL
), classes_2 AS (
    SELECT priority FROM up_2 WHERE priority IS NOT NULL ORDER BY priority DESC
), up_3 AS (
    SELECT (
        SELECT CASE WHEN n.k IS NULL THEN
            (SELECT priority FROM duetime_jobs
             WHERE status = 'scheduled' AND queue = (%(queues)s::text[])[3]
               AND due_at >= COALESCE(%(floor)s::timestamptz, '-infinity')
             ORDER BY priority
             LIMIT 1)
        ELSE COALESCE(
            (SELECT priority FROM duetime_jobs
             WHERE status = 'scheduled' AND queue = (%(queues)s::text[])[3] AND priority < n.k
               AND due_at >= COALESCE(%(floor)s::timestamptz, '-infinity')
             ORDER BY priority
             LIMIT 1),
            n.k) END
        FROM (SELECT MIN(k) AS k FROM unnest(%(known)s::integer[]) AS k) AS n
        WHERE cardinality(%(queues)s::text[]) >= 3
    ) AS priority
    UNION ALL
    SELECT (
        SELECT CASE WHEN n.k IS NULL THEN
            (SELECT j.priority FROM duetime_jobs j
             WHERE j.status = 'scheduled' AND j.queue = (%(queues)s::text[])[3]
               AND j.priority > u.priority
               AND j.due_at >= COALESCE(%(floor)s::timestamptz, '-infinity')
             ORDER BY j.priority
             LIMIT 1)
        ELSE COALESCE(
            (SELECT j.priority FROM duetime_jobs j
             WHERE j.status = 'scheduled' AND j.queue = (%(queues)s::text[])[3]
               AND j.priority > u.priority AND j.priority < n.k
               AND j.due_at >= COALESCE(%(floor)s::timestamptz, '-infinity')
             ORDER BY j.priority
             LIMIT 1),
            n.k) END
        FROM (SELECT MIN(k) AS k FROM unnest(%(known)s::integer[]) AS k
              WHERE k > u.priority) AS n
    )
    FROM up_3 u
    WHERE u.priority IS NOT NULL
), classes_3 AS (
    SELECT priority FROM up_3 WHERE priority IS NOT NULL ORDER BY priority DESC
), up_4 AS (
    SELECT (
        SELECT CASE WHEN n.k IS NULL THEN
            (SELECT priority FROM duetime_jobs
             WHERE status = 'scheduled' AND queue = (%(queues)s::text[])[4]
               AND due_at >= COALESCE(%(floor)s::timestamptz, '-infinity')
             ORDER BY priority
             LIMIT 1)
        ELSE COALESCE(
            (SELECT priority FROM duetime_jobs
             WHERE status = 'scheduled' AND queue = (%(queues)s::text[])[4] AND priority < n.k
               AND due_at >= COALESCE(%(floor)s::timestamptz, '-infinity')
             ORDER BY priority
             LIMIT 1),
            n.k) END
        FROM (SELECT MIN(k) AS k FROM unnest(%(known)s::integer[]) AS k) AS n
        WHERE cardinality(%(queues)s::text[]) >= 4
    ) AS priority
    UNION ALL
    SELECT (
        SELECT CASE WHEN n.k IS NULL THEN
            (SELECT j.priority FROM duetime_jobs j
             WHERE j.status = 'scheduled' AND j.queue = (%(queues)s::text[])[4]
               AND j.priority > u.priority
               AND j.due_at >= COALESCE(%(floor)s::timestamptz, '-infinity')
             ORDER BY j.priority
             LIMIT 1)
        ELSE COALESCE(
            (SELECT j.priority FROM duetime_jobs j
             WHERE j.status = 'scheduled' AND j.queue = (%(queues)s::text[])[4]
               AND j.priority > u.priority AND j.priority < n.k
               AND j.due_at >= COALESCE(%(floor)s::timestamptz, '-infinity')
             ORDER BY j.priority
             LIMIT 1),
            n.k) END
        FROM (SELECT MIN(k) AS k FROM unnest(%(known)s::integer[]) AS k
              WHERE k > u.priority) AS n
    )
    FROM up_4 u
    WHERE u.priority IS NOT NULL
), classes_4 AS (
    SELECT priority FROM up_4 WHERE priority IS NOT NULL ORDER BY priority DESC
), picked AS (
    SELECT id FROM (
        SELECT id, priority, due_at FROM (
            SELECT p.id, c.priority, p.due_at FROM classes_1 c
            CROSS JOIN LATERAL (
                SELECT j.id, j.due_at FROM duetime_jobs j
                WHERE j.status = 'scheduled' AND j.queue = (%(queues)s::text[])[1]
                  AND j.priority = c.priority AND j.due_at <= %(now)s
                  AND j.due_at >= COALESCE(%(floor)s::timestamptz, '-infinity')
                  AND (j.deadline_at IS NULL OR j.deadline_at > %(now)s)
                  AND (%(all_tasks)s::boolean OR j.task = ANY (%(tasks)s::text[]))
                  AND NOT (j.queue = ANY (%(outbox_queues)s::text[]))
                ORDER BY j.due_at, j.id
                LIMIT %(limit)s
                FOR UPDATE SKIP LOCKED) p
            LIMIT %(limit)s) AS queue_1
        UNION ALL
        SELECT id, priority, due_at FROM (
            SELECT p.id, c.priority, p.due_at FROM classes_2 c
            CROSS JOIN LATERAL (
                SELECT j.id, j.due_at FROM duetime_jobs j
                WHERE j.status = 'scheduled' AND j.queue = (%(queues)s::text[])[2]
                  AND j.priority = c.priority AND j.due_at <= %(now)s
                  AND j.due_at >= COALESCE(%(floor)s::timestamptz, '-infinity')
                  AND (j.deadline_at IS NULL OR j.deadline_at > %(now)s)
                  AND (%(all_tasks)s::boolean OR j.task = ANY (%(tasks)s::text[]))
                  AND NOT (j.queue = ANY (%(outbox_queues)s::text[]))
                ORDER BY j.due_at, j.id
                LIMIT %(limit)s
                FOR UPDATE SKIP LOCKED) p
            LIMIT %(limit)s) AS queue_2
        UNION ALL
        SELECT id, priority, due_at FROM (
            SELECT p.id, c.priority, p.due_at FROM classes_3 c
            CROSS JOIN LATERAL (
                SELECT j.id, j.due_at FROM duetime_jobs j
                WHERE j.status = 'scheduled' AND j.queue = (%(queues)s::text[])[3]
                  AND j.priority = c.priority AND j.due_at <= %(now)s
                  AND j.due_at >= COALESCE(%(floor)s::timestamptz, '-infinity')
                  AND (j.deadline_at IS NULL OR j.deadline_at > %(now)s)
                  AND (%(all_tasks)s::boolean OR j.task = ANY (%(tasks)s::text[]))
                  AND NOT (j.queue = ANY (%(outbox_queues)s::text[]))
                ORDER BY j.due_at, j.id
                LIMIT %(limit)s
                FOR UPDATE SKIP LOCKED) p
            LIMIT %(limit)s) AS queue_3
        UNION ALL
        SELECT id, priority, due_at FROM (
            SELECT p.id, c.priority, p.due_at FROM classes_4 c
            CROSS JOIN LATERAL (
                SELECT j.id, j.due_at FROM duetime_jobs j
                WHERE j.status = 'scheduled' AND j.queue = (%(queues)s::text[])[4]
                  AND j.priority = c.priority AND j.due_at <= %(now)s
                  AND j.due_at >= COALESCE(%(floor)s::timestamptz, '-infinity')
                  AND (j.deadline_at IS NULL OR j.deadline_at > %(now)s)
                  AND (%(all_tasks)s::boolean OR j.task = ANY (%(tasks)s::text[]))
                  AND NOT (j.queue = ANY (%(outbox_queues)s::text[]))
                ORDER BY j.due_at, j.id
                LIMIT %(limit)s
                FOR UPDATE SKIP LOCKED) p
            LIMIT %(limit)s) AS queue_4
    ) AS named
    ORDER BY priority DESC, due_at, id
    LIMIT %(limit)s
), claimed AS (
    UPDATE duetime_jobs AS j
    SET status = (%(moves)s::jsonb ->> j.status), generation = j.generation + 1,
        claim_token = GREATEST(('x' || substr(translate(gen_random_uuid()::text, '-', ''), 1, 16))::bit(64)::bigint
            & 9223372036854775807, 1),
        attempts = j.attempts + 1, updated_at = %(now)s,
        -- the attempt starts on the job's row (migration 22): its id from the attempts'
        -- sequence, its row written once, at its end
        attempt_id = nextval('duetime_attempts_id_seq'), worker_id = %(worker_id)s::text,
        lease_expires_at = %(now)s + trunc(j.lease_seconds * 1000000)::bigint
            * interval '1 microsecond',
        started_at = %(now)s, late_outcome = NULL, late_reported_at = NULL
    WHERE j.id = ANY (ARRAY(SELECT id FROM picked)) AND (%(moves)s::jsonb ->> j.status) IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM duetime_queues q WHERE q.queue = j.queue AND q.paused)
    RETURNING
@claimed_columns
)
SELECT j.*,
       -- the timeline: the first 8 hex digits of the current WAL file's name
       (SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint)
           AS claim_epoch
FROM claimed AS j
ORDER BY j.priority DESC, j.due_at, j.id;

-- name: renew_leases
-- The leases of `leases` (job_id, claim_token): an attempt is renewed only while its job
-- holds its claim token and runs it. The running attempt is the job's row's (migration 22):
-- the jobs' rows are locked in id order (every writer locks the job's row first) and only
-- their lease_expires_at changes; no index covers it, so a renewal can be a HOT update. No
-- attempt row is written.
-- The rows are read by their keys alone (id = ANY of the batch's ids; the status checked
-- above the lock, on the row as locked), and updated by the keys of those held: after a
-- VACUUM ANALYZE under a transaction held open had recorded the table as empty, a join to
-- the batch walked the whole primary key, and a status condition beside the keys would let
-- the planner walk duetime_jobs_status's running entries, dead ones included, for each
-- renewal (18 ms a batch at 40,000 such jobs, against 0.2; docs/performance.md, "The claim's
-- move and the heartbeat after a vacuum"). Sequential scans are off for this transaction,
-- as in finish_jobs.
SELECT set_config('enable_seqscan', 'off', true);
WITH v AS (
    SELECT * FROM json_to_recordset(%(leases)s::json) AS v(job_id bigint, claim_token bigint)
), held AS (
    SELECT j.id, j.status FROM duetime_jobs j JOIN v ON v.job_id = j.id AND v.claim_token = j.claim_token
    WHERE j.id = ANY (ARRAY(SELECT b.job_id FROM v AS b)) AND j.attempt_id IS NOT NULL
    ORDER BY j.id
    FOR UPDATE OF j
)
UPDATE duetime_jobs AS j
SET lease_expires_at = %(now)s + trunc(j.lease_seconds * 1000000)::bigint * interval '1 microsecond'
WHERE j.id = ANY (ARRAY(
    SELECT h.id FROM held h WHERE h.status IN ('running', 'cancel_requested')));

-- name: lease_states
-- Each job by its id and claim token, with the attempt it runs (its row's, migration 22).
-- Read by the keys alone, then checked (as renew_leases, which the same heartbeat runs).
WITH v AS (
    SELECT * FROM json_to_recordset(%(leases)s::json) AS v(job_id bigint, claim_token bigint)
), keyed AS MATERIALIZED (
    SELECT j.attempt_id, j.id, j.generation, j.claim_token, j.lease_expires_at, j.status
    FROM duetime_jobs j
    WHERE j.id = ANY (ARRAY(SELECT b.job_id FROM v AS b))
)
SELECT j.attempt_id, j.id AS job_id, j.generation, j.claim_token, j.lease_expires_at,
       j.status AS job_status
FROM keyed j JOIN v ON j.id = v.job_id AND j.claim_token = v.claim_token
WHERE j.status IN ('running', 'cancel_requested') AND j.attempt_id IS NOT NULL;

-- name: lock_jobs
-- The jobs' rows locked in id order, each with its current attempt (the one it runs, on its
-- row: migration 22), if any.
SELECT j.id, j.generation, j.claim_token, j.status, j.queue, j.has_children, j.tenant, j.sequence_key,
       CASE WHEN j.attempt_id IS NOT NULL AND j.status IN ('running', 'cancel_requested')
            THEN 'running' END AS attempt_status,
       j.lease_expires_at AS attempt_lease_expires_at
FROM duetime_jobs j
WHERE j.id = ANY (%(ids)s::bigint[])
ORDER BY j.id
FOR UPDATE OF j;

-- part: finish_moves
-- What finish_jobs and finish_held do (see finish_jobs), up to what they return.
WITH v AS (
    SELECT v.job_id, v.generation, v.claim_token, v.from_status, v.to_status, v.due_at,
           v.only_if_expired, v.status, v.error_category, v.error_message, v.error_traceback,
           COALESCE(v.kept, false) AS kept  -- a batch without the flag writes every row
    FROM json_to_recordset(%(batch)s::json) AS v(job_id bigint, generation bigint,
        claim_token bigint, from_status text, to_status text, due_at timestamptz,
        only_if_expired boolean, status text, error_category text, error_message text,
        error_traceback text, kept boolean)
), keys AS (  -- the batch's ids and their bounds: every read of the jobs below names them
    SELECT array_agg(b.job_id) AS ids, min(b.job_id) AS low, max(b.job_id) AS high FROM v AS b
), ending AS (
    SELECT j.id, j.generation, j.claim_token, j.attempt_id, j.worker_id, j.lease_expires_at,
           j.started_at, j.due_at, j.late_outcome, j.late_reported_at, j.has_children,
           j.tenant, j.sequence_key, j.queue, v.to_status,
           v.to_status IN ('succeeded', 'dead', 'cancelled', 'expired')
               AND j.idempotency_key IS NULL AND j.unique_key IS NULL
               AND (j.schedule_id IS NULL OR j.nominal_at IS NULL) AS leaving
    FROM duetime_jobs j JOIN v ON j.id = v.job_id
    -- read by the key, whatever the plan (the cast makes ANY take the array, not a subquery)
    WHERE j.id = ANY ((SELECT ids FROM keys)::bigint[])
      AND j.id BETWEEN (SELECT low FROM keys) AND (SELECT high FROM keys)
      AND j.generation = v.generation AND j.claim_token = v.claim_token
      AND j.status = v.from_status AND j.attempt_id IS NOT NULL
      AND (NOT v.only_if_expired OR j.lease_expires_at <= %(now)s)
    ORDER BY j.id
    FOR UPDATE OF j
), applies AS (  -- `whole`: every job of the batch or none
    SELECT NOT %(whole)s::boolean OR (SELECT count(*) FROM ending) = (SELECT count(*) FROM v)
        AS ok
), moved AS (
    UPDATE duetime_jobs AS j
    SET status = v.to_status, due_at = COALESCE(v.due_at, j.due_at), updated_at = %(now)s,
        attempt_id = CASE WHEN v.kept THEN j.attempt_id END,
        worker_id = CASE WHEN v.kept THEN j.worker_id END,
        lease_expires_at = CASE WHEN v.kept THEN j.lease_expires_at END,
        started_at = CASE WHEN v.kept THEN j.started_at END,
        late_outcome = CASE WHEN v.kept THEN j.late_outcome END,
        late_reported_at = CASE WHEN v.kept THEN j.late_reported_at END
    FROM ending JOIN v ON v.job_id = ending.id
    WHERE j.id = ending.id AND NOT ending.leaving
      AND j.id BETWEEN (SELECT low FROM keys) AND (SELECT high FROM keys)
      AND (SELECT ok FROM applies)
    RETURNING j.id
), gone AS (
    DELETE FROM duetime_jobs AS j
    USING ending, v
    WHERE j.id = ending.id AND v.job_id = ending.id AND ending.leaving
      AND j.id BETWEEN (SELECT low FROM keys) AND (SELECT high FROM keys)
      AND (SELECT ok FROM applies)
    RETURNING j.id, j.tenant, j.queue, j.task, j.args, j.priority,
        COALESCE(v.due_at, j.due_at) AS due_at, j.deadline_at, v.to_status AS status,
        j.version, j.attempts, j.max_attempts, j.generation, j.retry_base, j.retry_cap,
        j.lease_seconds, j.timeout_seconds, j.idempotency_key, j.request_hash, j.business_key,
        j.cancel_requested_at, j.created_at, %(now)s::timestamptz AS updated_at, j.schedule_id,
        j.schedule_name, j.nominal_at, j.covers, j.origin, j.limits, j.claim_token, j.result,
        j.progress, j.progress_message, j.progress_at, j.sequence_key, j.sequence_hold,
        j.unique_key, j.unique_until, j.has_children, j.on_parent_failure, j.parents_left,
        j.release_delay, j.cancel_reason, j.trace_context,
        CASE WHEN v.kept THEN j.attempt_id END AS attempt_id,
        CASE WHEN v.kept THEN j.worker_id END AS worker_id,
        CASE WHEN v.kept THEN j.lease_expires_at END AS lease_expires_at,
        CASE WHEN v.kept THEN j.started_at END AS started_at,
        CASE WHEN v.kept THEN j.late_outcome END AS late_outcome,
        CASE WHEN v.kept THEN j.late_reported_at END AS late_reported_at
), archived AS (
    INSERT INTO duetime_jobs_done (
@job_columns
    )
    SELECT
@job_columns
    FROM gone
), ended AS (
    INSERT INTO duetime_attempts (id, job_id, generation, claim_token, worker_id, status,
        lease_expires_at, started_at, finished_at, error_category, error_message,
        error_traceback, late_outcome, late_reported_at, due_at)
    SELECT m.attempt_id, m.id, m.generation, m.claim_token, m.worker_id, v.status,
           m.lease_expires_at, m.started_at, %(now)s, v.error_category, v.error_message,
           v.error_traceback, m.late_outcome, m.late_reported_at, m.due_at
    FROM ending m JOIN v ON v.job_id = m.id
    WHERE NOT v.kept
      AND (m.id IN (SELECT id FROM moved) OR m.id IN (SELECT id FROM gone))
    ORDER BY m.id
)

-- name: finish_jobs
-- One statement: the jobs move (fenced by generation, claim token, status, the attempt they
-- run and, for a reap, its expired lease); a plain success (`kept`, store/sql/finish.py)
-- stays on its job's row (migration 24: its current-attempt columns are kept, its end is
-- the job's updated_at), and every other ended attempt has its job's columns cleared and
-- its row inserted, once, with its outcome (migration 22). A job that ends and holds no key
-- leaves the jobs table here (`leaving`: deleted, and inserted as it ended into the history
-- table, docs/history-plan.md step 8; the other dialects keep it in the jobs table for now);
-- a retry, a park and a keyed job are updated in place. The rows are
-- locked here, in id order: after lock_jobs (the long way, store/sql/finish.py), or alone for
-- a batch of attempts that all still hold their running jobs (finish_held, with `whole`: its
-- moves are this statement's, the part finish_moves): then every job moves or none does, and
-- the caller, told that none did, commits and goes the long way (no rollback: psycopg's
-- rollback forgets the connection's prepared statements). The moved jobs' ids come back
-- (their count is the row count); the long way read the rest of what it needs under its locks.
-- It is prepared on each connection (driver.py `_prepared`) and its plan cached there, so
-- that plan must not rest on the table's size when it was made: a plan made while the jobs
-- table was small (a worker started on a quiet database) read the whole table for each
-- batch ever after (a hash join over a sequential scan: 13 ms a batch of 10 at 50,000 jobs,
-- against 0.27 ms by the primary key; docs/performance.md, Under pressure). So sequential
-- scans are off for the finish's transaction, and `ending` names the batch's ids as an
-- array (`id = ANY`), which a plan made for any size of table reads through the primary
-- key; hash joins stay on for the batch's own rows (off, a batch of 200 took 25 ms).
-- Plain and index-only scans are off too (for the rest of the finish's transaction, which
-- reads by key): the jobs are read by bitmap scans of the primary key, the only index a
-- condition of the statement names. A VACUUM ANALYZE that finds the table empty (every job
-- claimed and finished under a transaction held open: their dead rows stay, yet none is
-- live) makes the planner believe the table holds a row, and the plan made again on that
-- walked a whole other index, every dead entry of it, to build the batch's hash: 15 to 30 ms
-- a batch, against 1.5 (docs/performance.md, "The finish's plan after a vacuum").
-- Every read of the jobs also names the batch's bounds (`keys`: id BETWEEN its least and
-- greatest id). A vacuum that finds one job live makes the planner take any condition on the
-- key to select every row, and it then leaves bitmap scans out where an index's order is of
-- use (the ORDER BY, a merge join): the plan walked whole indexes with the index scans
-- turned off, 7,600 pages a batch instead of 160, until the next ANALYZE. A range of
-- unknown bounds is estimated to select a small share of the rows, so the bitmap scans of
-- the key stay in (docs/performance.md, "The finish's plan with one job live").
SELECT set_config('enable_seqscan', 'off', true), set_config('enable_indexscan', 'off', true),
       set_config('enable_indexonlyscan', 'off', true);
@finish_moves
SELECT id FROM ending
WHERE id IN (SELECT id FROM moved) OR id IN (SELECT id FROM gone);

-- name: finish_held
-- finish_jobs for a batch whose attempts all hold their jobs (store/sql/finish.py
-- _finish_held, `whole`), answering in one row instead of a row for each job: how many
-- jobs moved, and, as JSON, those of them the rest of the finish acts on (a parent that
-- ended, a job of a sequence, a retry: [id, has_children, tenant, sequence_key, queue]
-- each, as text, parsed by the caller whatever JSON loader the application gave psycopg;
-- NULL when none is, as for most batches). store/sql/finish.py _after_moves reads those three
-- of the jobs it is told of, and only those: this filter and its reads change together.
SELECT set_config('enable_seqscan', 'off', true), set_config('enable_indexscan', 'off', true),
       set_config('enable_indexonlyscan', 'off', true);
@finish_moves
SELECT count(*) AS moved,
       json_agg(json_build_array(e.id, e.has_children, e.tenant, e.sequence_key, e.queue))
           FILTER (WHERE COALESCE(e.has_children, 0) <> 0 OR e.sequence_key IS NOT NULL
                   OR e.to_status = 'scheduled')::text AS follow_ups
FROM ending e
WHERE e.id IN (SELECT id FROM moved) OR e.id IN (SELECT id FROM gone);

-- name: keep_results
-- A success's result and an attempt's last progress (docs/workflows.md), for the one job the
-- finish just moved (fenced as the finish was; run only for outcomes that carry either), in
-- whichever table the finish left it (finish_jobs moves a job that ended to the history
-- table itself).
WITH hot AS (
    UPDATE duetime_jobs
    SET result = COALESCE(%(result)s::text, result),
        progress = COALESCE(%(progress)s::double precision, progress),
        progress_message = CASE WHEN %(progress)s::double precision IS NULL
            THEN progress_message ELSE %(progress_message)s::text END,
        progress_at = CASE WHEN %(progress)s::double precision IS NULL THEN progress_at
            ELSE %(now)s::timestamptz END
    WHERE id = %(job_id)s AND generation = %(generation)s AND claim_token = %(claim_token)s
      AND status = %(to_status)s::text
)
UPDATE duetime_jobs_done
SET result = COALESCE(%(result)s::text, result),
    progress = COALESCE(%(progress)s::double precision, progress),
    progress_message = CASE WHEN %(progress)s::double precision IS NULL THEN progress_message
        ELSE %(progress_message)s::text END,
    progress_at = CASE WHEN %(progress)s::double precision IS NULL THEN progress_at
        ELSE %(now)s::timestamptz END
WHERE id = %(job_id)s AND generation = %(generation)s AND claim_token = %(claim_token)s
  AND status = %(to_status)s::text;

-- name: record_progress
-- A running attempt's progress, fenced by its generation and claim token.
UPDATE duetime_jobs
SET progress = %(progress)s::double precision, progress_message = %(progress_message)s::text,
    progress_at = %(now)s::timestamptz
WHERE id = %(job_id)s AND generation = %(generation)s AND claim_token = %(claim_token)s
  AND status IN ('running', 'cancel_requested');

-- name: late_reports
-- On the attempt of each job with that generation and claim token (none: nothing recorded):
-- its row once it ended, or the job's row while it still runs there (migration 22; the
-- attempt's row takes the report at its end) or is a success kept there (migration 24), in
-- either table (a job that ended may be in the history table, migration 25). Run in a
-- finish's transaction after finish_jobs, under its settings: the batch's bounds let the
-- jobs be read by a bitmap scan of their keys whatever the table's statistics (finish_jobs).
WITH v AS (
    SELECT * FROM json_to_recordset(%(batch)s::json) AS v(job_id bigint, generation bigint,
        claim_token bigint, outcome text)
), running AS (
    UPDATE duetime_jobs AS j
    SET late_outcome = v.outcome, late_reported_at = %(now)s
    FROM v
    WHERE j.id = v.job_id AND j.generation = v.generation AND j.claim_token = v.claim_token
      AND j.id BETWEEN (SELECT min(b.job_id) FROM v AS b) AND (SELECT max(b.job_id) FROM v AS b)
      AND j.attempt_id IS NOT NULL
), kept AS (
    UPDATE duetime_jobs_done AS d
    SET late_outcome = v.outcome, late_reported_at = %(now)s
    FROM v
    WHERE d.id = v.job_id AND d.generation = v.generation AND d.claim_token = v.claim_token
      AND d.attempt_id IS NOT NULL
)
UPDATE duetime_attempts AS a
SET late_outcome = v.outcome, late_reported_at = %(now)s
FROM v
WHERE a.job_id = v.job_id AND a.generation = v.generation AND a.claim_token = v.claim_token;

-- name: expired_leases
-- Running attempts are their jobs' (migration 22): the running and cancel-requested jobs
-- (few: what the workers hold) from the job counts index. Sorted after: few rows.
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
-- The candidates are picked once (ARRAY(...) is an init plan; see release_waiting), in the
-- order of duetime_jobs_deadline (the waiting jobs with a deadline) with sorting off: that
-- ordered walk is then the only plan not disabled, whatever the statistics say. After a
-- vacuum that found one job live (under a transaction held open) a plan with a sort was a
-- coin toss between this small index and a walk of duetime_jobs_due_any, every entry the
-- hold kept (docs/performance.md, "The deadlines' expiry under the hold"). Which of the jobs
-- of one deadline goes first when the limit bites is not specified.
SET LOCAL enable_sort = off;
UPDATE duetime_jobs
SET status = (%(moves)s::jsonb ->> status), version = version + 1, updated_at = %(now)s
WHERE id = ANY (ARRAY(
    SELECT id FROM duetime_jobs
    WHERE status = 'scheduled' AND deadline_at IS NOT NULL AND deadline_at <= %(now)s
    ORDER BY deadline_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED))
  AND (%(moves)s::jsonb ->> status) IS NOT NULL
RETURNING id, has_children, tenant, sequence_key;

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
       OR deadline_at > %(due_at)s::timestamptz);

-- name: insert_schedule
INSERT INTO duetime_schedules (tenant, name, spec, definition_hash, paused, anchor_at,
    next_fire_at, created_at, updated_at)
VALUES (%(tenant)s::text, %(name)s::text, %(spec)s::jsonb, %(definition_hash)s::text, false,
    %(anchor_at)s::timestamptz, %(next_fire_at)s::timestamptz, %(now)s, %(now)s)
ON CONFLICT (tenant, name) DO NOTHING;

-- name: select_schedule
SELECT * FROM duetime_schedules WHERE tenant = %(tenant)s::text AND name = %(name)s::text;

-- name: lock_schedule
SELECT * FROM duetime_schedules WHERE tenant = %(tenant)s::text AND name = %(name)s::text
FOR UPDATE;

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

-- name: active_occurrences
SELECT id, nominal_at, status, generation, origin FROM duetime_jobs
WHERE schedule_id = %(schedule_id)s
  AND status IN ('scheduled', 'waiting', 'running', 'cancel_requested')
ORDER BY nominal_at;

-- name: delete_unstarted
-- No foreign key does it (migration 26): the jobs' dependency links go with them and their
-- ticks are detached. A job never claimed (generation 0) has no attempt and no outbox event,
-- and an occurrence has no parents: its links are those of its children.
-- The rows are locked first, by a statement of their own: the second statement's snapshot
-- then holds every link made to them by a transaction the lock waited for (an enqueue with a
-- parent among them), which one statement's snapshot, taken before it waited, would miss.
SELECT id FROM duetime_jobs
WHERE schedule_id = %(schedule_id)s AND status IN ('scheduled', 'waiting') AND generation = 0
  AND origin = 'tick'
FOR UPDATE;
WITH gone AS MATERIALIZED (
    SELECT id FROM duetime_jobs
    WHERE schedule_id = %(schedule_id)s AND status IN ('scheduled', 'waiting')
      AND generation = 0 AND origin = 'tick'
    FOR UPDATE),
parent_links AS (DELETE FROM duetime_job_parents WHERE parent_id IN (SELECT id FROM gone)),
ticks AS (UPDATE duetime_ticks SET job_id = NULL WHERE job_id IN (SELECT id FROM gone))
DELETE FROM duetime_jobs WHERE id IN (SELECT id FROM gone);

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

-- name: insert_tick
INSERT INTO duetime_ticks (schedule_id, nominal_at, outcome, origin, job_id, detail, recorded_at)
VALUES (%(schedule_id)s, %(nominal_at)s::timestamptz, %(outcome)s::text, %(origin)s::text,
    %(job_id)s::bigint, %(detail)s::text, %(now)s)
ON CONFLICT (schedule_id, nominal_at, outcome, origin)
DO UPDATE SET job_id = excluded.job_id, detail = excluded.detail,
    recorded_at = excluded.recorded_at;

-- name: list_ticks
-- The tick's job in either table (a job that ended may be in the history table, migration 25).
SELECT t.*, COALESCE(j.status, d.status) AS job_status,
       (SELECT MIN(a.started_at) FROM duetime_all_attempts a WHERE a.job_id = t.job_id) AS started_at
FROM duetime_ticks t LEFT JOIN duetime_jobs j ON j.id = t.job_id
LEFT JOIN duetime_jobs_done d ON d.id = t.job_id
WHERE t.schedule_id = %(schedule_id)s
  AND (%(before_id)s::bigint IS NULL OR t.id < %(before_id)s::bigint)
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
VALUES (%(id)s, %(hostname)s, %(pid)s, %(queues)s::jsonb, %(concurrency)s, %(duties)s::jsonb,
    %(version)s, %(now)s, %(now)s, %(tasks)s::jsonb, %(clock_offset)s)
ON CONFLICT (id) DO UPDATE SET last_seen_at = excluded.last_seen_at, stopped_at = NULL,
    tasks = excluded.tasks, clock_offset_seconds = excluded.clock_offset_seconds;

-- name: touch_node
UPDATE duetime_nodes SET last_seen_at = %(now)s, clock_offset_seconds = %(clock_offset)s
WHERE id = %(id)s;

-- name: stop_node
UPDATE duetime_nodes SET last_seen_at = %(now)s, stopped_at = %(now)s WHERE id = %(id)s;

-- name: take_turn
-- The duty's turn, when its last pass (by any node) began `every` seconds ago or more, by the
-- database's clock as the row is read (a node that waited for another's update of it sees
-- that pass as just now), or more than `every` seconds ahead of it (the clock was set back).
-- No row changes otherwise, and a statement that changes none writes nothing.
UPDATE duetime_turns SET passed_at = clock_timestamp(), holder = %(holder)s
WHERE duty = %(duty)s
  AND (passed_at <= clock_timestamp() - %(every)s * interval '1 second'
       OR passed_at > clock_timestamp() + %(every)s * interval '1 second');

-- name: first_turn
-- After a take_turn that changed no row: the duty's first pass ever inserts its row (one of
-- the nodes that race here wins); where the row is there, nothing is inserted.
INSERT INTO duetime_turns (duty, passed_at, holder)
VALUES (%(duty)s, clock_timestamp(), %(holder)s)
ON CONFLICT (duty) DO NOTHING;

-- name: list_nodes
-- What each node holds: the running attempts, read once through the running jobs (as
-- expired_leases), grouped by worker.
WITH held AS (
    SELECT j.worker_id, array_agg(j.id ORDER BY j.id) AS holding
    FROM duetime_jobs j
    WHERE j.status IN ('running', 'cancel_requested') AND j.attempt_id IS NOT NULL
    GROUP BY j.worker_id
)
SELECT n.*, COALESCE(h.holding, ARRAY[]::bigint[]) AS holding
FROM duetime_nodes n LEFT JOIN held h ON h.worker_id = n.id
ORDER BY n.started_at DESC
LIMIT %(limit)s;

-- name: database_now
-- clock_timestamp(): the time as the statement runs (now() is the transaction's start)
SELECT clock_timestamp() AS now;

-- name: insert_token
INSERT INTO duetime_tokens (tenant, role, name, prefix, secret_hash, created_at, expires_at)
VALUES (%(tenant)s, %(role)s, %(name)s, %(prefix)s, %(secret_hash)s, %(now)s, %(expires_at)s);

-- name: select_token
SELECT * FROM duetime_tokens WHERE id = %(id)s;

-- name: list_tokens
SELECT * FROM duetime_tokens
WHERE (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
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
    WHERE (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
    GROUP BY status, queue
    UNION ALL
    SELECT status, queue, COUNT(*) AS n FROM duetime_jobs_done
    WHERE (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
    GROUP BY status, queue) AS c
GROUP BY status, queue
ORDER BY status, queue;

-- name: oldest_overdue
-- Each priority class's earliest due job (the part classes), from the claim-order
-- index (or, for one tenant, the tenant's: duetime_jobs_tenant_due); the earliest of those.
@classes
SELECT min(o.due_at) AS due_at FROM classes c
CROSS JOIN LATERAL (
    SELECT j.due_at FROM duetime_jobs j
    WHERE j.status = 'scheduled' AND j.priority = c.priority AND j.due_at <= %(now)s
      AND (%(tenant)s::text IS NULL OR j.tenant = %(tenant)s::text)
    ORDER BY j.due_at
    LIMIT 1) o;

-- name: earliest_due
-- The earliest instant at or before `until` at which a job the plain claim of these filters
-- may take is due: each priority class's first such entry (the part classes: no floor), the
-- earliest of those. A worker's timer looks below its claims' floor with it every few
-- seconds (runtime/timer.py), off the claims' path: under a transaction held open it steps
-- over every dead entry of the jobs claimed since, as a claim from the first entry would.
@classes
SELECT min(o.due_at) AS due_at FROM classes c
CROSS JOIN LATERAL (
    SELECT j.due_at FROM duetime_jobs j
    WHERE j.status = 'scheduled' AND j.priority = c.priority AND j.due_at <= %(until)s
      AND (j.deadline_at IS NULL OR j.deadline_at > %(until)s)
      AND (%(all_queues)s::boolean OR j.queue = ANY (%(queues)s::text[]))
      AND (%(all_tasks)s::boolean OR j.task = ANY (%(tasks)s::text[]))
      AND NOT (j.queue = ANY (%(outbox_queues)s::text[]))
    ORDER BY j.due_at
    LIMIT 1) o;

-- part: kept_successes
-- attempt_samples' successes kept on their jobs' rows, the same on both tables: from the
-- pruner's index of their end (a minute early: see attempt_samples), those started since
-- `since`, to the limit
     WHERE status = 'succeeded' AND attempt_id IS NOT NULL
       AND updated_at >= %(since)s::timestamptz - interval '1 minute'
       AND started_at >= %(since)s
       AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
     ORDER BY updated_at DESC
     LIMIT %(limit)s

-- name: attempt_samples
-- the newest attempts started since a point in time, for lag, throughput and failure figures, each
-- with its task and queue: the parts of duetime_all_attempts written out, each of the tenant asked,
-- returning at most the limit, read through an index from `since` on. The ended attempts' rows by
-- their start (duetime_attempts_started; their job from either table, read by key for each row:
-- LIMIT 1 keeps the planner from making those reads a hash or merge join over whole tables); the
-- running jobs (at most what the workers hold, through duetime_jobs_status); the successes kept on
-- their jobs' rows (migration 24), in either table, by their end (updated_at, through the pruner's
-- duetime_jobs_finished and duetime_jobs_done_finished: migration 29 dropped the index of their
-- start, one index entry fewer per success). A success that started since `since` ended since then
-- too (its walk starts a minute earlier: the instants of its claim and its end are read from clocks
-- that a correction may step back by a little). Where more than `limit` successes ended since
-- `since`, those sampled are the `limit` that ended last, not always the `limit` that started last
-- (docs/stores.md, "Attempts written once"). Ties of a start go newest job first in the result. The
-- parts' walks take no tie-break (a claim starts, and a finish batch ends, hundreds of jobs at one
-- instant; ordering each walk by the job too made the planner sort every row when most share an
-- instant), so which of the rows tied at the instant where a part's limit cuts are sampled is left
-- open.
SELECT a.task, a.queue, a.status, a.error_category, a.due_at, a.started_at, a.finished_at
FROM (
    (SELECT a.job_id, coalesce(j.task, d.task) AS task,
            coalesce(j.queue, d.queue) AS queue, a.status, a.error_category, a.due_at,
            a.started_at, a.finished_at
     FROM duetime_attempts a
     LEFT JOIN LATERAL (SELECT h.id, h.tenant, h.task, h.queue FROM duetime_jobs h
                        WHERE h.id = a.job_id LIMIT 1) j ON true
     LEFT JOIN LATERAL (SELECT h.id, h.tenant, h.task, h.queue FROM duetime_jobs_done h
                        WHERE h.id = a.job_id LIMIT 1) d ON true
     WHERE a.started_at >= %(since)s
       AND (j.id IS NOT NULL OR d.id IS NOT NULL)
       AND (%(tenant)s::text IS NULL OR coalesce(j.tenant, d.tenant) = %(tenant)s::text)
     ORDER BY a.started_at DESC
     LIMIT %(limit)s)
    UNION ALL
    (SELECT r.id, r.task, r.queue, 'running'::text, NULL::text, r.due_at, r.started_at,
            NULL::timestamptz
     FROM duetime_jobs r
     WHERE r.status IN ('running', 'cancel_requested') AND r.attempt_id IS NOT NULL
       AND r.started_at >= %(since)s
       AND (%(tenant)s::text IS NULL OR r.tenant = %(tenant)s::text)
     ORDER BY r.started_at DESC
     LIMIT %(limit)s)
    UNION ALL
    (SELECT id, task, queue, 'succeeded'::text, NULL::text, due_at, started_at, updated_at
     FROM duetime_jobs s
@kept_successes
    )
    UNION ALL
    (SELECT id, task, queue, 'succeeded'::text, NULL::text, due_at, started_at, updated_at
     FROM duetime_jobs_done h
@kept_successes
    )
) a
ORDER BY a.started_at DESC, a.job_id DESC
LIMIT %(limit)s;

-- name: next_due
-- From the claim-order index duetime_jobs_due_any (priority DESC, due_at, id; migration 23
-- dropped the one on due_at alone): `classes` finds each priority with scheduled jobs, one
-- seek each (a skip scan: priorities are -1000 to 1000, a few in use), then each class's
-- earliest instants after now are one walk of the index stopped by the limit, and those few
-- rows (at most classes x limit) are merged. (oldest_overdue, limit_waiting and
-- dispatch_outbox find the classes the same way.) The seeks of the classes start at `floor`
-- (the caller passes now): a class with no entry after it has nothing to give, and a seek
-- bounded so steps over the entries due before it in the index alone (the part
-- floored_classes, as the claim's). Sorting is off as in claim, so each walk keeps
-- to the index order whatever the statistics say.
SET LOCAL enable_sort = off;
@floored_classes
SELECT d.due_at FROM classes c
CROSS JOIN LATERAL (
    SELECT j.due_at FROM duetime_jobs j
    WHERE j.status = 'scheduled' AND j.priority = c.priority
      AND j.due_at > %(now)s AND j.due_at <= %(until)s
      AND (%(all_queues)s::boolean OR j.queue = ANY (%(queues)s::text[]))
    ORDER BY j.due_at
    LIMIT %(limit)s) d
ORDER BY d.due_at
LIMIT %(limit)s;

-- name: prune
-- The candidates are picked and locked once (a MATERIALIZED CTE runs once; a locked row is
-- checked again in its newest version, so each one picked still qualifies). No foreign key
-- does it (migration 26): their attempts, dependency links and outbox events go with them
-- and their ticks are detached, in the same statement (a link whose child and parent both go
-- is deleted once; each link's part reads its own index, where one OR would scan them all).
-- A link made to a candidate by an enqueue that commits between this statement's start and
-- its lock on that candidate (the candidate ended before the retention) is not in the
-- statement's snapshot and stays; it names its child, and goes when the child is pruned.
WITH gone AS MATERIALIZED (
    SELECT id FROM duetime_jobs
    WHERE status IN ('succeeded', 'cancelled', 'expired') AND updated_at < %(before)s
    ORDER BY updated_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED),
attempts AS (DELETE FROM duetime_attempts WHERE job_id IN (SELECT id FROM gone)),
child_links AS (DELETE FROM duetime_job_parents WHERE child_id IN (SELECT id FROM gone)),
parent_links AS (DELETE FROM duetime_job_parents WHERE parent_id IN (SELECT id FROM gone)),
events AS (DELETE FROM duetime_outbox WHERE job_id IN (SELECT id FROM gone)),
ticks AS (UPDATE duetime_ticks SET job_id = NULL WHERE job_id IN (SELECT id FROM gone))
DELETE FROM duetime_jobs WHERE id IN (SELECT id FROM gone);

-- name: prune_done
-- prune's work on the history table (migration 25), the same way: the jobs that ended before
-- `before`, up to `limit` of them, with their attempts, links and outbox events, their ticks
-- detached.
WITH gone AS MATERIALIZED (
    SELECT id FROM duetime_jobs_done
    WHERE status IN ('succeeded', 'cancelled', 'expired') AND updated_at < %(before)s
    ORDER BY updated_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED),
attempts AS (DELETE FROM duetime_attempts WHERE job_id IN (SELECT id FROM gone)),
child_links AS (DELETE FROM duetime_job_parents WHERE child_id IN (SELECT id FROM gone)),
parent_links AS (DELETE FROM duetime_job_parents WHERE parent_id IN (SELECT id FROM gone)),
events AS (DELETE FROM duetime_outbox WHERE job_id IN (SELECT id FROM gone)),
ticks AS (UPDATE duetime_ticks SET job_id = NULL WHERE job_id IN (SELECT id FROM gone))
DELETE FROM duetime_jobs_done WHERE id IN (SELECT id FROM gone);

-- name: queue_settings
SELECT queue, dispatch, paused, concurrency, max_backlog, weight, updated_at FROM duetime_queues
ORDER BY queue COLLATE "C";

-- name: upsert_queue
INSERT INTO duetime_queues (queue, dispatch, paused, concurrency, max_backlog, weight,
    updated_at)
VALUES (%(queue)s::text, COALESCE(%(dispatch)s::text, 'direct'),
    COALESCE(%(paused)s::boolean, false),
    CASE WHEN %(set_concurrency)s::boolean THEN %(concurrency)s::integer END,
    CASE WHEN %(set_max_backlog)s::boolean THEN %(max_backlog)s::integer END,
    COALESCE(%(weight)s::double precision, 1), %(now)s)
ON CONFLICT (queue) DO UPDATE
SET dispatch = COALESCE(%(dispatch)s::text, duetime_queues.dispatch),
    paused = COALESCE(%(paused)s::boolean, duetime_queues.paused),
    concurrency = CASE WHEN %(set_concurrency)s::boolean THEN %(concurrency)s::integer
                       ELSE duetime_queues.concurrency END,
    max_backlog = CASE WHEN %(set_max_backlog)s::boolean THEN %(max_backlog)s::integer
                       ELSE duetime_queues.max_backlog END,
    weight = COALESCE(%(weight)s::double precision, duetime_queues.weight),
    updated_at = %(now)s;

-- name: tenant_settings
SELECT tenant, concurrency, max_backlog, weight, updated_at FROM duetime_tenants
ORDER BY tenant COLLATE "C";

-- name: upsert_tenant
INSERT INTO duetime_tenants (tenant, concurrency, max_backlog, weight, updated_at)
VALUES (%(tenant)s::text,
    CASE WHEN %(set_concurrency)s::boolean THEN %(concurrency)s::integer END,
    CASE WHEN %(set_max_backlog)s::boolean THEN %(max_backlog)s::integer END,
    COALESCE(%(weight)s::double precision, 1), %(now)s)
ON CONFLICT (tenant) DO UPDATE
SET concurrency = CASE WHEN %(set_concurrency)s::boolean THEN %(concurrency)s::integer
                       ELSE duetime_tenants.concurrency END,
    max_backlog = CASE WHEN %(set_max_backlog)s::boolean THEN %(max_backlog)s::integer
                       ELSE duetime_tenants.max_backlog END,
    weight = COALESCE(%(weight)s::double precision, duetime_tenants.weight),
    updated_at = %(now)s;

-- name: lock_capped_queues
SELECT queue, concurrency FROM duetime_queues WHERE concurrency IS NOT NULL
ORDER BY queue COLLATE "C"
FOR UPDATE;

-- name: lock_capped_tenants
SELECT tenant, concurrency FROM duetime_tenants WHERE concurrency IS NOT NULL
ORDER BY tenant COLLATE "C"
FOR UPDATE;

-- name: running_counts
-- Through the running jobs, as expired_leases.
SELECT j.queue, j.tenant, COUNT(*) AS n
FROM duetime_jobs j
WHERE j.status IN ('running', 'cancel_requested') AND j.attempt_id IS NOT NULL
GROUP BY j.queue, j.tenant;

-- name: claim_candidates
-- A controlled claim's pick, read only (claim_chosen then takes the chosen ids); sorting off
-- as in claim, and walked class by class as claim's pick is (the part classes; each
-- class one range (priority = c, due_at <= now) of the claim-order index in (due_at, id)
-- order; the rows come in claim order, so the limit stops the walks, and with fewer due than
-- the limit each walk ends at its class's last due row). With limits, as claim_pick_limited:
-- not the jobs carrying a blocked key, nor the retries carrying a retry_blocked one. A
-- worker's claim passes its `floor` (NULL: none; the relay's dispatch passes none): each
-- walk and each seek of the classes starts there (the part floored_classes), as the plain
-- claim's do; lower_candidates, queue_candidates, tenant_candidates and next_due_tenant too.
SET LOCAL enable_sort = off;
@floored_classes
SELECT p.id, p.queue, p.tenant, p.limits, p.attempts FROM classes c
CROSS JOIN LATERAL (
    SELECT j.id, j.queue, j.tenant, j.limits, j.attempts FROM duetime_jobs j
    WHERE j.status = 'scheduled' AND j.priority = c.priority
      AND j.due_at <= %(now)s
      AND j.due_at >= COALESCE(%(floor)s::timestamptz, '-infinity')
      AND (j.deadline_at IS NULL OR j.deadline_at > %(now)s)
      AND (%(all_queues)s::boolean OR j.queue = ANY (%(queues)s::text[]))
      AND (%(all_tasks)s::boolean OR j.task = ANY (%(tasks)s::text[]))
      AND NOT (j.queue = ANY (%(skip_queues)s::text[]))
      AND NOT (j.tenant = ANY (%(skip_tenants)s::text[]))
      AND NOT (j.id = ANY (%(skip_ids)s::bigint[]))
      AND (j.limits IS NULL
           OR NOT EXISTS (SELECT 1 FROM jsonb_array_elements_text(%(blocked)s::jsonb) AS b(k)
                          WHERE strpos(j.limits, b.k) > 0))
      AND (j.limits IS NULL OR j.attempts = 0
           OR NOT EXISTS (SELECT 1 FROM jsonb_array_elements_text(%(retry_blocked)s::jsonb) AS r(k)
                          WHERE strpos(j.limits, r.k) > 0))
    ORDER BY j.due_at, j.id
    LIMIT %(limit)s) p
LIMIT %(limit)s;

-- name: lower_candidates
-- A priority reservation's read (core/flow/share.PriorityShare): claim_candidates of the jobs of
-- priority below `below`, with their priority; sorting off, walked class by class (as
-- claim_candidates) over the classes below `below`. Locked, skipping rows other claims hold:
-- two workers' reservations do not pick the same jobs.
SET LOCAL enable_sort = off;
@floored_classes
SELECT p.id, p.priority, p.queue, p.tenant, p.limits, p.attempts FROM classes c
CROSS JOIN LATERAL (
    SELECT j.id, j.priority, j.queue, j.tenant, j.limits, j.attempts FROM duetime_jobs j
    WHERE j.status = 'scheduled' AND j.priority = c.priority
      AND j.due_at <= %(now)s
      AND j.due_at >= COALESCE(%(floor)s::timestamptz, '-infinity')
      AND (j.deadline_at IS NULL OR j.deadline_at > %(now)s)
      AND (%(all_queues)s::boolean OR j.queue = ANY (%(queues)s::text[]))
      AND (%(all_tasks)s::boolean OR j.task = ANY (%(tasks)s::text[]))
      AND NOT (j.queue = ANY (%(skip_queues)s::text[]))
      AND NOT (j.tenant = ANY (%(skip_tenants)s::text[]))
    ORDER BY j.due_at, j.id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED) p
WHERE c.priority < %(below)s::bigint
LIMIT %(limit)s;

-- name: queue_candidates
-- The candidates of one queue (a weighted queue the claim's first read did not reach); sorting
-- off, walked class by class as claim_candidates (each class one range of the queue's index).
SET LOCAL enable_sort = off;
@floored_classes
SELECT p.id, p.queue, p.tenant, p.limits, p.attempts FROM classes c
CROSS JOIN LATERAL (
    SELECT j.id, j.queue, j.tenant, j.limits, j.attempts FROM duetime_jobs j
    WHERE j.queue = %(queue)s::text AND j.status = 'scheduled' AND j.priority = c.priority
      AND j.due_at <= %(now)s
      AND j.due_at >= COALESCE(%(floor)s::timestamptz, '-infinity')
      AND (j.deadline_at IS NULL OR j.deadline_at > %(now)s)
      AND (%(all_tasks)s::boolean OR j.task = ANY (%(tasks)s::text[]))
      AND NOT (j.tenant = ANY (%(skip_tenants)s::text[]))
    ORDER BY j.due_at, j.id
    LIMIT %(limit)s) p
LIMIT %(limit)s;

-- name: tenant_candidates
-- The candidates of one tenant (a weighted tenant the claim's first read did not reach, or
-- one of the tenants a claim rotates over), from its due jobs in claim order; sorting off,
-- walked class by class as claim_candidates (each class one range of the tenant's index).
SET LOCAL enable_sort = off;
@floored_classes
SELECT p.id, p.queue, p.tenant, p.limits, p.attempts FROM classes c
CROSS JOIN LATERAL (
    SELECT j.id, j.queue, j.tenant, j.limits, j.attempts FROM duetime_jobs j
    WHERE j.tenant = %(tenant)s::text AND j.status = 'scheduled' AND j.priority = c.priority
      AND j.due_at <= %(now)s
      AND j.due_at >= COALESCE(%(floor)s::timestamptz, '-infinity')
      AND (j.deadline_at IS NULL OR j.deadline_at > %(now)s)
      AND (%(all_queues)s::boolean OR j.queue = ANY (%(queues)s::text[]))
      AND (%(all_tasks)s::boolean OR j.task = ANY (%(tasks)s::text[]))
      AND NOT (j.queue = ANY (%(skip_queues)s::text[]))
    ORDER BY j.due_at, j.id
    LIMIT %(limit)s) p
LIMIT %(limit)s;

-- name: next_due_tenant
-- The first tenant after `after` (code-point order) with a job due at now: one seek in the
-- tenant index, so the tenants with due work are found one read each; from the claim's
-- `floor` (NULL: none), as its candidates' walks: the entries due before it are stepped
-- over in the index alone.
SELECT tenant FROM duetime_jobs
WHERE status = 'scheduled' AND tenant > %(after)s::text AND due_at <= %(now)s
  AND due_at >= COALESCE(%(floor)s::timestamptz, '-infinity')
ORDER BY tenant
LIMIT 1;

-- name: claim_chosen
-- As claim, for the jobs of `ids` still scheduled, due, not past their deadline and of a queue
-- not paused now, skipping rows another transaction locked; the attempts' lease is
-- lease_seconds when given (the relay's dispatch), else each job's own. The move takes its
-- rows by their keys, as claim's does.
WITH picked AS (
    SELECT id FROM duetime_jobs
    WHERE id = ANY (%(ids)s::bigint[]) AND status = 'scheduled' AND due_at <= %(now)s
      AND (deadline_at IS NULL OR deadline_at > %(now)s)
    ORDER BY id
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE duetime_jobs AS j
    SET status = (%(moves)s::jsonb ->> j.status), generation = j.generation + 1,
        claim_token = GREATEST(('x' || substr(translate(gen_random_uuid()::text, '-', ''), 1, 16))::bit(64)::bigint
            & 9223372036854775807, 1),
        attempts = j.attempts + 1, updated_at = %(now)s,
        attempt_id = nextval('duetime_attempts_id_seq'), worker_id = %(worker_id)s::text,
        lease_expires_at = %(now)s
            + trunc(COALESCE(%(lease_seconds)s::double precision, j.lease_seconds) * 1000000)::bigint
            * interval '1 microsecond',
        started_at = %(now)s, late_outcome = NULL, late_reported_at = NULL
    WHERE j.id = ANY (ARRAY(SELECT id FROM picked)) AND (%(moves)s::jsonb ->> j.status) IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM duetime_queues q WHERE q.queue = j.queue AND q.paused)
    RETURNING
@claimed_columns
)
-- as claim: the attempt is the job's row's (migration 22)
SELECT j.*,
       -- the timeline: the first 8 hex digits of the current WAL file's name
       (SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint)
           AS claim_epoch
FROM claimed AS j
ORDER BY j.priority DESC, j.due_at, j.id;

-- name: lock_queue_backlog
SELECT max_backlog FROM duetime_queues WHERE queue = %(queue)s::text FOR UPDATE;

-- name: lock_tenant_backlog
SELECT max_backlog FROM duetime_tenants WHERE tenant = %(tenant)s::text FOR UPDATE;

-- name: queue_backlog
SELECT COUNT(*) AS n FROM duetime_jobs
WHERE queue = %(queue)s::text AND status IN ('scheduled', 'waiting');

-- name: tenant_backlog
SELECT COUNT(*) AS n FROM duetime_jobs
WHERE tenant = %(tenant)s::text AND status IN ('scheduled', 'waiting');

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
ORDER BY queue COLLATE "C", tenant COLLATE "C";

-- name: dispatch_outbox
-- The claim of outbox-mode queues, for the relay: one statement picks the due jobs, moves them,
-- starts their attempts held by `holder` (until a worker accepts one) with a lease of
-- lease_seconds, and writes one outbox event per attempt, in claim order. The pick walks
-- the claim-order index class by class (the part classes), highest class first, each
-- walk in (due_at, id) order: rows come in claim order, so the limit stops the walks (and
-- their locks) as soon as it is reached, and each walk reads the class's due rows only.
-- The move takes its rows by their keys, as claim's does.
@classes
, picked AS (
    SELECT p.id FROM classes c
    CROSS JOIN LATERAL (
        SELECT j.id FROM duetime_jobs j
        WHERE j.status = 'scheduled' AND j.priority = c.priority
          AND j.due_at <= %(now)s
          AND (j.deadline_at IS NULL OR j.deadline_at > %(now)s)
          AND j.queue = ANY (ARRAY(SELECT q.queue FROM duetime_queues q WHERE q.dispatch = 'outbox' AND NOT q.paused))
        ORDER BY j.due_at, j.id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED) p
    LIMIT %(limit)s
), claimed AS (
    UPDATE duetime_jobs AS j
    SET status = (%(moves)s::jsonb ->> j.status), generation = j.generation + 1,
        claim_token = GREATEST(('x' || substr(translate(gen_random_uuid()::text, '-', ''), 1, 16))::bit(64)::bigint
            & 9223372036854775807, 1),
        attempts = j.attempts + 1, updated_at = %(now)s,
        attempt_id = nextval('duetime_attempts_id_seq'), worker_id = %(holder)s::text,
        lease_expires_at = %(now)s + trunc(%(lease_seconds)s * 1000000)::bigint
            * interval '1 microsecond',
        started_at = %(now)s, late_outcome = NULL, late_reported_at = NULL
    WHERE j.id = ANY (ARRAY(SELECT id FROM picked)) AND (%(moves)s::jsonb ->> j.status) IS NOT NULL
    RETURNING j.id, j.queue, j.task, j.generation, j.version, j.priority, j.due_at,
        j.claim_token, j.trace_context, j.attempt_id
)
INSERT INTO duetime_outbox (job_id, attempt_id, queue, task, generation, version, created_at,
    claim_token, trace_context)
SELECT c.id, c.attempt_id, c.queue, c.task, c.generation, c.version, %(now)s, c.claim_token,
       c.trace_context
FROM claimed AS c
ORDER BY c.priority DESC, c.due_at, c.id
RETURNING *;

-- name: insert_outbox_events
-- The events of attempts a controlled dispatch started (claim_chosen held by `holder`): one
-- per attempt of `attempt_ids` (of the jobs of `job_ids`) still running and held, written in
-- claim order; the events come back.
INSERT INTO duetime_outbox (job_id, attempt_id, queue, task, generation, version, created_at,
    claim_token, trace_context)
SELECT j.id, j.attempt_id, j.queue, j.task, j.generation, j.version, %(now)s, j.claim_token,
       j.trace_context
FROM duetime_jobs j
WHERE j.id = ANY (%(job_ids)s::bigint[]) AND j.attempt_id = ANY (%(attempt_ids)s::bigint[])
  AND j.worker_id = %(holder)s::text AND j.status = 'running'
ORDER BY j.priority DESC, j.due_at, j.id
RETURNING *;

-- name: take_events
-- A relay leases up to `limit` unpublished events nobody holds (or whose relay lease ended,
-- or that it holds itself: taken again after a failed publish),
-- oldest first, skipping rows another relay is taking.
UPDATE duetime_outbox
SET relay_id = %(relay_id)s::text, relay_until = %(until)s
WHERE id = ANY (ARRAY(
    SELECT id FROM duetime_outbox
    WHERE published_at IS NULL
      AND (relay_until IS NULL OR relay_until <= %(now)s OR relay_id = %(relay_id)s::text)
    ORDER BY id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED))
RETURNING *;

-- name: mark_published
-- The events the broker confirmed; the attempts no worker accepted yet get their lease from
-- now (on their jobs' rows, migration 22, locked in id order).
WITH e AS (
    UPDATE duetime_outbox SET published_at = %(now)s
    WHERE id = ANY (%(ids)s::bigint[]) AND published_at IS NULL
    RETURNING job_id, attempt_id
), held AS (
    SELECT j.id FROM duetime_jobs j JOIN e ON e.job_id = j.id AND e.attempt_id = j.attempt_id
    WHERE j.status IN ('running', 'cancel_requested') AND j.worker_id = %(holder)s
    ORDER BY j.id
    FOR UPDATE OF j
)
UPDATE duetime_jobs AS j
SET lease_expires_at = %(now)s + trunc(%(lease_seconds)s * 1000000)::bigint
    * interval '1 microsecond'
FROM held
WHERE j.id = held.id;

-- name: accept_dispatch
-- A worker takes a dispatched attempt, found by its job and claim token (never by its id
-- alone): only while the job still holds that generation and claim token (and that version,
-- unless cancellation was requested since) and no worker took it before; the job's deadline
-- has not passed; the attempt's lease becomes the job's own, from now. The attempt is the
-- job's row's (migration 22).
UPDATE duetime_jobs
SET worker_id = %(worker_id)s::text, started_at = %(now)s,
    lease_expires_at = %(now)s + trunc(lease_seconds * 1000000)::bigint
        * interval '1 microsecond'
WHERE id = %(job_id)s AND generation = %(generation)s
  AND claim_token = %(claim_token)s::bigint
  AND ((status = 'running' AND version = %(version)s) OR status = 'cancel_requested')
  AND (deadline_at IS NULL OR deadline_at > %(now)s)
  AND attempt_id IS NOT NULL AND worker_id = %(holder)s;

-- name: withdraw_dispatched
-- The attempts to withdraw are found through their jobs' rows (migration 22), locked in id
-- order (rechecked under the lock); each goes only if still held by `holder` (a worker's
-- accept_dispatch that came first keeps it), with its unpublished events, and its job moves
-- back. A withdrawn attempt leaves no row.
WITH locked AS (
    SELECT j.id, j.attempt_id
    FROM duetime_jobs j
    WHERE j.status IN ('running', 'cancel_requested')
      AND j.attempt_id IS NOT NULL AND j.worker_id = %(holder)s::text
      AND (%(moves)s::jsonb ->> j.status) IS NOT NULL
      AND (j.id = ANY (%(ids)s::bigint[])
           OR (%(direct)s::boolean AND j.queue NOT IN (
                 SELECT q.queue FROM duetime_queues q WHERE q.dispatch = 'outbox')))
    ORDER BY j.id
    FOR UPDATE OF j
), events AS (
    DELETE FROM duetime_outbox o USING locked l
    WHERE o.attempt_id = l.attempt_id AND o.published_at IS NULL
)
UPDATE duetime_jobs AS j
SET status = (%(moves)s::jsonb ->> j.status), attempts = j.attempts - 1,
    version = j.version + 1, updated_at = %(now)s,
    attempt_id = NULL, worker_id = NULL, lease_expires_at = NULL, started_at = NULL,
    late_outcome = NULL, late_reported_at = NULL
FROM locked
WHERE j.id = locked.id
RETURNING j.id, j.queue, j.status, j.due_at;

-- name: select_claim
SELECT j.*,
       a.id AS attempt_id, a.job_id AS attempt_job_id, a.generation AS attempt_generation,
       a.worker_id AS attempt_worker_id, a.status AS attempt_status,
       a.lease_expires_at AS attempt_lease_expires_at, a.started_at AS attempt_started_at,
       a.finished_at AS attempt_finished_at, a.error_category AS attempt_error_category,
       a.error_message AS attempt_error_message, a.error_traceback AS attempt_error_traceback,
       a.late_outcome AS attempt_late_outcome, a.late_reported_at AS attempt_late_reported_at,
       a.due_at AS attempt_due_at, a.claim_token AS attempt_claim_token,
       -- the timeline: the first 8 hex digits of the current WAL file's name
       (SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint)
           AS claim_epoch
FROM duetime_jobs j JOIN duetime_all_attempts a ON a.job_id = j.id
WHERE j.id = %(job_id)s AND a.job_id = %(job_id)s AND a.claim_token = %(claim_token)s::bigint;

-- name: outbox_figures
SELECT queue,
       SUM(CASE WHEN published_at IS NULL THEN 1 ELSE 0 END) AS backlog,
       MIN(CASE WHEN published_at IS NULL THEN created_at END) AS oldest_created_at,
       SUM(CASE WHEN published_at >= %(since)s THEN 1 ELSE 0 END) AS published
FROM duetime_outbox
WHERE published_at IS NULL OR published_at >= %(since)s
GROUP BY queue
ORDER BY queue COLLATE "C";

-- name: dispatched_figures
-- Through the running jobs (as expired_leases): the attempts held by the outbox, by their
-- job's queue.
SELECT j.queue, COUNT(*) AS dispatched, MIN(j.started_at) AS oldest_dispatched_at
FROM duetime_jobs j
WHERE j.status IN ('running', 'cancel_requested')
  AND j.attempt_id IS NOT NULL AND j.worker_id = %(holder)s::text
GROUP BY j.queue
ORDER BY j.queue;

-- name: prune_outbox
DELETE FROM duetime_outbox
WHERE id = ANY (ARRAY(
    SELECT id FROM duetime_outbox
    WHERE published_at IS NOT NULL AND published_at < %(before)s
    ORDER BY published_at
    LIMIT %(limit)s));

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
       OR (j.worker_id = %(holder)s::text AND EXISTS (
           SELECT 1 FROM duetime_outbox o
           WHERE o.attempt_id = j.attempt_id AND o.published_at IS NULL)))
GROUP BY j.limits;

-- name: limit_waiting
-- The due jobs only, read class by class from the claim-order index (the part classes),
-- never the jobs due later. Each class's due rows are asked for in index order
-- with sorting off (as in claim), so the planner walks the index whatever the statistics
-- say, rather than reading every scheduled job of the job counts index once per class.
SET LOCAL enable_sort = off;
@classes
SELECT w.limits, COUNT(*) AS waiting, MIN(w.due_at) AS oldest_due_at FROM classes c
CROSS JOIN LATERAL (
    SELECT j.limits, j.due_at FROM duetime_jobs j
    WHERE j.status = 'scheduled' AND j.priority = c.priority AND j.due_at <= %(now)s
      AND j.limits IS NOT NULL
    ORDER BY j.due_at
    OFFSET 0) w -- a fence: joined as it is written (a walk per class), not hashed to a scan
GROUP BY w.limits;

-- name: claim_pick_limited
-- The claim's pick when limits are set: the claim order (sorting off, walked class by class as
-- the claim's pick is), without the jobs carrying a blocked key, without the retries
-- (attempts > 0) carrying a key of retry_blocked (both JSON arrays of '"key"' strings, looked
-- for in the limits text), and without those already looked at (skip, a JSON array of ids);
-- rows locked, others' skipped.
SET LOCAL enable_sort = off;
@classes
SELECT p.id, p.limits, p.attempts FROM classes c
CROSS JOIN LATERAL (
    SELECT j.id, j.limits, j.attempts FROM duetime_jobs j
    WHERE j.status = 'scheduled' AND j.priority = c.priority
      AND j.due_at <= %(now)s
      AND (j.deadline_at IS NULL OR j.deadline_at > %(now)s)
      AND (%(all_queues)s::boolean OR j.queue = ANY (%(queues)s::text[]))
      AND (%(all_tasks)s::boolean OR j.task = ANY (%(tasks)s::text[]))
      AND NOT (j.queue = ANY (%(outbox_queues)s::text[]))
      AND NOT (j.id = ANY (ARRAY(SELECT s::bigint
                                 FROM jsonb_array_elements_text(%(skip)s::jsonb) AS s)))
      AND (j.limits IS NULL
           OR NOT EXISTS (SELECT 1 FROM jsonb_array_elements_text(%(blocked)s::jsonb) AS b(k)
                          WHERE strpos(j.limits, b.k) > 0))
      AND (j.limits IS NULL OR j.attempts = 0
           OR NOT EXISTS (SELECT 1 FROM jsonb_array_elements_text(%(retry_blocked)s::jsonb) AS r(k)
                          WHERE strpos(j.limits, r.k) > 0))
    ORDER BY j.due_at, j.id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED) p
LIMIT %(limit)s;

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
ON CONFLICT (name) DO UPDATE
SET rate_count = EXCLUDED.rate_count, rate_period = EXCLUDED.rate_period,
    burst = EXCLUDED.burst, concurrency = EXCLUDED.concurrency,
    retry_budget = EXCLUDED.retry_budget, breaker_threshold = EXCLUDED.breaker_threshold,
    breaker_cooldown = EXCLUDED.breaker_cooldown, updated_at = EXCLUDED.updated_at;

-- name: delete_limit
DELETE FROM duetime_limits WHERE name = %(name)s;

-- name: pause_limit
INSERT INTO duetime_limits (name, paused_until, updated_at)
VALUES (%(name)s, %(until)s, %(now)s)
ON CONFLICT (name) DO UPDATE
SET paused_until = GREATEST(duetime_limits.paused_until, EXCLUDED.paused_until);

-- name: lock_limits_named
SELECT * FROM duetime_limits WHERE name = ANY (%(names)s::text[]) ORDER BY name FOR UPDATE;

-- name: job_limits
-- Both tables: finish_jobs moves a job that ended to the history table itself.
SELECT id, limits FROM duetime_jobs WHERE id = ANY (%(ids)s::bigint[]) AND limits IS NOT NULL
UNION ALL
SELECT id, limits FROM duetime_jobs_done
WHERE id = ANY (%(ids)s::bigint[]) AND limits IS NOT NULL;

-- Dependencies (store/sql/dependencies.py; docs/workflows.md, "Dependencies") ---------------

-- name: lock_parents
-- Both tables (a job that ended may be in the history table, migration 25): one locking part
-- per table (PostgreSQL locks no row of a UNION), each in id order. A job that moves between the
-- tables while this waits can be missed by both parts: store/sql/shared.py lock_either reads
-- again for the ids not found.
SELECT * FROM (
    SELECT id, tenant, status, 0 AS done FROM duetime_jobs
    WHERE id = ANY (%(ids)s::bigint[])
    ORDER BY id
    FOR UPDATE) AS hot
UNION ALL
SELECT * FROM (
    SELECT id, tenant, status, 1 AS done FROM duetime_jobs_done
    WHERE id = ANY (%(ids)s::bigint[])
    ORDER BY id
    FOR UPDATE) AS done;

-- name: restore_job
-- A job of the history table back in the jobs table, its row as it is (an operator's move of
-- an ended job: store/sql/jobs.py Jobs.transition); the caller holds its row lock.
WITH gone AS (DELETE FROM duetime_jobs_done WHERE id = %(id)s RETURNING *)
INSERT INTO duetime_jobs (
@job_columns
)
SELECT
@job_columns
FROM gone;

-- name: mark_parents
UPDATE duetime_jobs SET has_children = 1
WHERE id = ANY (%(ids)s::bigint[]) AND has_children IS NULL;

-- name: insert_links
INSERT INTO duetime_job_parents (child_id, parent_id, outcome)
SELECT v.child_id, v.parent_id, v.outcome
FROM json_to_recordset(%(batch)s::json) AS v(child_id bigint, parent_id bigint, outcome text);

-- name: set_dependency
UPDATE duetime_jobs AS j
SET status = v.status, due_at = v.due_at, on_parent_failure = v.on_parent_failure,
    release_delay = v.release_delay, cancel_reason = v.cancel_reason,
    parents_left = v.parents_left
FROM json_to_recordset(%(batch)s::json) AS v(id bigint, status text, due_at timestamptz,
    on_parent_failure text, release_delay double precision, cancel_reason text,
    parents_left integer)
WHERE j.id = v.id;

-- name: ended_parents
-- of these jobs, the ended ones whose children have not been told
SELECT id, status FROM duetime_jobs
WHERE id = ANY (%(ids)s::bigint[]) AND has_children = 1
  AND status IN ('succeeded', 'dead', 'cancelled', 'expired')
ORDER BY id
FOR UPDATE;

-- name: untold_children
SELECT child_id, parent_id FROM duetime_job_parents
WHERE parent_id = ANY (%(ids)s::bigint[]) AND outcome IS NULL
ORDER BY child_id, parent_id;

-- name: lock_children
SELECT id, status, queue, due_at, on_parent_failure, release_delay, has_children, parents_left
FROM duetime_jobs
WHERE id = ANY (%(ids)s::bigint[])
ORDER BY id
FOR UPDATE;

-- name: tell_children
-- each parent's outcome on its links not told yet; the parents have no child left to tell
WITH v AS (
    SELECT * FROM json_to_recordset(%(batch)s::json) AS v(parent_id bigint, outcome text)
), told AS (
    UPDATE duetime_job_parents AS l SET outcome = v.outcome
    FROM v WHERE l.parent_id = v.parent_id AND l.outcome IS NULL
), hot AS (
    UPDATE duetime_jobs AS j SET has_children = NULL FROM v WHERE j.id = v.parent_id
)
-- (a parent that a worker's finish ended is in the history table already: finish_jobs)
UPDATE duetime_jobs_done AS d SET has_children = NULL FROM v WHERE d.id = v.parent_id;

-- name: count_parents_left
UPDATE duetime_jobs AS j SET parents_left = v.parents_left
FROM json_to_recordset(%(batch)s::json) AS v(id bigint, parents_left integer)
WHERE j.id = v.id;

-- name: unblock_jobs
UPDATE duetime_jobs AS j
SET status = (%(moves)s::jsonb ->> j.status), due_at = v.due_at,
    version = j.version + 1, updated_at = %(now)s
FROM json_to_recordset(%(batch)s::json) AS v(id bigint, due_at timestamptz)
WHERE j.id = v.id AND (%(moves)s::jsonb ->> j.status) IS NOT NULL;

-- name: cancel_blocked
UPDATE duetime_jobs AS j
SET status = (%(moves)s::jsonb ->> j.status), cancel_reason = v.reason,
    version = j.version + 1, updated_at = %(now)s
FROM json_to_recordset(%(batch)s::json) AS v(id bigint, reason text)
WHERE j.id = v.id AND (%(moves)s::jsonb ->> j.status) IS NOT NULL;

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
  AND generation = 0 AND has_children = 1
  AND (%(origin)s::text IS NULL OR origin = %(origin)s::text)
ORDER BY id
FOR UPDATE;

-- name: lock_sequence
-- The sequence's row, made if absent, locked until the transaction ends.
INSERT INTO duetime_sequences (tenant, sequence_key)
VALUES (%(tenant)s, %(sequence_key)s)
ON CONFLICT (tenant, sequence_key) DO UPDATE SET tenant = EXCLUDED.tenant;

-- name: drop_sequence
DELETE FROM duetime_sequences
WHERE tenant = %(tenant)s AND sequence_key = %(sequence_key)s;

-- name: sequence_busy
-- Both tables (a job that ended may be in the history table, migration 25): of the
-- jobs that ended, a dead one that holds its sequence keeps it busy.
SELECT id FROM duetime_jobs
WHERE tenant = %(tenant)s AND sequence_key = %(sequence_key)s AND id <> %(exclude)s
  AND (status IN ('scheduled', 'running', 'cancel_requested', 'parked')
       OR (%(waiting)s::boolean AND status = 'waiting')
       OR (status = 'dead' AND sequence_hold = 1))
UNION ALL
SELECT id FROM duetime_jobs_done
WHERE tenant = %(tenant)s AND sequence_key = %(sequence_key)s AND id <> %(exclude)s
  AND status = 'dead' AND sequence_hold = 1
LIMIT 1;

-- name: sequence_next
SELECT id, queue, due_at FROM duetime_jobs
WHERE tenant = %(tenant)s AND sequence_key = %(sequence_key)s AND status = 'waiting'
  AND id > %(after)s
ORDER BY id
LIMIT 1;

-- name: release_sequence_job
UPDATE duetime_jobs
SET status = (%(moves)s::jsonb ->> status), version = version + 1, updated_at = %(now)s
WHERE id = %(id)s AND (%(moves)s::jsonb ->> status) IS NOT NULL;

-- name: rejoin_sequence
UPDATE duetime_jobs
SET status = 'waiting', version = version + 1, updated_at = %(now)s
WHERE id = %(id)s AND status = 'scheduled' AND sequence_key IS NOT NULL;

-- name: sequence_keys_of
SELECT DISTINCT tenant, sequence_key FROM duetime_jobs
WHERE id = ANY (%(ids)s::bigint[]) AND sequence_key IS NOT NULL;

-- name: sequence_ahead
-- Both tables (a job that ended may be in the history table, migration 25): of the
-- jobs that ended, a dead one that holds its sequence is ahead.
SELECT (
    SELECT COUNT(*) FROM duetime_jobs
    WHERE tenant = %(tenant)s AND sequence_key = %(sequence_key)s AND id < %(id)s
      AND (status IN ('scheduled', 'waiting', 'running', 'cancel_requested', 'parked')
           OR (status = 'dead' AND sequence_hold = 1))
) + (
    SELECT COUNT(*) FROM duetime_jobs_done
    WHERE tenant = %(tenant)s AND sequence_key = %(sequence_key)s AND id < %(id)s
      AND status = 'dead' AND sequence_hold = 1
) AS ahead;

-- name: clear_unique
UPDATE duetime_jobs SET unique_key = NULL
WHERE tenant = %(tenant)s AND unique_key = %(unique_key)s AND unique_until <= %(now)s;

-- name: job_by_unique
SELECT * FROM duetime_jobs WHERE tenant = %(tenant)s AND unique_key = %(unique_key)s;
