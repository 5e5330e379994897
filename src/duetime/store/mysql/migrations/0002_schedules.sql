-- Recurring schedules (MariaDB / MySQL). A schedule's definition is one JSON document
-- (ScheduleSpec); each tick it fires becomes an ordinary job identified by
-- (schedule_id, nominal_at).
CREATE TABLE duetime_schedules (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    tenant VARCHAR(100) NOT NULL,
    name VARCHAR(200) NOT NULL,
    spec JSON NOT NULL,
    definition_hash VARCHAR(128) NOT NULL,
    paused BOOLEAN NOT NULL DEFAULT FALSE,
    anchor_at DATETIME(6) NOT NULL,
    next_fire_at DATETIME(6) NULL,
    version BIGINT NOT NULL DEFAULT 1,
    created_at DATETIME(6) NOT NULL,
    updated_at DATETIME(6) NOT NULL,
    CONSTRAINT duetime_schedules_spec_object CHECK (JSON_TYPE(spec) = 'OBJECT'),
    UNIQUE KEY duetime_schedules_name (tenant, name),
    KEY duetime_schedules_due (paused, next_fire_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

ALTER TABLE duetime_jobs
    ADD COLUMN schedule_id BIGINT NULL,
    ADD COLUMN schedule_name VARCHAR(200) NULL,
    ADD COLUMN nominal_at DATETIME(6) NULL,
    ADD COLUMN covers JSON NULL,
    ADD COLUMN origin VARCHAR(20) NULL,
    ADD CONSTRAINT duetime_jobs_schedule FOREIGN KEY (schedule_id)
        REFERENCES duetime_schedules (id) ON DELETE SET NULL,
    ADD UNIQUE KEY duetime_jobs_occurrence (schedule_id, nominal_at),
    ADD KEY duetime_jobs_occurrence_active (schedule_id, status, nominal_at);

CREATE TABLE duetime_ticks (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    schedule_id BIGINT NOT NULL,
    nominal_at DATETIME(6) NOT NULL,
    outcome VARCHAR(40) NOT NULL,
    origin VARCHAR(20) NOT NULL,
    job_id BIGINT NULL,
    detail TEXT NOT NULL,
    recorded_at DATETIME(6) NOT NULL,
    CONSTRAINT duetime_ticks_schedule FOREIGN KEY (schedule_id)
        REFERENCES duetime_schedules (id) ON DELETE CASCADE,
    CONSTRAINT duetime_ticks_job FOREIGN KEY (job_id)
        REFERENCES duetime_jobs (id) ON DELETE SET NULL,
    UNIQUE KEY duetime_ticks_outcome (schedule_id, nominal_at, outcome, origin),
    KEY duetime_ticks_history (schedule_id, nominal_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
