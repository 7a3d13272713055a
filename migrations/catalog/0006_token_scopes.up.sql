-- API tokens get a name (to list and revoke them by), an optional expiry,
-- and an optional list of namespaces they are limited to (NULL: all).
ALTER TABLE catalog.api_tokens
    ADD COLUMN name text NOT NULL DEFAULT '',
    ADD COLUMN namespaces text[],
    ADD COLUMN expires_at timestamptz;
CREATE UNIQUE INDEX api_tokens_name_key ON catalog.api_tokens (name) WHERE name <> '';
