DROP TRIGGER service_plans_catalogue_version_update ON catalog.service_plans;
DROP TRIGGER service_classes_catalogue_version_update ON catalog.service_classes;
DROP FUNCTION catalog.bump_catalogue_version_if_changed();

CREATE TRIGGER service_classes_catalogue_version_update AFTER UPDATE ON catalog.service_classes
    REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION catalog.bump_catalogue_version_if_written();
CREATE TRIGGER service_plans_catalogue_version_update AFTER UPDATE ON catalog.service_plans
    REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION catalog.bump_catalogue_version_if_written();
