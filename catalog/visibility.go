package catalog

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Plan visibility, as Cloud Foundry's service plan visibility: an admin
// makes a cluster plan visible to chosen namespaces only. The plan then
// carries the annotation VisibleInAnnotation, which names them; a plan
// without it is every namespace's. To a namespace it is hidden from, the
// plan does not exist: lists leave it out, and an instance there that
// names it is an instance of a plan no broker offers, recorded to wait
// for it (Service Catalog's ReferencesNonexistentServicePlan), never
// provisioned unless the plan is made visible to its namespace. Instances
// of it made before it was hidden stay.
//
// The annotation travels with the plan's document, so every reader (the
// Kubernetes API's watches included) decides from the plan alone; a
// relist keeps it, as it keeps every annotation.

// VisibleInAnnotation names, comma-separated, the namespaces a cluster
// plan is visible to; "" is none (only tokens for all namespaces and
// cluster-wide users see it).
const VisibleInAnnotation = "bindery.dev/visible-in"

// VisibleIn tells whether plan is visible to namespace ns: a namespace's
// own plans are its own, and a cluster plan is every namespace's unless
// its annotation names some.
func VisibleIn(plan *Meta, ns string) bool {
	namespaces, restricted := VisibleNamespaces(plan)
	return !restricted || slices.Contains(namespaces, ns)
}

// VisibleNamespaces reads a cluster plan's annotation: the namespaces it
// is visible to, and whether it is restricted to them at all.
func VisibleNamespaces(plan *Meta) ([]string, bool) {
	v, ok := plan.Annotations[VisibleInAnnotation]
	if !ok || plan.Namespace != "" {
		return nil, false
	}
	if v == "" {
		return []string{}, true
	}
	return strings.Split(v, ","), true
}

// NarrowedVisibility is a cluster plan's annotations as a reader of some
// namespaces reads them: VisibleInAnnotation names only the namespaces
// theirs says are the reader's (which others may use the plan is not
// theirs to know). It is annotations itself, and false, when nothing is
// cut; else a copy, and true.
func NarrowedVisibility(annotations map[string]string, theirs func(ns string) bool) (map[string]string, bool) {
	v, ok := annotations[VisibleInAnnotation]
	if !ok || v == "" {
		return annotations, false
	}
	all := strings.Split(v, ",")
	own := slices.DeleteFunc(slices.Clone(all), func(ns string) bool { return !theirs(ns) })
	if len(own) == len(all) {
		return annotations, false
	}
	out := maps.Clone(annotations)
	out[VisibleInAnnotation] = strings.Join(own, ",")
	return out, true
}

// SetPlanVisibility makes the cluster plan of id (or object name) visible
// to namespaces only, or, with nil, to every namespace again. An empty
// list hides it from every namespace. The change is a change of the plan
// (its annotation), which watchers see.
func (s *Store) SetPlanVisibility(ctx context.Context, idOrName string, namespaces []string) (*ServicePlan, error) {
	var errs field.ErrorList
	for i, ns := range namespaces {
		errs = append(errs, validateNamespace(field.NewPath("namespaces").Index(i), ns)...)
	}
	if err := invalid(errs); err != nil {
		return nil, err
	}
	plan, err := s.GetPlan(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	var value *string
	if namespaces != nil {
		sorted := slices.Compact(slices.Sorted(slices.Values(namespaces)))
		v := strings.Join(sorted, ",")
		value = &v
	}
	return updateMeta[ServicePlan](ctx, s, plan.ID, 0, func(m *Meta) error {
		if m.Namespace != "" {
			return fmt.Errorf("%w: plan %s is namespace %s's own: only cluster plans are restricted to namespaces", ErrUnprocessable, m.Name, m.Namespace)
		}
		if value == nil {
			delete(m.Annotations, VisibleInAnnotation)
			return nil
		}
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[VisibleInAnnotation] = *value
		return nil
	})
}

// PlansVisibleIn counts, for each of the cluster brokers of ids, the
// plans it offers that are visible to one of namespaces, by broker id. A
// reader limited to namespaces takes it for the count in the broker's
// status, which counts every plan: a plan hidden from the reader does not
// exist to it, nor does how many there are. (Its classes stay listed,
// and counted.)
func (s *Store) PlansVisibleIn(ctx context.Context, namespaces, ids []string) (map[string]int, error) {
	out := make(map[string]int, len(ids))
	for _, id := range ids {
		out[id] = 0
	}
	rows, err := s.pool.Query(ctx, `SELECT broker_id::text, count(*) FROM catalog.service_plans
		WHERE broker_id = ANY($1::uuid[]) AND namespace = '' AND NOT removed AND catalog.plan_visible(metadata, $2)
		GROUP BY broker_id`, ids, namespaces)
	if err != nil {
		return nil, fmt.Errorf("count the plans visible: %w", mapErr(err))
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return nil, fmt.Errorf("count the plans visible: %w", mapErr(err))
		}
		out[id] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count the plans visible: %w", mapErr(err))
	}
	return out, nil
}

// CountPlansVisibleIn sets the plan counts of the cluster brokers among
// brokers to those of the plans visible to namespaces (PlansVisibleIn).
func (s *Store) CountPlansVisibleIn(ctx context.Context, namespaces []string, brokers ...*Broker) error {
	var ids []string
	for _, b := range brokers {
		if b.Namespace == "" {
			ids = append(ids, b.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	counts, err := s.PlansVisibleIn(ctx, namespaces, ids)
	if err != nil {
		return err
	}
	for _, b := range brokers {
		if n, ok := counts[b.ID]; ok && b.Namespace == "" {
			b.Status.ServicePlanCount = n
		}
	}
	return nil
}
