DROP TRIGGER instances_spec_labels ON catalog.instances;
CREATE TRIGGER instances_spec_labels BEFORE INSERT OR UPDATE OF spec, metadata ON catalog.instances
    FOR EACH ROW EXECUTE FUNCTION catalog.spec_labels();
DROP FUNCTION catalog.instance_spec_labels();
