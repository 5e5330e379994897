-- API (MariaDB / MySQL): hashed bearer tokens, and what the stats and metrics read.
CREATE TABLE duetime_tokens (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    tenant VARCHAR(100) NOT NULL,
    role VARCHAR(10) NOT NULL,
    name TEXT NOT NULL,
    prefix VARCHAR(20) NOT NULL,
    secret_hash VARCHAR(128) NOT NULL,
    created_at DATETIME(6) NOT NULL,
    last_used_at DATETIME(6) NULL,
    revoked_at DATETIME(6) NULL,
    CONSTRAINT duetime_tokens_role CHECK (role IN ('read', 'write', 'admin')),
    UNIQUE KEY duetime_tokens_hash (secret_hash)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- when the attempt was due, so scheduling lag (started_at - due_at) can be measured later
ALTER TABLE duetime_attempts
    ADD COLUMN due_at DATETIME(6) NULL,
    ADD KEY duetime_attempts_started (started_at),
    ADD KEY duetime_attempts_finished (finished_at);
ALTER TABLE duetime_jobs ADD KEY duetime_jobs_status (status, tenant, queue);
