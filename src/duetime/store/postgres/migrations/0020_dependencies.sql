-- Dependencies between jobs (docs/workflows.md, "Dependencies"): a job may wait for parent
-- jobs (status 'blocked'). duetime_job_parents holds one row per (child, parent), with the
-- status the parent ended in once it has (NULL before); a parent with children not yet told
-- of its end has has_children = 1, read by the statements that end it, so that a plain job's
-- finish pays nothing more. The child keeps what a parent's failure does (on_parent_failure),
-- how many of its parents have not told it of their end (parents_left),
-- the delay given at enqueue, counted from its release (release_delay), and why a parent's
-- failure cancelled it (cancel_reason). New columns are NULL: no table rewrite.
ALTER TABLE duetime_jobs
    ADD COLUMN has_children smallint,
    ADD COLUMN on_parent_failure text,
    ADD COLUMN parents_left integer,
    ADD COLUMN release_delay double precision,
    ADD COLUMN cancel_reason text,
    DROP CONSTRAINT duetime_jobs_status_check,
    -- wider than the check it replaces, which every row meets: not scanned again
    ADD CONSTRAINT duetime_jobs_status_check CHECK (status IN ('scheduled', 'waiting',
        'running', 'cancel_requested', 'succeeded', 'dead', 'cancelled', 'expired', 'parked',
        'blocked')) NOT VALID;
CREATE TABLE duetime_job_parents (
    child_id bigint NOT NULL REFERENCES duetime_jobs (id) ON DELETE CASCADE,
    parent_id bigint NOT NULL REFERENCES duetime_jobs (id) ON DELETE CASCADE,
    outcome text,
    PRIMARY KEY (child_id, parent_id)
);
CREATE INDEX duetime_job_parents_parent ON duetime_job_parents (parent_id);
