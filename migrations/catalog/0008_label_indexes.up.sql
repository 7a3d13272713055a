-- Label selectors are answered in SQL: a GIN index on each kind's labels
-- serves containment (key = value, key in (...)) and key existence.
CREATE INDEX instances_labels_idx ON catalog.instances USING gin ((metadata->'labels'));
CREATE INDEX bindings_labels_idx ON catalog.bindings USING gin ((metadata->'labels'));
CREATE INDEX service_classes_labels_idx ON catalog.service_classes USING gin ((metadata->'labels'));
CREATE INDEX service_plans_labels_idx ON catalog.service_plans USING gin ((metadata->'labels'));
CREATE INDEX brokers_labels_idx ON catalog.brokers USING gin ((metadata->'labels'));
