-- Quotas per namespace, and the cluster's ResourceQuotas that limit
-- Service Catalog's objects. Only new tables and functions: a release
-- that does not know them runs on beside this one (it does not check
-- them).

-- A namespace's limits; the row of namespace '' is the default of the
-- namespaces without one of their own. NULL is no limit.
CREATE TABLE catalog.quotas (
    namespace  text PRIMARY KEY,
    instances  integer CHECK (instances >= 0),
    bindings   integer CHECK (bindings >= 0),
    paid_plans boolean NOT NULL DEFAULT true,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- Instances of one plan a namespace (or the default) may have.
CREATE TABLE catalog.quota_plans (
    namespace text NOT NULL REFERENCES catalog.quotas (namespace) ON DELETE CASCADE,
    plan_id   uuid NOT NULL REFERENCES catalog.service_plans (id) ON DELETE CASCADE,
    instances integer NOT NULL CHECK (instances >= 0),
    PRIMARY KEY (namespace, plan_id)
);
CREATE INDEX quota_plans_plan_idx ON catalog.quota_plans (plan_id);

-- The hard limits of the cluster's ResourceQuotas on
-- count/serviceinstances.servicecatalog.k8s.io and
-- count/servicebindings.servicecatalog.k8s.io, as the engine last saw
-- them (catalog/resourcequota).
CREATE TABLE catalog.resource_quotas (
    namespace text NOT NULL,
    name      text NOT NULL,
    instances bigint,
    bindings  bigint,
    PRIMARY KEY (namespace, name)
);

-- A cluster plan that names namespaces in its annotation
-- bindery.dev/visible-in (comma-separated; empty: none) is visible to
-- those only; without it, to every namespace.
CREATE FUNCTION catalog.plan_visible(metadata jsonb, ns text[]) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT metadata->'annotations'->>'bindery.dev/visible-in' IS NULL
        OR string_to_array(metadata->'annotations'->>'bindery.dev/visible-in', ',') && ns
$$;

-- catalog.admit_instance checks, in the transaction that creates an
-- instance (creating) or gives it a plan (plan, paid), the quota in force
-- in namespace ns (its own, else the default) and the namespace's
-- ResourceQuotas; self is an instance not to count (one changing plan).
-- When a limit applies, it first takes the namespace's advisory lock
-- (pg_advisory_xact_lock(1903521601, hashtext(ns)), held until the end of
-- the transaction), then counts: creations in one namespace take turns,
-- each counting the others' committed rows, so two never share the last
-- place. With no limit it takes nothing. A refusal raises BDQ01 (a count)
-- or BDQ02 (a paid plan), its DETAIL a JSON object of what was exceeded.
CREATE FUNCTION catalog.admit_instance(ns text, plan uuid, paid boolean, creating boolean, self uuid) RETURNS void
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

-- catalog.admit_binding is admit_instance for a new binding: the
-- namespace's bindings, under a lock of its own
-- (pg_advisory_xact_lock(1903521602, hashtext(ns))).
CREATE FUNCTION catalog.admit_binding(ns text) RETURNS void
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
