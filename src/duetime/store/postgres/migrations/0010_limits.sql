-- Limits per dependency (PostgreSQL): one row per limit key, and the keys each job carries.

-- The keys a job's task declared, as a sorted JSON array of strings (NULL: none), written at
-- enqueue so the claim can tell in SQL which due jobs a limit holds back.
ALTER TABLE duetime_jobs ADD COLUMN limits text;

-- One row per key an operator set (or a handler paused). Settings: rate_count per
-- rate_period seconds with a bucket of burst tokens, a concurrency cap. State: the bucket's
-- tokens as of refilled_at (NULL: full), paused_until; for retry budgets and the breaker,
-- the counts of the window's current bucket (cur_*, from window_at) and of the one before
-- (prev_*), and the breaker's state (closed, open until breaker_until, half_open).
CREATE TABLE duetime_limits (
    name text PRIMARY KEY,
    rate_count double precision,
    rate_period double precision,
    burst integer,
    concurrency integer,
    retry_budget double precision,
    breaker_threshold double precision,
    tokens double precision,
    refilled_at timestamptz,
    paused_until timestamptz,
    window_at timestamptz,
    cur_starts integer NOT NULL DEFAULT 0,
    cur_retries integer NOT NULL DEFAULT 0,
    cur_failures integer NOT NULL DEFAULT 0,
    cur_successes integer NOT NULL DEFAULT 0,
    prev_starts integer NOT NULL DEFAULT 0,
    prev_retries integer NOT NULL DEFAULT 0,
    prev_failures integer NOT NULL DEFAULT 0,
    prev_successes integer NOT NULL DEFAULT 0,
    breaker text NOT NULL DEFAULT 'closed',
    breaker_until timestamptz,
    updated_at timestamptz NOT NULL
);
