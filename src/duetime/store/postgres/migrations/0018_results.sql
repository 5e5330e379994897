-- Results and progress (docs/workflows.md). A succeeded job's result: the compact JSON text
-- its handler returned, kept as text (as returned: key order and numbers unchanged; NULL: it
-- returned None); the latest progress its attempts reported (a fraction from 0 to 1, an
-- optional message, when it was written). Nullable columns with no default: adding them
-- rewrites no row, a job that uses neither stores nothing, and no index covers them (a
-- progress write can be a HOT update).
ALTER TABLE duetime_jobs ADD COLUMN result text, ADD COLUMN progress double precision,
    ADD COLUMN progress_message text, ADD COLUMN progress_at timestamptz;
