-- Identical history entries of an object are folded into one, with how
-- many times and when last, as Kubernetes folds repeated Events: a broker
-- failing for hours adds one row, not thousands. created_at stays the time
-- of the first.
ALTER TABLE catalog.events
    ADD COLUMN count integer NOT NULL DEFAULT 1,
    ADD COLUMN last_time timestamptz;
UPDATE catalog.events SET last_time = created_at;
ALTER TABLE catalog.events
    ALTER COLUMN last_time SET NOT NULL,
    ALTER COLUMN last_time SET DEFAULT now();
