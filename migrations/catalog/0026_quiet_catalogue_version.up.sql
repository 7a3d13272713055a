-- The catalogue's version (0012) moves only when a statement wrote a class
-- or plan row. 0012's triggers moved it for every statement on the two
-- tables, even one that matched no row: a broker relisted every second
-- with an unchanged catalogue moved it every second, and the creations of
-- every namespace, which check it, were each made twice. A statement
-- trigger sees the rows its statement wrote through a transition table,
-- which a trigger may have for one event only: one trigger per event
-- (and TRUNCATE, which has none, moves it as before). The version still
-- moves once per transaction.
CREATE FUNCTION catalog.bump_catalogue_version_if_written() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('bindery.catalogue_bumped', true) IS DISTINCT FROM 'on' AND EXISTS (SELECT FROM written) THEN
        UPDATE catalog.catalogue_version SET value = value + 1;
        PERFORM set_config('bindery.catalogue_bumped', 'on', true);
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER service_classes_catalogue_version ON catalog.service_classes;
DROP TRIGGER service_plans_catalogue_version ON catalog.service_plans;

CREATE TRIGGER service_classes_catalogue_version_insert AFTER INSERT ON catalog.service_classes
    REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION catalog.bump_catalogue_version_if_written();
CREATE TRIGGER service_classes_catalogue_version_update AFTER UPDATE ON catalog.service_classes
    REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION catalog.bump_catalogue_version_if_written();
CREATE TRIGGER service_classes_catalogue_version_delete AFTER DELETE ON catalog.service_classes
    REFERENCING OLD TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION catalog.bump_catalogue_version_if_written();
CREATE TRIGGER service_classes_catalogue_version_truncate AFTER TRUNCATE ON catalog.service_classes
    FOR EACH STATEMENT EXECUTE FUNCTION catalog.bump_catalogue_version();

CREATE TRIGGER service_plans_catalogue_version_insert AFTER INSERT ON catalog.service_plans
    REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION catalog.bump_catalogue_version_if_written();
CREATE TRIGGER service_plans_catalogue_version_update AFTER UPDATE ON catalog.service_plans
    REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION catalog.bump_catalogue_version_if_written();
CREATE TRIGGER service_plans_catalogue_version_delete AFTER DELETE ON catalog.service_plans
    REFERENCING OLD TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION catalog.bump_catalogue_version_if_written();
CREATE TRIGGER service_plans_catalogue_version_truncate AFTER TRUNCATE ON catalog.service_plans
    FOR EACH STATEMENT EXECUTE FUNCTION catalog.bump_catalogue_version();
