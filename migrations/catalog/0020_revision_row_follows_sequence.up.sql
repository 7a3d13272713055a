-- A previous release, still serving during a rollout, takes its revisions
-- by adding one to catalog.revision's row, which 0018 stopped keeping up to
-- date: its revisions would repeat ones the sequence has given (a change
-- feed key conflict). Its UPDATE of the row now takes the revision from
-- the sequence, with the advisory lock, as this release's writes do; the
-- UPDATE itself holds the table in ROW EXCLUSIVE mode, as they do.
CREATE FUNCTION catalog.revision_from_sequence() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.value := catalog.take_revision();
    RETURN NEW;
END
$$;

CREATE TRIGGER revision_from_sequence BEFORE UPDATE ON catalog.revision
    FOR EACH ROW EXECUTE FUNCTION catalog.revision_from_sequence();
