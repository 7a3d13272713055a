-- Sessions of the web UI. A row is found by the SHA-256 of the session id
-- that the browser's cookie holds; the API token a session was opened with
-- is named by its hash only, and revoking the token ends its sessions.
CREATE TABLE catalog.web_sessions (
    hash       bytea PRIMARY KEY,
    token_hash bytea NOT NULL REFERENCES catalog.api_tokens (hash) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE INDEX web_sessions_expires_idx ON catalog.web_sessions (expires_at);
