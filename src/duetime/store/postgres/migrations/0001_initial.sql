-- duetime schema, version 1 (PostgreSQL). Instants are timestamptz, ids are bigint.
CREATE TABLE duetime_jobs (
    id bigserial PRIMARY KEY,
    tenant text NOT NULL,
    queue text NOT NULL,
    task text NOT NULL,
    args jsonb NOT NULL CHECK (jsonb_typeof(args) = 'object'),
    priority integer NOT NULL DEFAULT 0,
    due_at timestamptz NOT NULL,
    deadline_at timestamptz,
    status text NOT NULL CHECK (status IN ('scheduled', 'waiting', 'running', 'cancel_requested',
        'succeeded', 'dead', 'cancelled', 'expired', 'parked')),
    version bigint NOT NULL DEFAULT 1,
    attempts integer NOT NULL DEFAULT 0,
    max_attempts integer NOT NULL CHECK (max_attempts >= 1),
    generation bigint NOT NULL DEFAULT 0,
    retry_base double precision NOT NULL,
    retry_cap double precision NOT NULL,
    lease_seconds double precision NOT NULL,
    timeout_seconds double precision,
    idempotency_key text,
    request_hash text NOT NULL,
    business_key text NOT NULL,
    cancel_requested_at timestamptz,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
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
    id bigserial PRIMARY KEY,
    job_id bigint NOT NULL REFERENCES duetime_jobs (id) ON DELETE CASCADE,
    generation bigint NOT NULL,
    worker_id text NOT NULL,
    status text NOT NULL CHECK (status IN ('running', 'succeeded', 'failed', 'lost', 'cancelled', 'parked')),
    lease_expires_at timestamptz NOT NULL,
    started_at timestamptz NOT NULL,
    finished_at timestamptz,
    error_category text,
    error_message text,
    error_traceback text,
    late_outcome text,
    late_reported_at timestamptz,
    UNIQUE (job_id, generation)
);

CREATE INDEX duetime_attempts_lease ON duetime_attempts (lease_expires_at)
    WHERE status = 'running';
