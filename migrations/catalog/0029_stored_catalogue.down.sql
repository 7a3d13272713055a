ALTER TABLE catalog.brokers
    DROP COLUMN catalogue_digest,
    DROP COLUMN catalogue_generation,
    DROP COLUMN catalogue_etag,
    DROP COLUMN catalogue_last_modified,
    DROP COLUMN catalogue_stored_at;
