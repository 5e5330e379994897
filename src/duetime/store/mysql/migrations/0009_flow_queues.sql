-- Flow control of queues and tenants (MariaDB / MySQL): pause, cluster-wide concurrency caps,
-- weights and a bound on backlog (docs/flow-control.md). NULL is "no limit"; weight 1 is the
-- default.
ALTER TABLE duetime_queues
    ADD COLUMN paused BOOLEAN NOT NULL DEFAULT FALSE,
    ADD COLUMN concurrency INT NULL,
    ADD COLUMN max_backlog INT NULL,
    ADD COLUMN weight DOUBLE NOT NULL DEFAULT 1,
    ADD CONSTRAINT duetime_queues_limits
        CHECK ((concurrency IS NULL OR concurrency >= 0)
               AND (max_backlog IS NULL OR max_backlog >= 0) AND weight > 0);

-- One row per tenant that has a setting; a tenant without a row has every default.
CREATE TABLE duetime_tenants (
    tenant VARCHAR(100) NOT NULL PRIMARY KEY,
    concurrency INT NULL,
    max_backlog INT NULL,
    weight DOUBLE NOT NULL DEFAULT 1,
    updated_at DATETIME(6) NOT NULL,
    CONSTRAINT duetime_tenants_limits
        CHECK ((concurrency IS NULL OR concurrency >= 0)
               AND (max_backlog IS NULL OR max_backlog >= 0) AND weight > 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
