-- Namespaced brokers, as Service Catalog served them: a ServiceBroker in a
-- namespace, whose ServiceClasses and ServicePlans only that namespace
-- sees. They share the tables of their cluster-scoped twins; the namespace
-- column is '' for a ClusterServiceBroker and its classes and plans. Names
-- are unique within a namespace, and the cluster is one more of them.
ALTER TABLE catalog.brokers ADD COLUMN namespace text NOT NULL DEFAULT '';
ALTER TABLE catalog.service_classes ADD COLUMN namespace text NOT NULL DEFAULT '';
ALTER TABLE catalog.service_plans ADD COLUMN namespace text NOT NULL DEFAULT '';

ALTER TABLE catalog.brokers DROP CONSTRAINT brokers_name_key;
ALTER TABLE catalog.brokers ADD CONSTRAINT brokers_namespace_name_key UNIQUE (namespace, name);
ALTER TABLE catalog.service_classes DROP CONSTRAINT service_classes_name_key;
ALTER TABLE catalog.service_classes ADD CONSTRAINT service_classes_namespace_name_key UNIQUE (namespace, name);
ALTER TABLE catalog.service_plans DROP CONSTRAINT service_plans_name_key;
ALTER TABLE catalog.service_plans ADD CONSTRAINT service_plans_namespace_name_key UNIQUE (namespace, name);

-- Service Catalog's labels on the namespaced kinds name the namespaced
-- fields: spec.serviceBrokerName on classes and plans,
-- spec.serviceClassRef.name on plans, and spec.serviceClassRef.name and
-- spec.servicePlanRef.name on instances of a namespaced plan.
CREATE OR REPLACE FUNCTION catalog.spec_labels() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ext_id   constant text := 'servicecatalog.k8s.io/spec.externalID';
    ext_name constant text := 'servicecatalog.k8s.io/spec.externalName';
    -- The spec fields (cluster-scoped, namespaced) the labels name.
    brokers  constant text[] := ARRAY['clusterServiceBrokerName', 'serviceBrokerName'];
    classes  constant text[] := ARRAY['clusterServiceClassRef', 'serviceClassRef'];
    plans    constant text[] := ARRAY['clusterServicePlanRef', 'servicePlanRef'];
    -- Which of each pair this row uses: 1 for the cluster's, 2 for a namespace's.
    scope int;
    managed text[];
    derived jsonb := '{}';
BEGIN
    IF TG_TABLE_NAME = 'instances' THEN
        -- The class reference's once it is resolved, the plan's once both
        -- are; an instance's references are the cluster's or its
        -- namespace's.
        managed := ARRAY['servicecatalog.k8s.io/spec.' || classes[1] || '.name', 'servicecatalog.k8s.io/spec.' || plans[1] || '.name',
                         'servicecatalog.k8s.io/spec.' || classes[2] || '.name', 'servicecatalog.k8s.io/spec.' || plans[2] || '.name'];
        scope := CASE WHEN NEW.spec->classes[2]->>'name' IS NOT NULL THEN 2 ELSE 1 END;
        IF NEW.spec->classes[scope]->>'name' IS NOT NULL THEN
            derived := jsonb_build_object('servicecatalog.k8s.io/spec.' || classes[scope] || '.name',
                catalog.spec_label_value(NEW.spec->classes[scope]->>'name'));
            IF NEW.spec->plans[scope]->>'name' IS NOT NULL THEN
                derived := derived || jsonb_build_object('servicecatalog.k8s.io/spec.' || plans[scope] || '.name',
                    catalog.spec_label_value(NEW.spec->plans[scope]->>'name'));
            END IF;
        END IF;
    ELSE
        scope := CASE WHEN NEW.namespace = '' THEN 1 ELSE 2 END;
        managed := ARRAY[ext_id, ext_name, 'servicecatalog.k8s.io/spec.' || brokers[scope]];
        derived := jsonb_build_object(
            ext_id, catalog.spec_label_value(coalesce(NEW.spec->>'externalID', '')),
            ext_name, catalog.spec_label_value(coalesce(NEW.spec->>'externalName', '')),
            'servicecatalog.k8s.io/spec.' || brokers[scope], catalog.spec_label_value(coalesce(NEW.spec->>brokers[scope], '')));
        IF TG_TABLE_NAME = 'service_plans' THEN
            managed := managed || ('servicecatalog.k8s.io/spec.' || classes[scope] || '.name');
            derived := derived || jsonb_build_object('servicecatalog.k8s.io/spec.' || classes[scope] || '.name',
                catalog.spec_label_value(coalesce(NEW.spec->classes[scope]->>'name', '')));
        END IF;
    END IF;
    NEW.metadata := jsonb_set(coalesce(NEW.metadata, '{}'), '{labels}',
        (coalesce(NEW.metadata->'labels', '{}') - managed) || derived);
    RETURN NEW;
END
$$;
