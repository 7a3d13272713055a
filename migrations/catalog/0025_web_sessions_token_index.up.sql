-- A token's sessions are found by the token: a sign-in keeps the newest
-- MaxSessionsPerToken of them and drops the rest, and revoking a token
-- deletes its sessions (the foreign key's cascade). Without this index
-- both read every session of every token. The table is small (at most a
-- few dozen rows per token, each gone within a day), so the index is
-- built in the migration's transaction.
CREATE INDEX web_sessions_token_idx ON catalog.web_sessions (token_hash, created_at DESC);
