DROP INDEX catalog.instances_labels_idx;
DROP INDEX catalog.bindings_labels_idx;
DROP INDEX catalog.service_classes_labels_idx;
DROP INDEX catalog.service_plans_labels_idx;
DROP INDEX catalog.brokers_labels_idx;
