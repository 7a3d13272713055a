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

-- A write takes its revision with this function: from the sequence, and
-- with an advisory lock (namespace 1650749049, the revision modulo 2^32)
-- held until it commits, so that a reader that sees the write among the
-- holders of catalog.revision also sees which revision it holds.
CREATE FUNCTION catalog.take_revision() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    rev bigint := nextval('catalog.revisions');
BEGIN
    PERFORM pg_advisory_xact_lock_shared(1650749049, (rev % 4294967296 - 2147483648)::int);
    RETURN rev;
END
$$;
