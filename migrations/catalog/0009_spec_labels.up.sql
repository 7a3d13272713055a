-- Service Catalog's labels on classes, plans and instances: the SHA-224
-- (hex) of a spec field under servicecatalog.k8s.io/spec.<field>, as its
-- admission webhooks set them, so that label selectors (svcat's among
-- them) find the objects by those fields, through the labels' GIN index.
-- A trigger derives them from the spec on every write of the spec or the
-- metadata, whichever code writes it, over any value a client gave them;
-- catalog.setSpecLabels does the same for the objects a write returns.

CREATE FUNCTION catalog.spec_label_value(v text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT
    AS $$ SELECT encode(sha224(convert_to(v, 'UTF8')), 'hex') $$;

CREATE FUNCTION catalog.spec_labels() RETURNS trigger LANGUAGE plpgsql AS $$
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
        -- The class reference's once it is resolved, the plan's once both are.
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

CREATE TRIGGER instances_spec_labels BEFORE INSERT OR UPDATE OF spec, metadata ON catalog.instances
    FOR EACH ROW EXECUTE FUNCTION catalog.spec_labels();
CREATE TRIGGER service_classes_spec_labels BEFORE INSERT OR UPDATE OF spec, metadata ON catalog.service_classes
    FOR EACH ROW EXECUTE FUNCTION catalog.spec_labels();
CREATE TRIGGER service_plans_spec_labels BEFORE INSERT OR UPDATE OF spec, metadata ON catalog.service_plans
    FOR EACH ROW EXECUTE FUNCTION catalog.spec_labels();

-- The objects there already.
UPDATE catalog.instances SET metadata = metadata;
UPDATE catalog.service_classes SET metadata = metadata;
UPDATE catalog.service_plans SET metadata = metadata;
