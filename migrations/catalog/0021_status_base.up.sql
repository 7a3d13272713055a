-- The engine writes an object's status from the copy it read at the start
-- of its reconcile, when the row has not changed since: a write then needs
-- no read of its own. These lock the row, as the read did, and refuse the
-- write (SQLSTATE BDS01, the transaction aborted) when the row's
-- resourceVersion is no longer the one the copy has; the engine then
-- writes as before, from a fresh read.
CREATE FUNCTION catalog.lock_instance_at(obj uuid, rv bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM FROM catalog.instances WHERE id = obj AND resource_version = rv FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'instance % is no longer at revision %', obj, rv USING ERRCODE = 'BDS01';
    END IF;
END
$$;

CREATE FUNCTION catalog.lock_binding_at(obj uuid, rv bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM FROM catalog.bindings WHERE id = obj AND resource_version = rv FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'binding % is no longer at revision %', obj, rv USING ERRCODE = 'BDS01';
    END IF;
END
$$;
