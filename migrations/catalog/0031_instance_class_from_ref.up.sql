-- An instance's class_id is the class its spec refers to
-- (clusterServiceClassRef, or serviceClassRef in its own namespace): the
-- class it was resolved to, which relists keep, marked removed, while an
-- instance holds it. Releases before this one took class_id from the
-- plan's current class at every change of the instance, so an instance
-- whose plan the broker had moved to another service held that service's
-- class instead, and a relist could delete the class its spec names. This
-- puts class_id back on that class where it still exists.
--
-- Only the rows that differ are written, each locked alone; reading
-- catalog.instances takes no lock that keeps others from reading or
-- writing it, so a release that still runs goes on meanwhile (an instance
-- it changes before it stops is put right by the next change this
-- release makes). The instances' documents are not changed: class_id is
-- not in them.
UPDATE catalog.instances i SET class_id = c.id
FROM catalog.service_classes c
WHERE i.plan_id IS NOT NULL
    AND c.namespace = CASE WHEN i.spec -> 'serviceClassRef' IS NOT NULL THEN i.namespace ELSE '' END
    AND c.name = coalesce(i.spec -> 'serviceClassRef' ->> 'name', i.spec -> 'clusterServiceClassRef' ->> 'name')
    AND i.class_id IS DISTINCT FROM c.id;
