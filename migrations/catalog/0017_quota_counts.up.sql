-- A namespace's instances and bindings, counted as they come and go, so
-- that catalog.admit_instance and catalog.admit_binding read one row
-- instead of counting the namespace's objects (their cost no longer grows
-- with the namespace).
--
-- A namespace gets its row the first time a limit applies to it: the
-- admitting transaction, holding the namespace's advisory lock
-- exclusively, counts the objects once and inserts it. From then on the
-- triggers below keep it: every insert and delete of an instance or
-- binding takes the same advisory lock shared (creations and deletions
-- that check no limit do not wait for one another) and moves the row if
-- there is one. So the exclusive holder counts with no insert or delete
-- in flight in the namespace, and none is ever missed. Namespaces no
-- limit ever applied to have no row and pay one index probe.
CREATE TABLE catalog.namespace_counts (
    namespace text NOT NULL,
    resource  text NOT NULL CHECK (resource IN ('instances', 'bindings')),
    used      bigint NOT NULL,
    PRIMARY KEY (namespace, resource)
);

CREATE FUNCTION catalog.count_objects() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    ns    text;
    delta bigint := 1;
    key   integer := 1903521601;
BEGIN
    IF TG_OP = 'INSERT' THEN
        ns := NEW.namespace;
    ELSE
        ns := OLD.namespace;
        delta := -1;
    END IF;
    IF TG_TABLE_NAME = 'bindings' THEN
        key := 1903521602;
    END IF;
    PERFORM pg_advisory_xact_lock_shared(key, hashtext(ns));
    UPDATE catalog.namespace_counts SET used = used + delta WHERE namespace = ns AND resource = TG_TABLE_NAME;
    RETURN NULL;
END
$$;

CREATE TRIGGER instances_counted AFTER INSERT OR DELETE ON catalog.instances
    FOR EACH ROW EXECUTE FUNCTION catalog.count_objects();
CREATE TRIGGER bindings_counted AFTER INSERT OR DELETE ON catalog.bindings
    FOR EACH ROW EXECUTE FUNCTION catalog.count_objects();

-- catalog.counted is the namespace's count of resource ('instances' or
-- 'bindings'), its row made first if it has none. The caller holds the
-- namespace's advisory lock of resource exclusively.
CREATE FUNCTION catalog.counted(ns text, res text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    SELECT used INTO n FROM catalog.namespace_counts WHERE namespace = ns AND resource = res;
    IF FOUND THEN
        RETURN n;
    END IF;
    IF res = 'instances' THEN
        SELECT count(*) INTO n FROM catalog.instances WHERE namespace = ns;
    ELSE
        SELECT count(*) INTO n FROM catalog.bindings WHERE namespace = ns;
    END IF;
    INSERT INTO catalog.namespace_counts (namespace, resource, used) VALUES (ns, res, n);
    RETURN n;
END
$$;

-- As in migration 0015, but the namespace's count is read from its row.
-- Instances of one plan are still counted, up to the plan's limit.
CREATE OR REPLACE FUNCTION catalog.admit_instance(ns text, plan uuid, paid boolean, creating boolean, self uuid) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    q        catalog.quotas;
    source   text;
    lim      bigint;
    lim_from text;
    plan_lim bigint;
    used     bigint;
    rq       record;
BEGIN
    SELECT * INTO q FROM catalog.quotas WHERE namespace IN (ns, '') ORDER BY namespace DESC LIMIT 1;
    IF FOUND THEN
        source := CASE WHEN q.namespace = '' THEN 'default' ELSE 'namespace' END;
        IF paid AND NOT q.paid_plans THEN
            RAISE EXCEPTION 'namespace % may not use paid plans', ns USING ERRCODE = 'BDQ02',
                DETAIL = json_build_object('namespace', ns, 'source', source)::text;
        END IF;
        IF plan IS NOT NULL THEN
            SELECT instances INTO plan_lim FROM catalog.quota_plans WHERE namespace = q.namespace AND plan_id = plan;
        END IF;
        IF creating THEN
            lim := q.instances;
            lim_from := source;
        END IF;
    END IF;
    IF creating THEN
        -- The strictest limit wins.
        SELECT name, instances INTO rq FROM catalog.resource_quotas
            WHERE namespace = ns AND instances IS NOT NULL ORDER BY instances, name LIMIT 1;
        IF FOUND AND (lim IS NULL OR rq.instances < lim) THEN
            lim := rq.instances;
            lim_from := 'ResourceQuota/' || rq.name;
        END IF;
    END IF;
    IF lim IS NULL AND plan_lim IS NULL THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(1903521601, hashtext(ns));
    -- Each statement below reads what committed before the lock was ours.
    IF lim IS NOT NULL THEN
        used := catalog.counted(ns, 'instances');
        IF used >= lim THEN
            RAISE EXCEPTION 'namespace % may have % instances and has %', ns, lim, used USING ERRCODE = 'BDQ01',
                DETAIL = json_build_object('namespace', ns, 'resource', 'instances', 'limit', lim, 'used', used, 'source', lim_from)::text;
        END IF;
    END IF;
    IF plan_lim IS NOT NULL THEN
        SELECT count(*) INTO used FROM (SELECT 1 FROM catalog.instances
            WHERE namespace = ns AND plan_id = plan AND id IS DISTINCT FROM self LIMIT plan_lim) AS c;
        IF used >= plan_lim THEN
            SELECT count(*) INTO used FROM catalog.instances WHERE namespace = ns AND plan_id = plan AND id IS DISTINCT FROM self;
            RAISE EXCEPTION 'namespace % may have % instances of the plan and has %', ns, plan_lim, used USING ERRCODE = 'BDQ01',
                DETAIL = json_build_object('namespace', ns, 'resource', 'plan', 'limit', plan_lim, 'used', used, 'source', source)::text;
        END IF;
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION catalog.admit_binding(ns text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    lim      bigint;
    lim_from text;
    used     bigint;
    rq       record;
BEGIN
    SELECT bindings, CASE WHEN namespace = '' THEN 'default' ELSE 'namespace' END INTO lim, lim_from
        FROM catalog.quotas WHERE namespace IN (ns, '') ORDER BY namespace DESC LIMIT 1;
    SELECT name, bindings INTO rq FROM catalog.resource_quotas
        WHERE namespace = ns AND bindings IS NOT NULL ORDER BY bindings, name LIMIT 1;
    IF FOUND AND (lim IS NULL OR rq.bindings < lim) THEN
        lim := rq.bindings;
        lim_from := 'ResourceQuota/' || rq.name;
    END IF;
    IF lim IS NULL THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(1903521602, hashtext(ns));
    used := catalog.counted(ns, 'bindings');
    IF used >= lim THEN
        RAISE EXCEPTION 'namespace % may have % bindings and has %', ns, lim, used USING ERRCODE = 'BDQ01',
            DETAIL = json_build_object('namespace', ns, 'resource', 'bindings', 'limit', lim, 'used', used, 'source', lim_from)::text;
    END IF;
END
$$;
