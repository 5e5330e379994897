-- Flow control of queues and tenants (PostgreSQL): pause, cluster-wide concurrency caps,
-- weights and a bound on backlog (docs/flow-control.md). NULL is "no limit"; weight 1 is the
-- default.
ALTER TABLE duetime_queues
    ADD COLUMN paused boolean NOT NULL DEFAULT false,
    ADD COLUMN concurrency integer CHECK (concurrency >= 0),
    ADD COLUMN max_backlog integer CHECK (max_backlog >= 0),
    ADD COLUMN weight double precision NOT NULL DEFAULT 1 CHECK (weight > 0);

-- One row per tenant that has a setting; a tenant without a row has every default.
CREATE TABLE duetime_tenants (
    tenant text PRIMARY KEY,
    concurrency integer CHECK (concurrency >= 0),
    max_backlog integer CHECK (max_backlog >= 0),
    weight double precision NOT NULL DEFAULT 1 CHECK (weight > 0),
    updated_at timestamptz NOT NULL
);
