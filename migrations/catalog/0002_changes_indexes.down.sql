DROP INDEX catalog.changes_created_idx;
DROP INDEX catalog.changes_object_idx;
