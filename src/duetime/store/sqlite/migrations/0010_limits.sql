-- Limits per dependency (SQLite): one row per limit key, and the keys each job carries.

-- The keys a job's task declared, as a sorted JSON array of strings (NULL: none), written at
-- enqueue so the claim can tell in SQL which due jobs a limit holds back.
ALTER TABLE duetime_jobs ADD COLUMN limits TEXT;

-- One row per key an operator set (or a handler paused). Settings: rate_count per
-- rate_period seconds with a bucket of burst tokens, a concurrency cap. State: the bucket's
-- tokens as of refilled_at (NULL: full), paused_until; for retry budgets and the breaker,
-- the counts of the window's current bucket (cur_*, from window_at) and of the one before
-- (prev_*), and the breaker's state (closed, open until breaker_until, half_open).
CREATE TABLE duetime_limits (
    name TEXT PRIMARY KEY,
    rate_count REAL,
    rate_period REAL,
    burst INTEGER,
    concurrency INTEGER,
    retry_budget REAL,
    breaker_threshold REAL,
    tokens REAL,
    refilled_at INTEGER,
    paused_until INTEGER,
    window_at INTEGER,
    cur_starts INTEGER NOT NULL DEFAULT 0,
    cur_retries INTEGER NOT NULL DEFAULT 0,
    cur_failures INTEGER NOT NULL DEFAULT 0,
    cur_successes INTEGER NOT NULL DEFAULT 0,
    prev_starts INTEGER NOT NULL DEFAULT 0,
    prev_retries INTEGER NOT NULL DEFAULT 0,
    prev_failures INTEGER NOT NULL DEFAULT 0,
    prev_successes INTEGER NOT NULL DEFAULT 0,
    breaker TEXT NOT NULL DEFAULT 'closed',
    breaker_until INTEGER,
    updated_at INTEGER NOT NULL
);
