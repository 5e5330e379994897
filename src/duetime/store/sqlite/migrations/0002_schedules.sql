-- Recurring schedules (SQLite). A schedule's definition is one JSON document (ScheduleSpec);
-- each tick it fires becomes an ordinary job identified by (schedule_id, nominal_at).
CREATE TABLE duetime_schedules (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant TEXT NOT NULL,
    name TEXT NOT NULL,
    spec TEXT NOT NULL CHECK (json_valid(spec) AND json_type(spec) = 'object'),
    definition_hash TEXT NOT NULL,
    paused INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
    anchor_at INTEGER NOT NULL,
    next_fire_at INTEGER,
    version INTEGER NOT NULL DEFAULT 1,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    UNIQUE (tenant, name)
);

CREATE INDEX duetime_schedules_due ON duetime_schedules (next_fire_at)
    WHERE paused = 0 AND next_fire_at IS NOT NULL;

ALTER TABLE duetime_jobs ADD COLUMN schedule_id INTEGER
    REFERENCES duetime_schedules (id) ON DELETE SET NULL;
ALTER TABLE duetime_jobs ADD COLUMN schedule_name TEXT;
ALTER TABLE duetime_jobs ADD COLUMN nominal_at INTEGER;
ALTER TABLE duetime_jobs ADD COLUMN covers TEXT;
ALTER TABLE duetime_jobs ADD COLUMN origin TEXT;

CREATE UNIQUE INDEX duetime_jobs_occurrence ON duetime_jobs (schedule_id, nominal_at)
    WHERE schedule_id IS NOT NULL;
CREATE INDEX duetime_jobs_occurrence_active ON duetime_jobs (schedule_id, nominal_at)
    WHERE schedule_id IS NOT NULL
      AND status IN ('scheduled', 'waiting', 'running', 'cancel_requested');

CREATE TABLE duetime_ticks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    schedule_id INTEGER NOT NULL REFERENCES duetime_schedules (id) ON DELETE CASCADE,
    nominal_at INTEGER NOT NULL,
    outcome TEXT NOT NULL,
    origin TEXT NOT NULL,
    job_id INTEGER REFERENCES duetime_jobs (id) ON DELETE SET NULL,
    detail TEXT NOT NULL DEFAULT '',
    recorded_at INTEGER NOT NULL,
    UNIQUE (schedule_id, nominal_at, outcome, origin)
);

CREATE INDEX duetime_ticks_history ON duetime_ticks (schedule_id, nominal_at);
