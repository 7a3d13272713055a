-- A known value sealed with the encryption key the catalog's data is sealed
-- with: a process started with other keys finds it cannot open it and
-- refuses to start, instead of sealing new values with a key that cannot
-- read the old ones.
CREATE TABLE catalog.key_canary (
    id         int PRIMARY KEY CHECK (id = 1),
    sealed     bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
