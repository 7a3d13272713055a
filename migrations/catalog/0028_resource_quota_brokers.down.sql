DELETE FROM catalog.resource_quotas WHERE instances IS NULL AND bindings IS NULL;
ALTER TABLE catalog.resource_quotas DROP COLUMN brokers;
