-- Namespaced brokers go, and with them their classes and plans; instances
-- of their plans stay, their plan no longer found (as when a broker is
-- deleted). The trigger is migration 0009's again.
UPDATE catalog.instances SET plan_id = NULL, class_id = NULL
    WHERE plan_id IN (SELECT id FROM catalog.service_plans WHERE namespace <> '');
DELETE FROM catalog.brokers WHERE namespace <> '';

ALTER TABLE catalog.service_plans DROP CONSTRAINT service_plans_namespace_name_key;
ALTER TABLE catalog.service_plans ADD CONSTRAINT service_plans_name_key UNIQUE (name);
ALTER TABLE catalog.service_classes DROP CONSTRAINT service_classes_namespace_name_key;
ALTER TABLE catalog.service_classes ADD CONSTRAINT service_classes_name_key UNIQUE (name);
ALTER TABLE catalog.brokers DROP CONSTRAINT brokers_namespace_name_key;
ALTER TABLE catalog.brokers ADD CONSTRAINT brokers_name_key UNIQUE (name);

ALTER TABLE catalog.service_plans DROP COLUMN namespace;
ALTER TABLE catalog.service_classes DROP COLUMN namespace;
ALTER TABLE catalog.brokers DROP COLUMN namespace;

CREATE OR REPLACE FUNCTION catalog.spec_labels() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    class_ref constant text := 'servicecatalog.k8s.io/spec.clusterServiceClassRef.name';
    plan_ref  constant text := 'servicecatalog.k8s.io/spec.clusterServicePlanRef.name';
    ext_id    constant text := 'servicecatalog.k8s.io/spec.externalID';
    ext_name  constant text := 'servicecatalog.k8s.io/spec.externalName';
    broker    constant text := 'servicecatalog.k8s.io/spec.clusterServiceBrokerName';
    managed text[];
    derived jsonb := '{}';
BEGIN
    IF TG_TABLE_NAME = 'instances' THEN
        managed := ARRAY[class_ref, plan_ref];
        IF NEW.spec->'clusterServiceClassRef'->>'name' IS NOT NULL THEN
            derived := jsonb_build_object(class_ref, catalog.spec_label_value(NEW.spec->'clusterServiceClassRef'->>'name'));
            IF NEW.spec->'clusterServicePlanRef'->>'name' IS NOT NULL THEN
                derived := derived || jsonb_build_object(plan_ref, catalog.spec_label_value(NEW.spec->'clusterServicePlanRef'->>'name'));
            END IF;
        END IF;
    ELSE
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
    END IF;
    NEW.metadata := jsonb_set(coalesce(NEW.metadata, '{}'), '{labels}',
        (coalesce(NEW.metadata->'labels', '{}') - managed) || derived);
    RETURN NEW;
END
$$;
