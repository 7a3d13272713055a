-- Objects may name what does not exist yet, as in Kubernetes: a binding
-- whose instance is not created yet has no instance_id until it is; an
-- instance whose class or plan no broker offers yet has no plan_id until
-- a catalogue offers it. The engine finds both kinds by these indexes when
-- instances and catalogues change.
ALTER TABLE catalog.bindings ALTER COLUMN instance_id DROP NOT NULL;
CREATE INDEX bindings_awaiting_instance_idx ON catalog.bindings (namespace, (spec->'instanceRef'->>'name'))
    WHERE instance_id IS NULL;
CREATE INDEX instances_unresolved_idx ON catalog.instances (id) WHERE plan_id IS NULL;
