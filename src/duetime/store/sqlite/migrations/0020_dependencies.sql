-- Dependencies between jobs (docs/workflows.md, "Dependencies"): a job may wait for parent
-- jobs (status 'blocked'). duetime_job_parents holds one row per (child, parent), with the
-- status the parent ended in once it has (NULL before); a parent with children not yet told
-- of its end has has_children = 1, read by the statements that end it, so that a plain job's
-- finish pays nothing more. The child keeps what a parent's failure does (on_parent_failure),
-- how many of its parents have not told it of their end (parents_left),
-- the delay given at enqueue, counted from its release (release_delay), and why a parent's
-- failure cancelled it (cancel_reason).
ALTER TABLE duetime_jobs ADD COLUMN has_children INTEGER;
ALTER TABLE duetime_jobs ADD COLUMN on_parent_failure TEXT;
ALTER TABLE duetime_jobs ADD COLUMN parents_left INTEGER;
ALTER TABLE duetime_jobs ADD COLUMN release_delay REAL;
ALTER TABLE duetime_jobs ADD COLUMN cancel_reason TEXT;
-- The status CHECK constraint gains 'blocked'. SQLite cannot alter a constraint, and the usual
-- rebuild (create, copy, drop, rename) cannot run here: the migration is one transaction, in
-- which foreign keys cannot be switched off, so dropping the old table would delete every
-- attempt and outbox event by their ON DELETE CASCADE. A wider CHECK leaves the file's format
-- and every stored row as they are, so the table's definition is edited in place (SQLite's
-- documented procedure for such changes, https://sqlite.org/lang_altertable.html, section 7);
-- the CREATE TABLE below then makes every connection read the schema again.
PRAGMA writable_schema = ON;
UPDATE sqlite_master
SET sql = replace(sql, '''expired'', ''parked''))', '''expired'', ''parked'', ''blocked''))')
WHERE type = 'table' AND name = 'duetime_jobs'
  AND instr(sql, '''expired'', ''parked''))') > 0;
PRAGMA writable_schema = RESET;
CREATE TABLE duetime_job_parents (
    child_id INTEGER NOT NULL REFERENCES duetime_jobs (id) ON DELETE CASCADE,
    parent_id INTEGER NOT NULL REFERENCES duetime_jobs (id) ON DELETE CASCADE,
    outcome TEXT,
    PRIMARY KEY (child_id, parent_id)
) WITHOUT ROWID;
CREATE INDEX duetime_job_parents_parent ON duetime_job_parents (parent_id);
