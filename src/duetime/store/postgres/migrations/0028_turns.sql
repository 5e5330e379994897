-- Turns (PostgreSQL): a duty that one pass at a time serves the whole fleet (the reaper) runs
-- where its last pass, by any node, is old enough; each duty's row says when that was, by
-- the database's clock, and which node ran it (store/sql/registry.py, take_turn).
CREATE TABLE duetime_turns (
    duty text PRIMARY KEY,
    passed_at timestamptz NOT NULL,
    holder text NOT NULL
);
