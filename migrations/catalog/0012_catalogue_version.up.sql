-- The catalogue's version: a number that moves whenever a service class or
-- plan is written (offered, changed, removed, deleted with its broker). A
-- process that keeps classes and plans in memory to create instances and
-- bindings without reading them each time notes the version it read them
-- at (the version first, then the rows), and each creation checks, in its
-- own transaction, that the version has not moved since
-- (catalog.expect_catalogue_version); if it has, the creation is refused
-- with SQLSTATE BDC01 and the process reads the catalogue again.
CREATE TABLE catalog.catalogue_version (
    id    boolean PRIMARY KEY DEFAULT true CHECK (id),
    value bigint NOT NULL
);
INSERT INTO catalog.catalogue_version (value) VALUES (0);

-- Once per transaction: a relist writes every plan of a broker, statement
-- by statement, and one step of the version is enough.
CREATE FUNCTION catalog.bump_catalogue_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('bindery.catalogue_bumped', true) IS DISTINCT FROM 'on' THEN
        UPDATE catalog.catalogue_version SET value = value + 1;
        PERFORM set_config('bindery.catalogue_bumped', 'on', true);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER service_classes_catalogue_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON catalog.service_classes FOR EACH STATEMENT EXECUTE FUNCTION catalog.bump_catalogue_version();
CREATE TRIGGER service_plans_catalogue_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON catalog.service_plans FOR EACH STATEMENT EXECUTE FUNCTION catalog.bump_catalogue_version();

CREATE FUNCTION catalog.expect_catalogue_version(expected bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    current bigint;
BEGIN
    SELECT value INTO current FROM catalog.catalogue_version;
    IF current IS DISTINCT FROM expected THEN
        RAISE EXCEPTION 'the catalogue changed: version % is now %', expected, current USING ERRCODE = 'BDC01';
    END IF;
END
$$;
