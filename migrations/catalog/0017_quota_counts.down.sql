-- Back to counting the namespace's objects at each creation: migration
-- 0015's functions again, then the counts go.
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
        SELECT count(*) INTO used FROM (SELECT 1 FROM catalog.instances WHERE namespace = ns LIMIT lim) AS c;
        IF used >= lim THEN
            SELECT count(*) INTO used FROM catalog.instances WHERE namespace = ns;
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
    SELECT count(*) INTO used FROM (SELECT 1 FROM catalog.bindings WHERE namespace = ns LIMIT lim) AS c;
    IF used >= lim THEN
        SELECT count(*) INTO used FROM catalog.bindings WHERE namespace = ns;
        RAISE EXCEPTION 'namespace % may have % bindings and has %', ns, lim, used USING ERRCODE = 'BDQ01',
            DETAIL = json_build_object('namespace', ns, 'resource', 'bindings', 'limit', lim, 'used', used, 'source', lim_from)::text;
    END IF;
END
$$;

DROP TRIGGER bindings_counted ON catalog.bindings;
DROP TRIGGER instances_counted ON catalog.instances;
DROP FUNCTION catalog.counted(text, text);
DROP FUNCTION catalog.count_objects();
DROP TABLE catalog.namespace_counts;
