package catalog

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// ResourceQuota is what a Kubernetes ResourceQuota of a namespace sets on
// Service Catalog's objects: its hard limits on
// count/serviceinstances.servicecatalog.k8s.io (Instances),
// count/servicebindings.servicecatalog.k8s.io (Bindings) and
// count/servicebrokers.servicecatalog.k8s.io (Brokers). The engine
// keeps the catalog's copy up to date while a cluster is configured
// (catalog/resourcequota); creations through every door then honour them.
type ResourceQuota struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Instances *int64 `json:"instances,omitempty"`
	Bindings  *int64 `json:"bindings,omitempty"`
	Brokers   *int64 `json:"brokers,omitempty"`
}

// limits tells whether the ResourceQuota limits any of the catalog's
// objects.
func (rq *ResourceQuota) limits() bool {
	return rq.Instances != nil || rq.Bindings != nil || rq.Brokers != nil
}

// limit is the ResourceQuota's hard limit on resource (QuotaInstances,
// QuotaBindings or QuotaBrokers), nil for none.
func (rq *ResourceQuota) limit(resource string) *int64 {
	switch resource {
	case QuotaInstances:
		return rq.Instances
	case QuotaBindings:
		return rq.Bindings
	case QuotaBrokers:
		return rq.Brokers
	}
	return nil
}

// PutResourceQuota records a ResourceQuota's limits, or forgets it when it
// sets none.
func (s *Store) PutResourceQuota(ctx context.Context, rq ResourceQuota) error {
	if !rq.limits() {
		return s.DeleteResourceQuota(ctx, rq.Namespace, rq.Name)
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO catalog.resource_quotas (namespace, name, instances, bindings, brokers) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (namespace, name) DO UPDATE SET instances = $3, bindings = $4, brokers = $5
		WHERE (resource_quotas.instances, resource_quotas.bindings, resource_quotas.brokers) IS DISTINCT FROM ($3, $4, $5)`,
		rq.Namespace, rq.Name, rq.Instances, rq.Bindings, rq.Brokers)
	return mapErr(err)
}

// DeleteResourceQuota forgets a ResourceQuota; one not recorded is no
// error.
func (s *Store) DeleteResourceQuota(ctx context.Context, namespace, name string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM catalog.resource_quotas WHERE namespace = $1 AND name = $2`, namespace, name)
	return mapErr(err)
}

// ReplaceResourceQuotas makes the recorded ResourceQuotas those of all
// (those that set no limit on the catalog's objects left out), in one
// transaction.
func (s *Store) ReplaceResourceQuotas(ctx context.Context, all []ResourceQuota) error {
	var nss, names []string
	var instances, bindings, brokers []*int64
	for _, rq := range all {
		if rq.limits() {
			nss, names = append(nss, rq.Namespace), append(names, rq.Name)
			instances, bindings, brokers = append(instances, rq.Instances), append(bindings, rq.Bindings), append(brokers, rq.Brokers)
		}
	}
	_, err := s.write(ctx, func(w *txn) error {
		w.queue(nil, `DELETE FROM catalog.resource_quotas r WHERE NOT EXISTS
			(SELECT 1 FROM unnest($1::text[], $2::text[]) AS n(ns, name) WHERE n.ns = r.namespace AND n.name = r.name)`, nss, names)
		_, err := w.Exec(ctx, `INSERT INTO catalog.resource_quotas (namespace, name, instances, bindings, brokers)
			SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[])
			ON CONFLICT (namespace, name) DO UPDATE SET instances = excluded.instances, bindings = excluded.bindings, brokers = excluded.brokers
			WHERE (resource_quotas.instances, resource_quotas.bindings, resource_quotas.brokers)
				IS DISTINCT FROM (excluded.instances, excluded.bindings, excluded.brokers)`,
			nss, names, instances, bindings, brokers)
		return mapErr(err)
	})
	return err
}

// resourceQuotas reads the recorded ResourceQuotas of namespace ("" for
// all), by namespace in byte order (rqRange looks for them so, whatever
// the database's collation), then by name as admission ties them.
func resourceQuotas(ctx context.Context, q querier, namespace string) ([]ResourceQuota, error) {
	rows, err := q.Query(ctx, `SELECT namespace, name, instances, bindings, brokers FROM catalog.resource_quotas
		WHERE $1 = '' OR namespace = $1 ORDER BY namespace COLLATE "C", name`, namespace)
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ResourceQuota])
	return out, mapErr(err)
}
