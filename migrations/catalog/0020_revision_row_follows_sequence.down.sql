DROP TRIGGER revision_from_sequence ON catalog.revision;
DROP FUNCTION catalog.revision_from_sequence();
