-- Limits per dependency (MariaDB / MySQL): one row per limit key, and the keys each job
-- carries.

-- The keys a job's task declared, as a sorted JSON array of strings (NULL: none), written at
-- enqueue so the claim can tell in SQL which due jobs a limit holds back.
ALTER TABLE duetime_jobs ADD COLUMN limits VARCHAR(1100) NULL;

-- One row per key an operator set (or a handler paused). Settings: rate_count per
-- rate_period seconds with a bucket of burst tokens, a concurrency cap. State: the bucket's
-- tokens as of refilled_at (NULL: full), paused_until; for retry budgets and the breaker,
-- the counts of the window's current bucket (cur_*, from window_at) and of the one before
-- (prev_*), and the breaker's state (closed, open until breaker_until, half_open).
CREATE TABLE duetime_limits (
    name VARCHAR(100) NOT NULL PRIMARY KEY,
    rate_count DOUBLE NULL,
    rate_period DOUBLE NULL,
    burst INT NULL,
    concurrency INT NULL,
    retry_budget DOUBLE NULL,
    breaker_threshold DOUBLE NULL,
    tokens DOUBLE NULL,
    refilled_at DATETIME(6) NULL,
    paused_until DATETIME(6) NULL,
    window_at DATETIME(6) NULL,
    cur_starts INT NOT NULL DEFAULT 0,
    cur_retries INT NOT NULL DEFAULT 0,
    cur_failures INT NOT NULL DEFAULT 0,
    cur_successes INT NOT NULL DEFAULT 0,
    prev_starts INT NOT NULL DEFAULT 0,
    prev_retries INT NOT NULL DEFAULT 0,
    prev_failures INT NOT NULL DEFAULT 0,
    prev_successes INT NOT NULL DEFAULT 0,
    breaker VARCHAR(16) NOT NULL DEFAULT 'closed',
    breaker_until DATETIME(6) NULL,
    updated_at DATETIME(6) NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
