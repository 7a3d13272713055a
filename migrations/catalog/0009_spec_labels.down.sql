DROP TRIGGER instances_spec_labels ON catalog.instances;
DROP TRIGGER service_classes_spec_labels ON catalog.service_classes;
DROP TRIGGER service_plans_spec_labels ON catalog.service_plans;
DROP FUNCTION catalog.spec_labels();
DROP FUNCTION catalog.spec_label_value(text);

-- Service Catalog's labels were derived, never given: they go.
UPDATE catalog.instances SET metadata = jsonb_set(metadata, '{labels}', (metadata->'labels')
    - ARRAY['servicecatalog.k8s.io/spec.clusterServiceClassRef.name', 'servicecatalog.k8s.io/spec.clusterServicePlanRef.name'])
    WHERE metadata ? 'labels';
UPDATE catalog.service_classes SET metadata = jsonb_set(metadata, '{labels}', (metadata->'labels')
    - ARRAY['servicecatalog.k8s.io/spec.externalID', 'servicecatalog.k8s.io/spec.externalName', 'servicecatalog.k8s.io/spec.clusterServiceBrokerName'])
    WHERE metadata ? 'labels';
UPDATE catalog.service_plans SET metadata = jsonb_set(metadata, '{labels}', (metadata->'labels')
    - ARRAY['servicecatalog.k8s.io/spec.externalID', 'servicecatalog.k8s.io/spec.externalName', 'servicecatalog.k8s.io/spec.clusterServiceBrokerName',
            'servicecatalog.k8s.io/spec.clusterServiceClassRef.name'])
    WHERE metadata ? 'labels';
