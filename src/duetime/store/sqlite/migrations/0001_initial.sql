-- duetime schema, version 1 (SQLite). Instants are integer microseconds since the Unix epoch, UTC.
CREATE TABLE duetime_jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant TEXT NOT NULL,
    queue TEXT NOT NULL,
    task TEXT NOT NULL,
    args TEXT NOT NULL CHECK (json_valid(args) AND json_type(args) = 'object'),
    priority INTEGER NOT NULL DEFAULT 0,
    due_at INTEGER NOT NULL,
    deadline_at INTEGER,
    status TEXT NOT NULL CHECK (status IN ('scheduled', 'waiting', 'running', 'cancel_requested',
        'succeeded', 'dead', 'cancelled', 'expired', 'parked')),
    version INTEGER NOT NULL DEFAULT 1,
    attempts INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL CHECK (max_attempts >= 1),
    generation INTEGER NOT NULL DEFAULT 0,
    retry_base REAL NOT NULL,
    retry_cap REAL NOT NULL,
    lease_seconds REAL NOT NULL,
    timeout_seconds REAL,
    idempotency_key TEXT,
    request_hash TEXT NOT NULL,
    business_key TEXT NOT NULL,
    cancel_requested_at INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE UNIQUE INDEX duetime_jobs_idempotency ON duetime_jobs (tenant, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX duetime_jobs_due ON duetime_jobs (queue, priority DESC, due_at, id)
    WHERE status = 'scheduled';
-- workers that take every queue read their order from this one
CREATE INDEX duetime_jobs_due_any ON duetime_jobs (priority DESC, due_at, id)
    WHERE status = 'scheduled';
CREATE INDEX duetime_jobs_deadline ON duetime_jobs (deadline_at)
    WHERE status = 'scheduled' AND deadline_at IS NOT NULL;
CREATE INDEX duetime_jobs_listing ON duetime_jobs (tenant, status, id);

CREATE TABLE duetime_attempts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id INTEGER NOT NULL REFERENCES duetime_jobs (id) ON DELETE CASCADE,
    generation INTEGER NOT NULL,
    worker_id TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running', 'succeeded', 'failed', 'lost', 'cancelled', 'parked')),
    lease_expires_at INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    finished_at INTEGER,
    error_category TEXT,
    error_message TEXT,
    error_traceback TEXT,
    late_outcome TEXT,
    late_reported_at INTEGER,
    UNIQUE (job_id, generation)
);

CREATE INDEX duetime_attempts_lease ON duetime_attempts (lease_expires_at)
    WHERE status = 'running';
