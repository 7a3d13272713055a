-- The engine rewrites an instance's or a binding's status two or three
-- times soon after the row is inserted. With pages filled by the inserts,
-- a third to two fifths of those writes found no room on the row's page:
-- a new row version elsewhere, and an entry in every index (the labels'
-- GIN index among them). A quarter of each new page is left for them, so
-- that they are HOT updates, which touch no index.
ALTER TABLE catalog.instances SET (fillfactor = 75);
ALTER TABLE catalog.bindings SET (fillfactor = 75);
