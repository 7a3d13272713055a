-- OSB ids are global to a broker: two instances (or two bindings) with the
-- same spec.externalID would share one broker-side resource, and deleting
-- either would take it from both. An existing database that already holds
-- such duplicates stops here with PostgreSQL naming the duplicated key; give
-- one of each pair a new externalID (or delete it) and migrate again.
CREATE UNIQUE INDEX instances_external_id_key ON catalog.instances ((spec->>'externalID'));
CREATE UNIQUE INDEX bindings_external_id_key ON catalog.bindings ((spec->>'externalID'));
