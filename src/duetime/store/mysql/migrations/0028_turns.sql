-- Turns (MariaDB / MySQL): a duty that one pass at a time serves the whole fleet (the reaper)
-- runs where its last pass, by any node, is old enough; each duty's row says when that was,
-- by the database's clock (UTC), and which node ran it (store/sql/registry.py, take_turn).
CREATE TABLE duetime_turns (
    duty VARCHAR(100) NOT NULL PRIMARY KEY,
    passed_at DATETIME(6) NOT NULL,
    holder VARCHAR(400) NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
