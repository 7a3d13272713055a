-- How a broker's catalogue fetches ended, counted since the broker was
-- registered (or since this migration): the catalogue stored, the same
-- catalogue left as it was (relists_unchanged, relists_not_modified when
-- the broker answered 304 Not Modified), or the fetch failed. Each is
-- counted by the statement that records the fetch in the broker's status,
-- whichever replica made it; /metrics reads them (catalog.RelistCounts).
ALTER TABLE catalog.brokers
    ADD COLUMN relists_stored bigint NOT NULL DEFAULT 0,
    ADD COLUMN relists_unchanged bigint NOT NULL DEFAULT 0,
    ADD COLUMN relists_not_modified bigint NOT NULL DEFAULT 0,
    ADD COLUMN relists_failed bigint NOT NULL DEFAULT 0;
