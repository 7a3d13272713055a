DROP FUNCTION catalog.admit_binding(text);
DROP FUNCTION catalog.admit_instance(text, uuid, boolean, boolean, uuid);
DROP FUNCTION catalog.plan_visible(jsonb, text[]);
DROP TABLE catalog.resource_quotas;
DROP TABLE catalog.quota_plans;
DROP TABLE catalog.quotas;
