-- Nodes (PostgreSQL): every worker process registers itself and heartbeats its row.
CREATE TABLE duetime_nodes (
    id text PRIMARY KEY,  -- the worker id: host:pid:random, also on the attempts it runs
    hostname text NOT NULL,
    pid integer NOT NULL,
    queues jsonb,  -- a list, or NULL for every queue
    concurrency integer NOT NULL,
    duties jsonb NOT NULL,  -- the duties it runs
    version text NOT NULL,
    started_at timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL,
    stopped_at timestamptz
);
CREATE INDEX duetime_nodes_seen ON duetime_nodes (last_seen_at);
