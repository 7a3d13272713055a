DROP FUNCTION catalog.take_revision();
UPDATE catalog.revision SET value = (SELECT last_value FROM catalog.revisions);
DROP SEQUENCE catalog.revisions;
