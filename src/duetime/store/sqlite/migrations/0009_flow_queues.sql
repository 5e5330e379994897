-- Flow control of queues and tenants (SQLite): pause, cluster-wide concurrency caps, weights
-- and a bound on backlog (docs/flow-control.md). NULL is "no limit"; weight 1 is the default.
ALTER TABLE duetime_queues ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;
ALTER TABLE duetime_queues ADD COLUMN concurrency INTEGER CHECK (concurrency >= 0);
ALTER TABLE duetime_queues ADD COLUMN max_backlog INTEGER CHECK (max_backlog >= 0);
ALTER TABLE duetime_queues ADD COLUMN weight REAL NOT NULL DEFAULT 1 CHECK (weight > 0);

-- One row per tenant that has a setting; a tenant without a row has every default.
CREATE TABLE duetime_tenants (
    tenant TEXT PRIMARY KEY,
    concurrency INTEGER CHECK (concurrency >= 0),
    max_backlog INTEGER CHECK (max_backlog >= 0),
    weight REAL NOT NULL DEFAULT 1 CHECK (weight > 0),
    updated_at INTEGER NOT NULL
);
