-- Results and progress (docs/workflows.md). A succeeded job's result: the compact JSON text
-- its handler returned (NULL: it returned None); the latest progress its attempts reported
-- (a fraction from 0 to 1, an optional message, when it was written). Nullable columns with
-- no default: a job that uses neither stores nothing, and no index covers them.
ALTER TABLE duetime_jobs ADD COLUMN result TEXT;
ALTER TABLE duetime_jobs ADD COLUMN progress REAL;
ALTER TABLE duetime_jobs ADD COLUMN progress_message TEXT;
ALTER TABLE duetime_jobs ADD COLUMN progress_at INTEGER;
