-- Dispatch through a broker (SQLite): each queue's settings, and the transactional outbox.

-- One row per queue that has a setting; a queue without a row has every default (direct
-- dispatch). More settings join as columns beside dispatch.
CREATE TABLE duetime_queues (
    queue TEXT PRIMARY KEY,
    dispatch TEXT NOT NULL DEFAULT 'direct' CHECK (dispatch IN ('direct', 'outbox')),
    updated_at INTEGER NOT NULL
);

-- One event per attempt dispatched to the broker, written in the transaction that started the
-- attempt. A relay leases a batch of unpublished events (relay_id, relay_until), publishes
-- them and marks them published once the broker confirmed them.
CREATE TABLE duetime_outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id INTEGER NOT NULL REFERENCES duetime_jobs (id) ON DELETE CASCADE,
    attempt_id INTEGER NOT NULL,
    queue TEXT NOT NULL,
    task TEXT NOT NULL,
    generation INTEGER NOT NULL,
    version INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    relay_id TEXT,
    relay_until INTEGER,
    published_at INTEGER
);
CREATE INDEX duetime_outbox_unpublished ON duetime_outbox (id) WHERE published_at IS NULL;
CREATE INDEX duetime_outbox_attempt ON duetime_outbox (attempt_id);
CREATE INDEX duetime_outbox_published ON duetime_outbox (published_at)
    WHERE published_at IS NOT NULL;
CREATE INDEX duetime_outbox_job ON duetime_outbox (job_id);
