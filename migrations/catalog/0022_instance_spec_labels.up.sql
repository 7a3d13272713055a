-- An instance's Service Catalog labels (migrations 0009 and 0011) from a
-- trigger of its own: one expression, the labels' SHA-224 computed in it,
-- where catalog.spec_labels runs a dozen PL/pgSQL statements for any kind
-- and calls catalog.spec_label_value, an SQL function run as a query of
-- its own, for each label. Every instance's creation pays for it. The
-- labels are the same: the class reference's once it is resolved, the
-- plan's once both are, of the namespace's references when the instance
-- has them and the cluster's otherwise, over any value a client gave them.
CREATE FUNCTION catalog.instance_spec_labels() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.metadata := jsonb_set(coalesce(NEW.metadata, '{}'), '{labels}',
        (coalesce(NEW.metadata->'labels', '{}') - ARRAY[
            'servicecatalog.k8s.io/spec.clusterServiceClassRef.name', 'servicecatalog.k8s.io/spec.clusterServicePlanRef.name',
            'servicecatalog.k8s.io/spec.serviceClassRef.name', 'servicecatalog.k8s.io/spec.servicePlanRef.name'])
        || CASE
            WHEN NEW.spec->'serviceClassRef'->>'name' IS NOT NULL THEN
                jsonb_build_object('servicecatalog.k8s.io/spec.serviceClassRef.name',
                    encode(sha224(convert_to(NEW.spec->'serviceClassRef'->>'name', 'UTF8')), 'hex'))
                || CASE WHEN NEW.spec->'servicePlanRef'->>'name' IS NOT NULL THEN
                    jsonb_build_object('servicecatalog.k8s.io/spec.servicePlanRef.name',
                        encode(sha224(convert_to(NEW.spec->'servicePlanRef'->>'name', 'UTF8')), 'hex'))
                    ELSE '{}' END
            WHEN NEW.spec->'clusterServiceClassRef'->>'name' IS NOT NULL THEN
                jsonb_build_object('servicecatalog.k8s.io/spec.clusterServiceClassRef.name',
                    encode(sha224(convert_to(NEW.spec->'clusterServiceClassRef'->>'name', 'UTF8')), 'hex'))
                || CASE WHEN NEW.spec->'clusterServicePlanRef'->>'name' IS NOT NULL THEN
                    jsonb_build_object('servicecatalog.k8s.io/spec.clusterServicePlanRef.name',
                        encode(sha224(convert_to(NEW.spec->'clusterServicePlanRef'->>'name', 'UTF8')), 'hex'))
                    ELSE '{}' END
            ELSE '{}'
        END);
    RETURN NEW;
END
$$;

DROP TRIGGER instances_spec_labels ON catalog.instances;
CREATE TRIGGER instances_spec_labels BEFORE INSERT OR UPDATE OF spec, metadata ON catalog.instances
    FOR EACH ROW EXECUTE FUNCTION catalog.instance_spec_labels();
