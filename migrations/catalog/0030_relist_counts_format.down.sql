ALTER TABLE catalog.brokers
    DROP COLUMN relists_stored,
    DROP COLUMN relists_unchanged,
    DROP COLUMN relists_not_modified,
    DROP COLUMN relists_failed,
    DROP COLUMN catalogue_format;
