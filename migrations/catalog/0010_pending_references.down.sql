-- A binding whose instance does not exist cannot be kept once instance_id
-- is required again. Such a binding was never bound at a broker (there is
-- no instance to bind) and has no credentials: it is deleted, as the table
-- of a reverted migration is dropped.
DELETE FROM catalog.bindings WHERE instance_id IS NULL;
DROP INDEX catalog.instances_unresolved_idx;
DROP INDEX catalog.bindings_awaiting_instance_idx;
ALTER TABLE catalog.bindings ALTER COLUMN instance_id SET NOT NULL;
