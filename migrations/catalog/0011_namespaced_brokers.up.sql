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
    class_ref     constant text := 'servicecatalog.k8s.io/spec.clusterServiceClassRef.name';
    plan_ref      constant text := 'servicecatalog.k8s.io/spec.clusterServicePlanRef.name';
    ns_class_ref  constant text := 'servicecatalog.k8s.io/spec.serviceClassRef.name';
    ns_plan_ref   constant text := 'servicecatalog.k8s.io/spec.servicePlanRef.name';
    ext_id        constant text := 'servicecatalog.k8s.io/spec.externalID';
    ext_name      constant text := 'servicecatalog.k8s.io/spec.externalName';
    broker        constant text := 'servicecatalog.k8s.io/spec.clusterServiceBrokerName';
    ns_broker     constant text := 'servicecatalog.k8s.io/spec.serviceBrokerName';
    managed text[];
    derived jsonb := '{}';
BEGIN
    IF TG_TABLE_NAME = 'instances' THEN
        -- The class reference's once it is resolved, the plan's once both are.
        managed := ARRAY[class_ref, plan_ref, ns_class_ref, ns_plan_ref];
        IF NEW.spec->'clusterServiceClassRef'->>'name' IS NOT NULL THEN
            derived := jsonb_build_object(class_ref, catalog.spec_label_value(NEW.spec->'clusterServiceClassRef'->>'name'));
            IF NEW.spec->'clusterServicePlanRef'->>'name' IS NOT NULL THEN
                derived := derived || jsonb_build_object(plan_ref, catalog.spec_label_value(NEW.spec->'clusterServicePlanRef'->>'name'));
            END IF;
        ELSIF NEW.spec->'serviceClassRef'->>'name' IS NOT NULL THEN
            derived := jsonb_build_object(ns_class_ref, catalog.spec_label_value(NEW.spec->'serviceClassRef'->>'name'));
            IF NEW.spec->'servicePlanRef'->>'name' IS NOT NULL THEN
                derived := derived || jsonb_build_object(ns_plan_ref, catalog.spec_label_value(NEW.spec->'servicePlanRef'->>'name'));
            END IF;
        END IF;
    ELSIF NEW.namespace = '' THEN
        managed := ARRAY[ext_id, ext_name, broker];
        derived := jsonb_build_object(
            ext_id, catalog.spec_label_value(coalesce(NEW.spec->>'externalID', '')),
            ext_name, catalog.spec_label_value(coalesce(NEW.spec->>'externalName', '')),
            broker, catalog.spec_label_value(coalesce(NEW.spec->>'clusterServiceBrokerName', '')));
        IF TG_TABLE_NAME = 'service_plans' THEN
            managed := managed || class_ref;
            derived := derived || jsonb_build_object(class_ref,
                catalog.spec_label_value(coalesce(NEW.spec->'clusterServiceClassRef'->>'name', '')));
        END IF;
    ELSE
        managed := ARRAY[ext_id, ext_name, ns_broker];
        derived := jsonb_build_object(
            ext_id, catalog.spec_label_value(coalesce(NEW.spec->>'externalID', '')),
            ext_name, catalog.spec_label_value(coalesce(NEW.spec->>'externalName', '')),
            ns_broker, catalog.spec_label_value(coalesce(NEW.spec->>'serviceBrokerName', '')));
        IF TG_TABLE_NAME = 'service_plans' THEN
            managed := managed || ns_class_ref;
            derived := derived || jsonb_build_object(ns_class_ref,
                catalog.spec_label_value(coalesce(NEW.spec->'serviceClassRef'->>'name', '')));
        END IF;
    END IF;
    NEW.metadata := jsonb_set(coalesce(NEW.metadata, '{}'), '{labels}',
        (coalesce(NEW.metadata->'labels', '{}') - managed) || derived);
    RETURN NEW;
END
$$;
