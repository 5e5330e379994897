-- Node clocks (MariaDB / MySQL): how far each node's clock was ahead of the database's
-- (seconds; negative: behind) when it last measured it; NULL: not measured (an injected clock,
-- or a version that did not say). Shown by `duetime nodes` and the dashboard (docs/workers.md).
ALTER TABLE duetime_nodes ADD COLUMN clock_offset_seconds DOUBLE NULL;
