DROP FUNCTION catalog.lock_binding_at(uuid, bigint);
DROP FUNCTION catalog.lock_instance_at(uuid, bigint);
