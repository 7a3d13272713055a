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
	// instances or bindings.
	ResourceQuotas []ResourceQuota `json:"resourceQuotas,omitempty"`
	// Instances and Bindings are the namespace's counts, with the
	// strictest limit and where it comes from.
	Instances Usage `json:"instances"`
	Bindings  Usage `json:"bindings"`
	// Plans are the namespace's instances of the plans the quota limits.
	Plans []PlanUsage `json:"plans,omitempty"`
}

// Usage is a count and the limit in force on it.
type Usage struct {
	Used int64 `json:"used"`
	// Limit is nil when nothing limits the count.
	Limit *int64 `json:"limit,omitempty"`
	// Source is where the limit comes from: SourceNamespace,
	// SourceDefault, or SourceResourceQuota and the ResourceQuota's name.
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
	if st.ResourceQuotas, err = s.resourceQuotas(ctx, namespace); err != nil {
		return nil, err
	}
	var planIDs []string
	if st.Quota != nil {
		for _, p := range st.Quota.Plans {
			planIDs = append(planIDs, p.PlanID)
		}
	}
	var perPlan []int64
	err = s.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM catalog.instances WHERE namespace = $1),
			(SELECT count(*) FROM catalog.bindings WHERE namespace = $1),
			(SELECT coalesce(array_agg((SELECT count(*) FROM catalog.instances i WHERE i.namespace = $1 AND i.plan_id = p.id) ORDER BY p.n), '{}')
				FROM unnest($2::uuid[]) WITH ORDINALITY AS p(id, n))`, namespace, planIDs).
		Scan(&st.Instances.Used, &st.Bindings.Used, &perPlan)
	if err != nil {
		return nil, mapErr(err)
	}
	st.Instances.Limit, st.Instances.Source = limitOf(st.Quota, st.ResourceQuotas, QuotaInstances)
	st.Bindings.Limit, st.Bindings.Source = limitOf(st.Quota, st.ResourceQuotas, QuotaBindings)
	if st.Quota != nil {
		for i, p := range st.Quota.Plans {
			st.Plans = append(st.Plans, PlanUsage{PlanQuota: p, Used: perPlan[i]})
		}
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
	for _, rq := range rqs { // by name: the first of the strictest wins
		v := rq.Instances
		if resource == QuotaBindings {
			v = rq.Bindings
		}
		if v != nil && (lim == nil || *v < *lim) {
			n := *v
			lim, source = &n, SourceResourceQuota+rq.Name
		}
	}
	return lim, source
}

// NamespaceUsage is one namespace's counts and limits, for metrics.
type NamespaceUsage struct {
	Namespace           string
	Instances, Bindings Usage
}

// QuotaUsage lists the counts and limits of every namespace that has
// instances, bindings, a quota of its own or a ResourceQuota that limits
// them, by namespace.
func (s *Store) QuotaUsage(ctx context.Context) ([]NamespaceUsage, error) {
	rows, err := s.pool.Query(ctx, `SELECT namespace, sum(i), sum(b) FROM (
			SELECT namespace, count(*) AS i, 0 AS b FROM catalog.instances GROUP BY namespace
			UNION ALL SELECT namespace, 0, count(*) FROM catalog.bindings GROUP BY namespace
			UNION ALL SELECT namespace, 0, 0 FROM catalog.quotas WHERE namespace <> ''
			UNION ALL SELECT namespace, 0, 0 FROM catalog.resource_quotas) AS c
		GROUP BY namespace ORDER BY namespace`)
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (NamespaceUsage, error) {
		var u NamespaceUsage
		return u, row.Scan(&u.Namespace, &u.Instances.Used, &u.Bindings.Used)
	})
	if err != nil {
		return nil, mapErr(err)
	}
	quotas, err := s.ListQuotas(ctx)
	if err != nil {
		return nil, err
	}
	rqs, err := s.resourceQuotas(ctx, "")
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
	}
	return out, nil
}

// rqRange is where the ResourceQuotas of namespace are in rqs, which are
// sorted by namespace.
func rqRange(rqs []ResourceQuota, namespace string) (int, int) {
	lo, _ := slices.BinarySearchFunc(rqs, namespace, func(rq ResourceQuota, ns string) int { return strings.Compare(rq.Namespace, ns) })
	hi := lo
	for hi < len(rqs) && rqs[hi].Namespace == namespace {
		hi++
	}
	return lo, hi
}
