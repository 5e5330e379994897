-- Sequences and unique windows (docs/workflows.md). A job of a sequence carries its key
-- (sequence_key, per tenant) and whether its death holds the sequence (sequence_hold = 1);
-- a job enqueued unique carries the digest of its unique key (unique_key) and the end of its
-- window (unique_until). Plain jobs leave all four NULL. MariaDB/MySQL have no partial
-- indexes: the two indexes below hold a NULL entry per plain job, written once at insert and
-- never again (neither index holds a column a claim or a finish changes).
ALTER TABLE duetime_jobs
    ADD COLUMN sequence_key VARCHAR(255) NULL,
    ADD COLUMN sequence_hold SMALLINT NULL,
    ADD COLUMN unique_key VARCHAR(64) NULL,
    ADD COLUMN unique_until DATETIME(6) NULL,
    -- a sequence's jobs in enqueue order (their status read from the row)
    ADD KEY duetime_jobs_sequence (sequence_key, tenant, id),
    -- one job per unique key and tenant; a later enqueue after the window clears the key first
    ADD UNIQUE KEY duetime_jobs_unique (unique_key, tenant);
-- One row per sequence that has jobs not ended: the lock its enqueues and releases take
-- turns on (deleted when the sequence empties, so an idle key costs no row).
CREATE TABLE duetime_sequences (
    tenant VARCHAR(100) NOT NULL,
    sequence_key VARCHAR(255) NOT NULL,
    PRIMARY KEY (tenant, sequence_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
