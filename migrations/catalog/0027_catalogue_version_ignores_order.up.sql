-- The catalogue's version (0012, 0026) no longer moves for an update that
-- changed only rows' position in their broker's catalogue or the broker's
-- own document of them (osb): nothing a creation resolves reads either
-- (a plan is chosen for an instance that names none only when its class
-- has one). A broker that sends its services or plans in another order at
-- each fetch, as one built on an unordered map does, moved it at each
-- relist, and made the next creation of every namespace twice. Every
-- other column still counts, those a later migration adds too.
CREATE FUNCTION catalog.bump_catalogue_version_if_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('bindery.catalogue_bumped', true) IS DISTINCT FROM 'on' AND EXISTS (
        SELECT FROM written_new n JOIN written_old o ON o.id = n.id
        WHERE jsonb_populate_record(o, jsonb_build_object('position', n.position, 'osb', n.osb)) IS DISTINCT FROM n
    ) THEN
        UPDATE catalog.catalogue_version SET value = value + 1;
        PERFORM set_config('bindery.catalogue_bumped', 'on', true);
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER service_classes_catalogue_version_update ON catalog.service_classes;
DROP TRIGGER service_plans_catalogue_version_update ON catalog.service_plans;

CREATE TRIGGER service_classes_catalogue_version_update AFTER UPDATE ON catalog.service_classes
    REFERENCING OLD TABLE AS written_old NEW TABLE AS written_new
    FOR EACH STATEMENT EXECUTE FUNCTION catalog.bump_catalogue_version_if_changed();
CREATE TRIGGER service_plans_catalogue_version_update AFTER UPDATE ON catalog.service_plans
    REFERENCING OLD TABLE AS written_old NEW TABLE AS written_new
    FOR EACH STATEMENT EXECUTE FUNCTION catalog.bump_catalogue_version_if_changed();
