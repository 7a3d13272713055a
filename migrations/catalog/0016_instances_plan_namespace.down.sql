DROP INDEX CONCURRENTLY IF EXISTS catalog.instances_namespace_plan_idx;
