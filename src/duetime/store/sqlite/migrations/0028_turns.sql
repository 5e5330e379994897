-- Turns (SQLite): a duty that one pass at a time serves the whole fleet (the reaper) runs
-- where its last pass, by any process, is old enough; each duty's row says when that was
-- (microseconds since the epoch, by this machine's clock) and which node ran it
-- (store/sql/registry.py, take_turn).
CREATE TABLE duetime_turns (
    duty TEXT PRIMARY KEY,
    passed_at INTEGER NOT NULL,
    holder TEXT NOT NULL
);
