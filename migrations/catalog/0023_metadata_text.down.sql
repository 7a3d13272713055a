ALTER TABLE catalog.brokers DROP COLUMN metadata_text;
ALTER TABLE catalog.service_classes DROP COLUMN metadata_text;
ALTER TABLE catalog.service_plans DROP COLUMN metadata_text;
ALTER TABLE catalog.instances DROP COLUMN metadata_text;
ALTER TABLE catalog.bindings DROP COLUMN metadata_text;
