package catalog

import (
	"context"
)

// ClassFilter selects service classes.
type ClassFilter struct {
	// Broker is a broker's name.
	Broker string
	// Name matches spec.externalName or the object name.
	Name string
	// Tag is one of spec.tags.
	Tag string
	// IncludeRemoved also lists classes the broker no longer offers.
	IncludeRemoved bool
}

// catalogueOrder lists classes and plans as their brokers' catalogues do.
// The id breaks ties: a class or plan kept as removed keeps the position it
// had, which one the broker still offers may have taken.
const catalogueOrder = "broker_id, position, id"

// afterInCatalogue resumes a list in catalogueOrder after c.
func afterInCatalogue(f *filter, c cursor) {
	f.add("(broker_id, position, id) > (?::uuid, ?, ?::uuid)", c.Name, c.Pos, c.ID)
}

// uptoInCatalogue ends a read in catalogueOrder at c, included.
func uptoInCatalogue(f *filter, c cursor) {
	f.add("(broker_id, position, id) <= (?::uuid, ?, ?::uuid)", c.Name, c.Pos, c.ID)
}

// rawInCatalogue is the cursor of a class or plan of a listRaw in
// catalogueOrder.
func rawInCatalogue(o *RawObject, position int, broker string) cursor {
	return cursor{Name: broker, Pos: position, ID: o.ID}
}

// ListClasses lists service classes in their brokers' catalogue order:
// the cluster's, or the namespaced ones when opts.Namespaced.
func (s *Store) ListClasses(ctx context.Context, sel ClassFilter, opts ListOptions) (List[*ServiceClass], error) {
	return list[ServiceClass](ctx, s.pool, classFilter(sel, opts), catalogueOrder, afterInCatalogue,
		func(c *ServiceClass) cursor { return cursor{Name: c.broker, Pos: c.position, ID: c.ID} }, opts)
}

// ListClassesRaw is ListClasses with spec and status left as stored.
func (s *Store) ListClassesRaw(ctx context.Context, sel ClassFilter, opts ListOptions) (List[*RawObject], error) {
	return listRaw(ctx, s.pool, scopedKind(KindServiceClass, KindNamespacedServiceClass, opts), classFilter(sel, opts), catalogueOrder, afterInCatalogue,
		rawInCatalogue, opts)
}

func classFilter(sel ClassFilter, opts ListOptions) *filter {
	f := &filter{}
	f.scope(scopedKind(KindServiceClass, KindNamespacedServiceClass, opts), opts)
	if sel.Broker != "" {
		// The broker of that name in the class's own namespace.
		f.add("broker_id = (SELECT b.id FROM catalog.brokers b WHERE b.namespace = service_classes.namespace AND b.name = ?)", sel.Broker)
	}
	if sel.Name != "" {
		f.add("(external_name = ? OR name = ?)", sel.Name, sel.Name)
	}
	if sel.Tag != "" {
		f.add("spec->'tags' @> jsonb_build_array(?::text)", sel.Tag)
	}
	if !sel.IncludeRemoved {
		f.add("NOT removed")
	}
	return f
}

// PlanFilter selects service plans.
type PlanFilter struct {
	Broker string
	// Class is a class's object name or external name.
	Class string
	// Name matches spec.externalName or the object name.
	Name string
	// Free, when set, keeps only free (true) or paid (false) plans.
	Free           *bool
	IncludeRemoved bool
	// VisibleIn, when not nil, keeps the plans visible to at least one of
	// these namespaces (VisibleInAnnotation).
	VisibleIn []string
}

// ListPlans lists service plans in their brokers' catalogue order: the
// cluster's, or the namespaced ones when opts.Namespaced.
func (s *Store) ListPlans(ctx context.Context, sel PlanFilter, opts ListOptions) (List[*ServicePlan], error) {
	return list[ServicePlan](ctx, s.pool, planFilter(sel, opts), catalogueOrder, afterInCatalogue,
		func(p *ServicePlan) cursor { return cursor{Name: p.broker, Pos: p.position, ID: p.ID} }, opts)
}

// ListPlansRaw is ListPlans with spec and status left as stored: the
// marketplace's large lists are written without decoding them.
func (s *Store) ListPlansRaw(ctx context.Context, sel PlanFilter, opts ListOptions) (List[*RawObject], error) {
	return listRaw(ctx, s.pool, scopedKind(KindServicePlan, KindNamespacedServicePlan, opts), planFilter(sel, opts), catalogueOrder, afterInCatalogue,
		rawInCatalogue, opts)
}

func planFilter(sel PlanFilter, opts ListOptions) *filter {
	f := &filter{}
	f.scope(scopedKind(KindServicePlan, KindNamespacedServicePlan, opts), opts)
	if sel.Broker != "" {
		f.add("broker_id = (SELECT b.id FROM catalog.brokers b WHERE b.namespace = service_plans.namespace AND b.name = ?)", sel.Broker)
	}
	if sel.Class != "" {
		f.add("class_id IN (SELECT c.id FROM catalog.service_classes c WHERE c.namespace = service_plans.namespace AND (c.name = ? OR c.external_name = ?))", sel.Class, sel.Class)
	}
	if sel.Name != "" {
		f.add("(external_name = ? OR name = ?)", sel.Name, sel.Name)
	}
	if sel.Free != nil {
		f.add("free = ?", *sel.Free)
	}
	if sel.VisibleIn != nil {
		f.add("catalog.plan_visible(metadata, ?)", sel.VisibleIn)
	}
	if !sel.IncludeRemoved {
		f.add("NOT removed")
	}
	return f
}

// GetClass reads a cluster-scoped service class by id or object name.
func (s *Store) GetClass(ctx context.Context, idOrName string) (*ServiceClass, error) {
	return s.GetClassIn(ctx, "", idOrName)
}

// GetClassIn reads a service class of a namespace ("" for the cluster's)
// by id or object name.
func (s *Store) GetClassIn(ctx context.Context, namespace, idOrName string) (*ServiceClass, error) {
	return getByIDOrName[ServiceClass](ctx, s.pool, namespace, idOrName)
}

// GetPlan reads a cluster-scoped service plan by id or object name.
func (s *Store) GetPlan(ctx context.Context, idOrName string) (*ServicePlan, error) {
	return s.GetPlanIn(ctx, "", idOrName)
}

// GetPlanIn reads a service plan of a namespace ("" for the cluster's) by
// id or object name.
func (s *Store) GetPlanIn(ctx context.Context, namespace, idOrName string) (*ServicePlan, error) {
	return getByIDOrName[ServicePlan](ctx, s.pool, namespace, idOrName)
}

func (c *ServiceClass) extras() []any { return []any{&c.broker, &c.position} }
func (p *ServicePlan) extras() []any  { return []any{&p.broker, &p.position} }
