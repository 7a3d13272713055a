-- What a broker's stored classes and plans were made from: the SHA-256 of
-- the catalogue document and the broker's generation when it was stored,
-- and the validators (ETag, Last-Modified) the broker sent with it. A
-- relist whose document is the same, or that the broker answers 304 Not
-- Modified, leaves the rows as they are (catalog/relist.go). They hold
-- while catalogue_stored_at is the status's lastCatalogRetrievalTime: a
-- release before this one that stored a catalogue since (during a rolling
-- upgrade) moved that time and left these columns, which then no longer
-- apply. NULL until the next relist stores a catalogue.
ALTER TABLE catalog.brokers
    ADD COLUMN catalogue_digest bytea,
    ADD COLUMN catalogue_generation bigint,
    ADD COLUMN catalogue_etag text,
    ADD COLUMN catalogue_last_modified text,
    ADD COLUMN catalogue_stored_at text;
