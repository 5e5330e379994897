-- Tokens that expire, and the dashboard's server-side sessions (MariaDB / MySQL).
-- a token is refused from expires_at on (NULL: never)
ALTER TABLE duetime_tokens ADD COLUMN expires_at DATETIME(6) NULL;

-- A logged-in dashboard browser: its cookie holds a random session id, stored here hashed.
-- Logging out deletes the row; a session ends with its token (revoked or expired) too.
CREATE TABLE duetime_sessions (
    secret_hash VARCHAR(128) NOT NULL PRIMARY KEY,  -- sha256 of the session id, never the id
    token_id BIGINT NOT NULL,
    created_at DATETIME(6) NOT NULL,
    expires_at DATETIME(6) NOT NULL,
    KEY duetime_sessions_expires (expires_at),
    CONSTRAINT duetime_sessions_token FOREIGN KEY (token_id)
        REFERENCES duetime_tokens (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
