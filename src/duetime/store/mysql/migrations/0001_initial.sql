-- duetime schema, version 1 (MariaDB 10.6+ / MySQL 8). Instants are DATETIME(6) in UTC; text
-- compares exactly (utf8mb4_bin), as in the other dialects. Job ids come from duetime_job_ids
-- (see queries.sql, reserve_job_ids), so that a batch knows its ids before it inserts.
CREATE TABLE duetime_jobs (
    id BIGINT NOT NULL PRIMARY KEY,
    tenant VARCHAR(100) NOT NULL,
    queue VARCHAR(100) NOT NULL,
    task VARCHAR(200) NOT NULL,
    args JSON NOT NULL,
    priority INT NOT NULL DEFAULT 0,
    -- pick_due's order (priority desc) as an ascending key: older MariaDB has no DESC index
    neg_priority INT AS (-priority) VIRTUAL,
    due_at DATETIME(6) NOT NULL,
    deadline_at DATETIME(6) NULL,
    status VARCHAR(20) NOT NULL,
    version BIGINT NOT NULL DEFAULT 1,
    attempts INT NOT NULL DEFAULT 0,
    max_attempts INT NOT NULL,
    generation BIGINT NOT NULL DEFAULT 0,
    retry_base DOUBLE NOT NULL,
    retry_cap DOUBLE NOT NULL,
    lease_seconds DOUBLE NOT NULL,
    timeout_seconds DOUBLE NULL,
    idempotency_key VARCHAR(255) NULL,
    request_hash VARCHAR(128) NOT NULL,
    business_key TEXT NOT NULL,
    cancel_requested_at DATETIME(6) NULL,
    created_at DATETIME(6) NOT NULL,
    updated_at DATETIME(6) NOT NULL,
    CONSTRAINT duetime_jobs_args_object CHECK (JSON_TYPE(args) = 'OBJECT'),
    CONSTRAINT duetime_jobs_max_attempts CHECK (max_attempts >= 1),
    CONSTRAINT duetime_jobs_status CHECK (status IN ('scheduled', 'waiting', 'running',
        'cancel_requested', 'succeeded', 'dead', 'cancelled', 'expired', 'parked')),
    UNIQUE KEY duetime_jobs_idempotency (tenant, idempotency_key),
    KEY duetime_jobs_due (queue, status, neg_priority, due_at, id),
    KEY duetime_jobs_due_any (status, neg_priority, due_at, id),
    KEY duetime_jobs_deadline (status, deadline_at),
    KEY duetime_jobs_listing (tenant, status, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- one row per id being handed out, deleted in the same transaction (reserve_job_ids)
CREATE TABLE duetime_job_ids (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    owner BIGINT NOT NULL,
    KEY duetime_job_ids_owner (owner)
) ENGINE = InnoDB;

CREATE TABLE duetime_attempts (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    job_id BIGINT NOT NULL,
    generation BIGINT NOT NULL,
    worker_id VARCHAR(400) NOT NULL,
    status VARCHAR(20) NOT NULL,
    lease_expires_at DATETIME(6) NOT NULL,
    started_at DATETIME(6) NOT NULL,
    finished_at DATETIME(6) NULL,
    error_category VARCHAR(50) NULL,
    error_message MEDIUMTEXT NULL,
    error_traceback MEDIUMTEXT NULL,
    late_outcome VARCHAR(20) NULL,
    late_reported_at DATETIME(6) NULL,
    CONSTRAINT duetime_attempts_status CHECK (status IN ('running', 'succeeded', 'failed',
        'lost', 'cancelled', 'parked')),
    CONSTRAINT duetime_attempts_job FOREIGN KEY (job_id) REFERENCES duetime_jobs (id)
        ON DELETE CASCADE,
    UNIQUE KEY duetime_attempts_generation (job_id, generation),
    KEY duetime_attempts_lease (status, lease_expires_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
