-- Limits per dependency (PostgreSQL): one row per limit key, and the keys each job carries.

-- The keys a job's task declared, as a sorted JSON array of strings (NULL: none), written at
-- enqueue so the claim can tell in SQL which due jobs a limit holds back.
ALTER TABLE duetime_jobs ADD COLUMN limits text;

-- One row per key an operator set (or a handler paused). Settings: rate_count per
-- rate_period seconds with a bucket of burst tokens, a concurrency cap. State: the bucket's
-- tokens as of refilled_at (NULL: full), and paused_until.
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
    updated_at timestamptz NOT NULL
);
