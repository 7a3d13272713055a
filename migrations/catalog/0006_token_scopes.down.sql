DROP INDEX catalog.api_tokens_name_key;
ALTER TABLE catalog.api_tokens DROP COLUMN expires_at, DROP COLUMN namespaces, DROP COLUMN name;
