-- A binding whose instance does not exist cannot be kept once instance_id
-- is required again: the migration stops, naming the first such binding,
-- until it is deleted (nothing was bound at a broker for it) or its
-- instance is created.
DO $$
DECLARE
    b record;
BEGIN
    SELECT namespace, name INTO b FROM catalog.bindings WHERE instance_id IS NULL LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'binding %/% names an instance that does not exist: delete it or create the instance, then migrate down again', b.namespace, b.name;
    END IF;
END
$$;
DROP INDEX catalog.instances_unresolved_idx;
DROP INDEX catalog.bindings_awaiting_instance_idx;
ALTER TABLE catalog.bindings ALTER COLUMN instance_id SET NOT NULL;
