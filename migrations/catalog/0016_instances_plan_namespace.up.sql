-- A namespace's instances of one plan, counted when a quota limits them
-- (catalog.admit_instance, migration 0015). Built without blocking writes,
-- so a release that still runs goes on creating instances meanwhile: this
-- file must stay one statement (PostgreSQL builds an index concurrently
-- outside a transaction only).
CREATE INDEX CONCURRENTLY IF NOT EXISTS instances_namespace_plan_idx ON catalog.instances (namespace, plan_id);
