DROP TRIGGER service_plans_catalogue_version_truncate ON catalog.service_plans;
DROP TRIGGER service_plans_catalogue_version_delete ON catalog.service_plans;
DROP TRIGGER service_plans_catalogue_version_update ON catalog.service_plans;
DROP TRIGGER service_plans_catalogue_version_insert ON catalog.service_plans;
DROP TRIGGER service_classes_catalogue_version_truncate ON catalog.service_classes;
DROP TRIGGER service_classes_catalogue_version_delete ON catalog.service_classes;
DROP TRIGGER service_classes_catalogue_version_update ON catalog.service_classes;
DROP TRIGGER service_classes_catalogue_version_insert ON catalog.service_classes;
DROP FUNCTION catalog.bump_catalogue_version_if_written();

CREATE TRIGGER service_classes_catalogue_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON catalog.service_classes FOR EACH STATEMENT EXECUTE FUNCTION catalog.bump_catalogue_version();
CREATE TRIGGER service_plans_catalogue_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON catalog.service_plans FOR EACH STATEMENT EXECUTE FUNCTION catalog.bump_catalogue_version();
