-- API (PostgreSQL): hashed bearer tokens, and what the stats and metrics read.
CREATE TABLE duetime_tokens (
    id bigserial PRIMARY KEY,
    tenant text NOT NULL,
    role text NOT NULL CHECK (role IN ('read', 'write', 'admin')),
    name text NOT NULL DEFAULT '',
    prefix text NOT NULL,  -- the first characters of the secret, to recognise it in a list
    secret_hash text NOT NULL UNIQUE,  -- sha256 of the secret; the secret itself is never stored
    created_at timestamptz NOT NULL,
    last_used_at timestamptz,
    revoked_at timestamptz
);

-- when the attempt was due, so scheduling lag (started_at - due_at) can be measured later
ALTER TABLE duetime_attempts ADD COLUMN due_at timestamptz;
CREATE INDEX duetime_attempts_started ON duetime_attempts (started_at);
CREATE INDEX duetime_attempts_finished ON duetime_attempts (finished_at)
    WHERE finished_at IS NOT NULL;
CREATE INDEX duetime_jobs_status ON duetime_jobs (status, tenant, queue);
