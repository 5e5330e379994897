-- Tokens that expire, and the dashboard's server-side sessions (SQLite).
-- a token is refused from expires_at on (NULL: never)
ALTER TABLE duetime_tokens ADD COLUMN expires_at INTEGER;

-- A logged-in dashboard browser: its cookie holds a random session id, stored here hashed.
-- Logging out deletes the row; a session ends with its token (revoked or expired) too.
CREATE TABLE duetime_sessions (
    secret_hash TEXT PRIMARY KEY,  -- sha256 of the session id; the id itself is never stored
    token_id INTEGER NOT NULL REFERENCES duetime_tokens (id) ON DELETE CASCADE,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE INDEX duetime_sessions_expires ON duetime_sessions (expires_at);
