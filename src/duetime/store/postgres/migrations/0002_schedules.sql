-- Recurring schedules (PostgreSQL). A schedule's definition is one JSON document (ScheduleSpec);
-- each tick it fires becomes an ordinary job identified by (schedule_id, nominal_at).
CREATE TABLE duetime_schedules (
    id bigserial PRIMARY KEY,
    tenant text NOT NULL,
    name text NOT NULL,
    spec jsonb NOT NULL CHECK (jsonb_typeof(spec) = 'object'),
    definition_hash text NOT NULL,
    paused boolean NOT NULL DEFAULT false,
    anchor_at timestamptz NOT NULL,
    next_fire_at timestamptz,
    version bigint NOT NULL DEFAULT 1,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    UNIQUE (tenant, name)
);

CREATE INDEX duetime_schedules_due ON duetime_schedules (next_fire_at)
    WHERE NOT paused AND next_fire_at IS NOT NULL;

ALTER TABLE duetime_jobs
    ADD COLUMN schedule_id bigint REFERENCES duetime_schedules (id) ON DELETE SET NULL,
    ADD COLUMN schedule_name text,
    ADD COLUMN nominal_at timestamptz,
    ADD COLUMN covers jsonb,
    ADD COLUMN origin text;

CREATE UNIQUE INDEX duetime_jobs_occurrence ON duetime_jobs (schedule_id, nominal_at)
    WHERE schedule_id IS NOT NULL;
CREATE INDEX duetime_jobs_occurrence_active ON duetime_jobs (schedule_id, nominal_at)
    WHERE schedule_id IS NOT NULL
      AND status IN ('scheduled', 'waiting', 'running', 'cancel_requested');

CREATE TABLE duetime_ticks (
    id bigserial PRIMARY KEY,
    schedule_id bigint NOT NULL REFERENCES duetime_schedules (id) ON DELETE CASCADE,
    nominal_at timestamptz NOT NULL,
    outcome text NOT NULL,
    origin text NOT NULL,
    job_id bigint REFERENCES duetime_jobs (id) ON DELETE SET NULL,
    detail text NOT NULL DEFAULT '',
    recorded_at timestamptz NOT NULL,
    UNIQUE (schedule_id, nominal_at, outcome, origin)
);

CREATE INDEX duetime_ticks_history ON duetime_ticks (schedule_id, nominal_at);
