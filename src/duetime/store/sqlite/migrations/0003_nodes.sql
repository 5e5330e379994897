-- Nodes (SQLite): every worker process registers itself and heartbeats its row.
CREATE TABLE duetime_nodes (
    id TEXT PRIMARY KEY,  -- the worker id: host:pid:random, also on the attempts it runs
    hostname TEXT NOT NULL,
    pid INTEGER NOT NULL,
    queues TEXT,  -- JSON list, or NULL for every queue
    concurrency INTEGER NOT NULL,
    duties TEXT NOT NULL,  -- JSON list of the duties it runs
    version TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL,
    stopped_at INTEGER
);
CREATE INDEX duetime_nodes_seen ON duetime_nodes (last_seen_at);
