DROP FUNCTION catalog.expect_catalogue_version(bigint);
DROP TRIGGER service_plans_catalogue_version ON catalog.service_plans;
DROP TRIGGER service_classes_catalogue_version ON catalog.service_classes;
DROP FUNCTION catalog.bump_catalogue_version();
DROP TABLE catalog.catalogue_version;
