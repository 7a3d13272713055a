-- How a broker's catalogue fetches ended, counted since the broker was
-- registered (or since this migration): the catalogue stored, the same
-- catalogue left as it was (relists_unchanged, relists_not_modified when
-- the broker answered 304 Not Modified), or the fetch failed. Each is
-- counted by the statement that records the fetch in the broker's status,
-- whichever replica made it; /metrics reads them (catalog.RelistCounts).
--
-- catalogue_format is the version of how this release turns a catalogue
-- into rows (catalog/relist.go, catalogueFormat): rows stored by a release
-- that made them otherwise are written again by the next relist, even of
-- the same document. NULL until then.
--
-- catalogue_last_modified (0029) is no longer read, and this release
-- writes NULL to it: If-Modified-Since keeps a catalogue rolled back to an
-- older date as it was (internal/osb, Fetched). A release after the ones
-- that write it drops it.
ALTER TABLE catalog.brokers
    ADD COLUMN relists_stored bigint NOT NULL DEFAULT 0,
    ADD COLUMN relists_unchanged bigint NOT NULL DEFAULT 0,
    ADD COLUMN relists_not_modified bigint NOT NULL DEFAULT 0,
    ADD COLUMN relists_failed bigint NOT NULL DEFAULT 0,
    ADD COLUMN catalogue_format integer;
