-- Classes and plans are looked up by their external names: an instance's
-- spec names them so (clusterServiceClassExternalName and its five
-- twins), svcat and the marketplace find them so, and a quota names its
-- plans so. Without these, each lookup read every class or plan of the
-- catalogue (about 50 ms at 100,000 plans). Both tables are small next to
-- the objects' and written only by relists, so the indexes are built in
-- the migration's transaction.
CREATE INDEX service_classes_external_name_idx ON catalog.service_classes (namespace, external_name);
CREATE INDEX service_plans_external_name_idx ON catalog.service_plans (namespace, external_name);
