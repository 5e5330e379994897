-- Sequences and unique windows (docs/workflows.md). A job of a sequence carries its key
-- (sequence_key, per tenant) and whether its death holds the sequence (sequence_hold = 1);
-- a job enqueued unique carries the digest of its unique key (unique_key) and the end of its
-- window (unique_until). Plain jobs leave all four NULL: the partial indexes skip them.
ALTER TABLE duetime_jobs ADD COLUMN sequence_key text;
ALTER TABLE duetime_jobs ADD COLUMN sequence_hold smallint;
ALTER TABLE duetime_jobs ADD COLUMN unique_key text;
ALTER TABLE duetime_jobs ADD COLUMN unique_until timestamptz;
-- a sequence's jobs by status, in enqueue order: its head, its next waiting job
CREATE INDEX duetime_jobs_sequence ON duetime_jobs (tenant, sequence_key, status, id)
    WHERE sequence_key IS NOT NULL;
-- one job per unique key and tenant; a later enqueue after the window clears the key first
CREATE UNIQUE INDEX duetime_jobs_unique ON duetime_jobs (tenant, unique_key)
    WHERE unique_key IS NOT NULL;
-- One row per sequence that has jobs not ended: the lock its enqueues and releases take
-- turns on (deleted when the sequence empties, so an idle key costs no row).
CREATE TABLE duetime_sequences (
    tenant text NOT NULL,
    sequence_key text NOT NULL,
    PRIMARY KEY (tenant, sequence_key)
);
