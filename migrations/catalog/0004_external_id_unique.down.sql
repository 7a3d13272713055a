DROP INDEX catalog.bindings_external_id_key;
DROP INDEX catalog.instances_external_id_key;
