-- Dispatch through a broker (MariaDB / MySQL): each queue's settings, and the transactional
-- outbox.

-- One row per queue that has a setting; a queue without a row has every default (direct
-- dispatch). More settings join as columns beside dispatch.
CREATE TABLE duetime_queues (
    queue VARCHAR(100) NOT NULL PRIMARY KEY,
    dispatch VARCHAR(16) NOT NULL DEFAULT 'direct',
    updated_at DATETIME(6) NOT NULL,
    CONSTRAINT duetime_queues_dispatch CHECK (dispatch IN ('direct', 'outbox'))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- One event per attempt dispatched to the broker, written in the transaction that started the
-- attempt. A relay leases a batch of unpublished events (relay_id, relay_until), publishes
-- them and marks them published once the broker confirmed them.
CREATE TABLE duetime_outbox (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    job_id BIGINT NOT NULL,
    attempt_id BIGINT NOT NULL,
    queue VARCHAR(100) NOT NULL,
    task VARCHAR(200) NOT NULL,
    generation BIGINT NOT NULL,
    version BIGINT NOT NULL,
    created_at DATETIME(6) NOT NULL,
    relay_id VARCHAR(400) NULL,
    relay_until DATETIME(6) NULL,
    published_at DATETIME(6) NULL,
    KEY duetime_outbox_unpublished (published_at, id),
    KEY duetime_outbox_attempt (attempt_id),
    CONSTRAINT duetime_outbox_job FOREIGN KEY (job_id) REFERENCES duetime_jobs (id)
        ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
