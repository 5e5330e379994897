-- Node clocks (SQLite): how far each node's clock was ahead of the database's (seconds); every
-- node of an SQLite database runs on its machine, so this is 0 when measured; NULL: not
-- measured (an injected clock, or a version that did not say).
ALTER TABLE duetime_nodes ADD COLUMN clock_offset_seconds REAL;
