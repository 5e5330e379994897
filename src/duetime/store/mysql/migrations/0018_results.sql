-- Results and progress (docs/workflows.md). A succeeded job's result: the compact JSON text
-- its handler returned (NULL: it returned None); the latest progress its attempts reported
-- (a fraction from 0 to 1, an optional message, when it was written). Nullable columns with
-- no default, added last: an instant ADD COLUMN on MariaDB 10.3+ and MySQL 8.0.12+.
ALTER TABLE duetime_jobs ADD COLUMN result LONGTEXT NULL, ADD COLUMN progress DOUBLE NULL,
    ADD COLUMN progress_message VARCHAR(800) NULL, ADD COLUMN progress_at DATETIME(6) NULL;
