-- Revisions come from a sequence, which a write takes in its last round
-- trip, rather than from the one row every write locked in turn (and held
-- through its commit's WAL flush): writes commit side by side, and
-- PostgreSQL flushes their commits together.
--
-- The row's table stays, as a lock: a write takes it in ROW EXCLUSIVE mode
-- before it takes its revision, and holds it until it commits. So a reader
-- of the change feed knows which revisions may still be in flight (those
-- of the lock's holders), and a list can wait for a moment when none is
-- (SHARE mode) to read a snapshot that holds every revision up to the
-- sequence's and none after it (catalog/revision.go). The row's value is
-- no longer kept up to date.
CREATE SEQUENCE catalog.revisions AS bigint MINVALUE 0;
SELECT setval('catalog.revisions', value, true) FROM catalog.revision;
