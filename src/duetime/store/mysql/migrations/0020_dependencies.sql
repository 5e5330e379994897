-- Dependencies between jobs (docs/workflows.md, "Dependencies"): a job may wait for parent
-- jobs (status 'blocked'). duetime_job_parents holds one row per (child, parent), with the
-- status the parent ended in once it has (NULL before); a parent with children not yet told
-- of its end has has_children = 1, read by the statements that end it, so that a plain job's
-- finish pays nothing more. The child keeps what a parent's failure does (on_parent_failure),
-- how many of its parents have not told it of their end (parents_left),
-- the delay given at enqueue, counted from its release (release_delay), and why a parent's
-- failure cancelled it (cancel_reason).
ALTER TABLE duetime_jobs
    ADD COLUMN has_children TINYINT NULL,
    ADD COLUMN on_parent_failure VARCHAR(16) NULL,
    ADD COLUMN parents_left INT NULL,
    ADD COLUMN release_delay DOUBLE NULL,
    ADD COLUMN cancel_reason TEXT NULL;
ALTER TABLE duetime_jobs DROP CONSTRAINT duetime_jobs_status;
ALTER TABLE duetime_jobs ADD CONSTRAINT duetime_jobs_status CHECK (status IN ('scheduled',
    'waiting', 'running', 'cancel_requested', 'succeeded', 'dead', 'cancelled', 'expired',
    'parked', 'blocked'));
CREATE TABLE duetime_job_parents (
    child_id BIGINT NOT NULL,
    parent_id BIGINT NOT NULL,
    outcome VARCHAR(20) NULL,
    PRIMARY KEY (child_id, parent_id),
    KEY duetime_job_parents_parent (parent_id),
    CONSTRAINT duetime_job_parents_child_fk FOREIGN KEY (child_id)
        REFERENCES duetime_jobs (id) ON DELETE CASCADE,
    CONSTRAINT duetime_job_parents_parent_fk FOREIGN KEY (parent_id)
        REFERENCES duetime_jobs (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
