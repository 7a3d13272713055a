ALTER TABLE catalog.events DROP COLUMN last_time, DROP COLUMN count;
