-- Nodes (MariaDB / MySQL): every worker process registers itself and heartbeats its row.
CREATE TABLE duetime_nodes (
    id VARCHAR(400) NOT NULL PRIMARY KEY,  -- the worker id: host:pid:random
    hostname VARCHAR(255) NOT NULL,
    pid INT NOT NULL,
    queues JSON NULL,  -- a list, or NULL for every queue
    concurrency INT NOT NULL,
    duties JSON NOT NULL,
    version VARCHAR(50) NOT NULL,
    started_at DATETIME(6) NOT NULL,
    last_seen_at DATETIME(6) NOT NULL,
    stopped_at DATETIME(6) NULL,
    KEY duetime_nodes_seen (last_seen_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
