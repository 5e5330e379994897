-- API (SQLite): hashed bearer tokens, and what the stats and metrics read.
CREATE TABLE duetime_tokens (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant TEXT NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('read', 'write', 'admin')),
    name TEXT NOT NULL DEFAULT '',
    prefix TEXT NOT NULL,  -- the first characters of the secret, to recognise it in a list
    secret_hash TEXT NOT NULL UNIQUE,  -- sha256 of the secret; the secret itself is never stored
    created_at INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at INTEGER
);

-- when the attempt was due, so scheduling lag (started_at - due_at) can be measured later
ALTER TABLE duetime_attempts ADD COLUMN due_at INTEGER;
CREATE INDEX duetime_attempts_started ON duetime_attempts (started_at);
CREATE INDEX duetime_attempts_finished ON duetime_attempts (finished_at)
    WHERE finished_at IS NOT NULL;
CREATE INDEX duetime_jobs_status ON duetime_jobs (status, tenant, queue);
