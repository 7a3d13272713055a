package catalog

import (
	"context"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// QuotaStatus is what limits a namespace and how much of it is used.
type QuotaStatus struct {
	Namespace string `json:"namespace"`
	// Quota is the quota in force: the namespace's own, else the default
	// (Quota.Namespace ""); nil when there is neither.
	Quota *Quota `json:"quota,omitempty"`
	// ResourceQuotas are the namespace's ResourceQuotas that limit
	// instances, bindings or brokers.
	ResourceQuotas []ResourceQuota `json:"resourceQuotas,omitempty"`
	// Instances and Bindings are the namespace's counts, with the
	// strictest limit and where it comes from.
	Instances Usage `json:"instances"`
	Bindings  Usage `json:"bindings"`
	// Brokers is the namespace's own brokers and the strictest bound on
	// them: the server's (WithMaxBrokersPerNamespace; SourceServer) or a
	// ResourceQuota's.
	Brokers Usage `json:"brokers"`
	// Plans are the namespace's instances of the plans the quota limits.
	Plans []PlanUsage `json:"plans,omitempty"`
}

// Usage is a count and the limit in force on it.
type Usage struct {
	Used int64 `json:"used"`
	// Limit is nil when nothing limits the count.
	Limit *int64 `json:"limit,omitempty"`
	// Source is where the limit comes from: SourceNamespace,
	// SourceDefault, SourceResourceQuota and the ResourceQuota's name, or
	// SourceServer.
	Source string `json:"source,omitempty"`
}

// PlanUsage is a namespace's instances of one plan and its limit
// (Instances).
type PlanUsage struct {
	PlanQuota
	Used int64 `json:"used"`
}

// QuotaStatus reads what limits namespace and how much of it is used.
func (s *Store) QuotaStatus(ctx context.Context, namespace string) (*QuotaStatus, error) {
	if err := invalid(validateNamespace(field.NewPath("namespace"), namespace)); err != nil {
		return nil, err
	}
	st := &QuotaStatus{Namespace: namespace}
	qs, err := s.quotas(ctx, []string{namespace, ""})
	if err != nil {
		return nil, err
	}
	if len(qs) > 0 {
		st.Quota = qs[len(qs)-1] // the namespace's own sorts after the default
	}
	if st.ResourceQuotas, err = resourceQuotas(ctx, s.pool, namespace); err != nil {
		return nil, err
	}
	var planIDs []string
	if st.Quota != nil {
		for _, p := range st.Quota.Plans {
			planIDs = append(planIDs, p.PlanID)
		}
	}
	// The namespace's counts as admission reads them: its rows in
	// catalog.namespace_counts, which the tables' triggers keep, where it
	// has them (once a limit has applied to it, migration 0017); else its
	// objects counted, as admission would the first time (coalesce counts
	// only where there is no row). One statement reads one snapshot, and a
	// row moves in the transaction that adds or removes the object, so the
	// row and the count agree. A plan's instances are counted, as
	// admission counts them: no row keeps them.
	var perPlan []int64
	var visible []bool
	err = s.pool.QueryRow(ctx, `SELECT
			coalesce((SELECT used FROM catalog.namespace_counts WHERE namespace = $1 AND resource = 'instances'),
				(SELECT count(*) FROM catalog.instances WHERE namespace = $1)),
			coalesce((SELECT used FROM catalog.namespace_counts WHERE namespace = $1 AND resource = 'bindings'),
				(SELECT count(*) FROM catalog.bindings WHERE namespace = $1)),
			(SELECT coalesce(array_agg((SELECT count(*) FROM catalog.instances i WHERE i.namespace = $1 AND i.plan_id = p.id) ORDER BY p.n), '{}')
				FROM unnest($2::uuid[]) WITH ORDINALITY AS p(id, n)),
			(SELECT count(*) FROM catalog.brokers WHERE namespace = $1),
			(SELECT coalesce(array_agg(coalesce((SELECT catalog.plan_visible(sp.metadata, ARRAY[$1::text]) FROM catalog.service_plans sp WHERE sp.id = p.id), true)
				ORDER BY p.n), '{}') FROM unnest($2::uuid[]) WITH ORDINALITY AS p(id, n))`, namespace, planIDs).
		Scan(&st.Instances.Used, &st.Bindings.Used, &perPlan, &st.Brokers.Used, &visible)
	if err != nil {
		return nil, mapErr(err)
	}
	st.Instances.Limit, st.Instances.Source = limitOf(st.Quota, st.ResourceQuotas, QuotaInstances)
	st.Bindings.Limit, st.Bindings.Source = limitOf(st.Quota, st.ResourceQuotas, QuotaBindings)
	st.Brokers.Limit, st.Brokers.Source = brokerLimit(s.maxBrokers, st.ResourceQuotas)
	if st.Quota != nil {
		// A plan hidden from the namespace (VisibleInAnnotation) is, to
		// it, no plan: the default quota's limit on it is not shown.
		q := *st.Quota
		q.Plans = nil
		for i, p := range st.Quota.Plans {
			if visible[i] {
				q.Plans = append(q.Plans, p)
				st.Plans = append(st.Plans, PlanUsage{PlanQuota: p, Used: perPlan[i]})
			}
		}
		st.Quota = &q
	}
	return st, nil
}

// limitOf is the strictest limit of q (nil for none) and rqs on resource
// (QuotaInstances or QuotaBindings), and where it comes from, as
// catalog.admit_instance and catalog.admit_binding find it.
func limitOf(q *Quota, rqs []ResourceQuota, resource string) (*int64, string) {
	var lim *int64
	var source string
	if q != nil {
		v := q.Instances
		if resource == QuotaBindings {
			v = q.Bindings
		}
		if v != nil {
			n := int64(*v)
			lim, source = &n, SourceNamespace
			if q.Namespace == "" {
				source = SourceDefault
			}
		}
	}
	return strictest(lim, source, rqs, resource)
}

// strictest lowers lim, which comes from source, to the strictest limit
// of rqs on resource: by name, the first of the strictest wins.
func strictest(lim *int64, source string, rqs []ResourceQuota, resource string) (*int64, string) {
	for _, rq := range rqs {
		if v := rq.limit(resource); v != nil && (lim == nil || *v < *lim) {
			n := *v
			lim, source = &n, SourceResourceQuota+rq.Name
		}
	}
	return lim, source
}

// quotaUsageSQL is every namespace that has instances, bindings, brokers
// of its own, a quota of its own or a ResourceQuota, and the number of its
// instances, bindings and brokers, in one snapshot: its rows in
// catalog.namespace_counts where it has them, as QuotaStatus reads them,
// else its objects counted (its brokers always are: they are few). A
// table's objects are counted (in one pass, as before there were rows)
// only when a namespace that has some of them has no row: i and b find
// the namespaces that have objects by one descent of an index each (the
// least namespace after the last one found), not by reading the objects.
// A row at 0 (the namespace's objects all gone) lists no namespace.
const quotaUsageSQL = `WITH RECURSIVE
	i(ns) AS (SELECT min(namespace) FROM catalog.instances
		UNION ALL SELECT (SELECT min(namespace) FROM catalog.instances WHERE namespace > i.ns) FROM i WHERE i.ns IS NOT NULL),
	b(ns) AS (SELECT min(namespace) FROM catalog.bindings
		UNION ALL SELECT (SELECT min(namespace) FROM catalog.bindings WHERE namespace > b.ns) FROM b WHERE b.ns IS NOT NULL)
SELECT namespace, sum(i), sum(b), sum(k) FROM (
	SELECT namespace, used AS i, 0 AS b, 0 AS k FROM catalog.namespace_counts WHERE resource = 'instances' AND used > 0
	UNION ALL SELECT namespace, 0, used, 0 FROM catalog.namespace_counts WHERE resource = 'bindings' AND used > 0
	UNION ALL SELECT namespace, count(*), 0, 0 FROM catalog.instances
		WHERE EXISTS (SELECT FROM i WHERE ns IS NOT NULL
			AND NOT EXISTS (SELECT FROM catalog.namespace_counts c WHERE c.namespace = i.ns AND c.resource = 'instances'))
		GROUP BY namespace
		HAVING NOT EXISTS (SELECT FROM catalog.namespace_counts c WHERE c.namespace = instances.namespace AND c.resource = 'instances')
	UNION ALL SELECT namespace, 0, count(*), 0 FROM catalog.bindings
		WHERE EXISTS (SELECT FROM b WHERE ns IS NOT NULL
			AND NOT EXISTS (SELECT FROM catalog.namespace_counts c WHERE c.namespace = b.ns AND c.resource = 'bindings'))
		GROUP BY namespace
		HAVING NOT EXISTS (SELECT FROM catalog.namespace_counts c WHERE c.namespace = bindings.namespace AND c.resource = 'bindings')
	UNION ALL SELECT namespace, 0, 0, count(*) FROM catalog.brokers WHERE namespace <> '' GROUP BY namespace
	UNION ALL SELECT namespace, 0, 0, 0 FROM catalog.quotas WHERE namespace <> ''
	UNION ALL SELECT namespace, 0, 0, 0 FROM catalog.resource_quotas) AS u
GROUP BY namespace ORDER BY namespace`

// NamespaceUsage is one namespace's counts and limits, for metrics.
type NamespaceUsage struct {
	Namespace                    string
	Instances, Bindings, Brokers Usage
}

// QuotaUsage lists the counts and limits of every namespace that has
// instances, bindings, brokers of its own, a quota of its own or a
// ResourceQuota that limits them, by namespace.
func (s *Store) QuotaUsage(ctx context.Context) ([]NamespaceUsage, error) {
	rows, err := s.pool.Query(ctx, quotaUsageSQL)
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (NamespaceUsage, error) {
		var u NamespaceUsage
		return u, row.Scan(&u.Namespace, &u.Instances.Used, &u.Bindings.Used, &u.Brokers.Used)
	})
	if err != nil {
		return nil, mapErr(err)
	}
	quotas, err := s.ListQuotas(ctx)
	if err != nil {
		return nil, err
	}
	rqs, err := resourceQuotas(ctx, s.pool, "")
	if err != nil {
		return nil, err
	}
	var def *Quota
	own := map[string]*Quota{}
	for _, q := range quotas {
		if q.Namespace == "" {
			def = q
		} else {
			own[q.Namespace] = q
		}
	}
	for i := range out {
		u := &out[i]
		q := own[u.Namespace]
		if q == nil {
			q = def
		}
		lo, hi := rqRange(rqs, u.Namespace)
		u.Instances.Limit, u.Instances.Source = limitOf(q, rqs[lo:hi], QuotaInstances)
		u.Bindings.Limit, u.Bindings.Source = limitOf(q, rqs[lo:hi], QuotaBindings)
		u.Brokers.Limit, u.Brokers.Source = brokerLimit(s.maxBrokers, rqs[lo:hi])
	}
	return out, nil
}

// rqRange is where the ResourceQuotas of namespace are in rqs, which are
// sorted by namespace in byte order (resourceQuotas).
func rqRange(rqs []ResourceQuota, namespace string) (int, int) {
	lo, _ := slices.BinarySearchFunc(rqs, namespace, func(rq ResourceQuota, ns string) int { return strings.Compare(rq.Namespace, ns) })
	hi := lo
	for hi < len(rqs) && rqs[hi].Namespace == namespace {
		hi++
	}
	return lo, hi
}
