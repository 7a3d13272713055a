package catalog

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/bindery-dev/bindery/internal/osb"
)

// References between objects are level-triggered, as in Kubernetes and
// Service Catalog: an instance may name a class or plan no broker offers
// yet, and a binding an instance not created yet. The catalog accepts such
// objects (the naming itself must be valid), the engine shows what is
// missing in their status, and resolves the reference once what it names
// appears (ResolveInstance, LinkBinding).

// Reasons Service Catalog v0.3.1 gave, in the Ready condition, for a
// reference that cannot be followed.
const (
	ReasonNonexistentServiceClass = "ReferencesNonexistentServiceClass"
	ReasonNonexistentServicePlan  = "ReferencesNonexistentServicePlan"
	ReasonDeletedServicePlan      = "ReferencesDeletedServicePlan"
	ReasonNonexistentInstance     = "ReferencesNonexistentInstance"
	ReasonNonexistentBroker       = "ReferencesNonexistentBroker"
)

// ReferenceError says that an object names another that does not exist
// (yet). Reason and Message are what Service Catalog wrote in the object's
// Ready condition.
type ReferenceError struct {
	Reason  string
	Message string
	// field is the spec field that names what is missing; refused, when
	// not empty, is why a new object naming it is refused rather than
	// accepted to wait (the catalog knows it will not come as named).
	field   string
	refused string
}

func (e *ReferenceError) Error() string { return e.Message }

// detail is how a field error words the reference.
func (e *ReferenceError) detail() string {
	if e.refused != "" {
		return e.refused
	}
	return e.Message
}

// AsReference finds a *ReferenceError in err's chain.
func AsReference(err error) (*ReferenceError, bool) {
	var r *ReferenceError
	ok := errors.As(err, &r)
	return r, ok
}

// planNaming is how an instance spec names its class and plan: the two
// fields of one of Service Catalog's six ways (three for the cluster's
// classes, three for its own namespace's).
type planNaming struct {
	classField, planField string
	classVal, planVal     string
	classWhere, planWhere string
	byName                bool
	// namespace is where the class and plan are: "" for the cluster's,
	// the instance's for the namespaced ones.
	namespace string
	// visibleTo is the instance's namespace: a cluster plan hidden from it
	// (its annotation VisibleInAnnotation) is, to it, a plan that does not
	// exist.
	visibleTo string
}

// classKind and planKind are the kinds the naming refers to, as messages
// name them.
func (n planNaming) classKind() string {
	return scoped(&Meta{Namespace: n.namespace}, KindServiceClass, KindNamespacedServiceClass)
}

func (n planNaming) planKind() string {
	return scoped(&Meta{Namespace: n.namespace}, KindServicePlan, KindNamespacedServicePlan)
}

// naming checks that the spec of an instance in namespace names its class
// (and, if at all, its plan) in exactly one way, and says which.
func naming(spec *InstanceSpec, namespace string, path *field.Path) (planNaming, field.ErrorList) {
	ways := []planNaming{
		{"clusterServiceClassExternalName", "clusterServicePlanExternalName", spec.ClusterServiceClassExternalName, spec.ClusterServicePlanExternalName,
			"external_name = $1", "external_name = $2", false, "", namespace},
		{"clusterServiceClassExternalID", "clusterServicePlanExternalID", spec.ClusterServiceClassExternalID, spec.ClusterServicePlanExternalID,
			"external_id = $1", "external_id = $2", false, "", namespace},
		{"clusterServiceClassName", "clusterServicePlanName", spec.ClusterServiceClassName, spec.ClusterServicePlanName,
			"name = $1", "name = $2", true, "", namespace},
		{"serviceClassExternalName", "servicePlanExternalName", spec.ServiceClassExternalName, spec.ServicePlanExternalName,
			"external_name = $1", "external_name = $2", false, namespace, namespace},
		{"serviceClassExternalID", "servicePlanExternalID", spec.ServiceClassExternalID, spec.ServicePlanExternalID,
			"external_id = $1", "external_id = $2", false, namespace, namespace},
		{"serviceClassName", "servicePlanName", spec.ServiceClassName, spec.ServicePlanName,
			"name = $1", "name = $2", true, namespace, namespace},
	}
	var chosen []planNaming
	for _, w := range ways {
		if w.classVal != "" || w.planVal != "" {
			chosen = append(chosen, w)
		}
	}
	if len(chosen) != 1 {
		return planNaming{}, field.ErrorList{bad(path, "name the class and the plan in exactly one way: clusterServiceClassExternalName and clusterServicePlanExternalName, "+
			"clusterServiceClassExternalID and clusterServicePlanExternalID, or clusterServiceClassName and clusterServicePlanName for the cluster's; "+
			"serviceClassExternalName and servicePlanExternalName, serviceClassExternalID and servicePlanExternalID, or serviceClassName and servicePlanName for the namespace's")}
	}
	n := chosen[0]
	if n.classVal == "" {
		// A plan may be left out (the class's only plan is chosen), a
		// class never.
		return n, field.ErrorList{field.Required(path.Child(n.classField), "")}
	}
	return n, nil
}

// newNaming is naming for a new instance, which may also not name a class
// or plan past what any can be named: an object name past Kubernetes'
// bound, an external name or id past the bound a broker's catalogue is
// read to (osb.MaxCatalogID). Such an instance would otherwise be recorded
// to wait for what cannot come.
func newNaming(spec *InstanceSpec, namespace string, path *field.Path) (planNaming, field.ErrorList) {
	n, errs := naming(spec, namespace, path)
	if len(errs) > 0 {
		return n, errs
	}
	return n, n.bounds(path)
}

func (n planNaming) bounds(path *field.Path) field.ErrorList {
	limit, what := osb.MaxCatalogID, "no broker's catalogue can hold a longer one"
	if n.byName {
		limit, what = validation.DNS1123SubdomainMaxLength, "no object's name is longer"
	}
	var errs field.ErrorList
	for _, f := range []struct{ name, v string }{{n.classField, n.classVal}, {n.planField, n.planVal}} {
		if len(f.v) > limit {
			errs = append(errs, bad(path.Child(f.name), fmt.Sprintf("must be at most %d bytes: %s", limit, what)))
		}
	}
	return errs
}

// setPlanName names plan in the spec in the naming's way.
func (n planNaming) setPlanName(spec *InstanceSpec, plan *ServicePlan) {
	switch n.planField {
	case "clusterServicePlanExternalName":
		spec.ClusterServicePlanExternalName = plan.Spec.ExternalName
	case "clusterServicePlanExternalID":
		spec.ClusterServicePlanExternalID = plan.Spec.ExternalID
	case "clusterServicePlanName":
		spec.ClusterServicePlanName = plan.Name
	case "servicePlanExternalName":
		spec.ServicePlanExternalName = plan.Spec.ExternalName
	case "servicePlanExternalID":
		spec.ServicePlanExternalID = plan.Spec.ExternalID
	default:
		spec.ServicePlanName = plan.Name
	}
}

// setRefs records in spec the class and plan its names resolve to, in the
// Cluster… references or the namespaced ones.
func setRefs(spec *InstanceSpec, class *ServiceClass, plan *ServicePlan) {
	clearRefs(spec)
	if class.Namespace != "" {
		spec.ServiceClassRef, spec.ServicePlanRef = &ObjectRef{Name: class.Name}, &ObjectRef{Name: plan.Name}
		return
	}
	spec.ClusterServiceClassRef, spec.ClusterServicePlanRef = &ObjectRef{Name: class.Name}, &ObjectRef{Name: plan.Name}
}

// clearRefs forgets what a spec's names resolved to.
func clearRefs(spec *InstanceSpec) {
	spec.ClusterServiceClassRef, spec.ClusterServicePlanRef = nil, nil
	spec.ServiceClassRef, spec.ServicePlanRef = nil, nil
}

// Refs is what an instance's class and plan resolved to (nil when not
// yet) and the namespace they are in ("" for the cluster's).
func (in *Instance) Refs() (class, plan *ObjectRef, namespace string) {
	if in.Spec.ServiceClassRef != nil || in.Spec.ServicePlanRef != nil {
		return in.Spec.ServiceClassRef, in.Spec.ServicePlanRef, in.Namespace
	}
	return in.Spec.ClusterServiceClassRef, in.Spec.ClusterServicePlanRef, ""
}

// Resolved tells whether an instance's class and plan are resolved.
func (in *Instance) Resolved() bool {
	class, plan, _ := in.Refs()
	return class != nil && plan != nil
}

// resolvedPlan reads the class and plan an instance resolved to.
func resolvedPlan(ctx context.Context, q querier, in *Instance) (*ServiceClass, *ServicePlan, error) {
	classRef, planRef, ns := in.Refs()
	plan, err := getBy[ServicePlan](ctx, q, `namespace = $1 AND name = $2`, ns, refName(planRef))
	if err != nil {
		return nil, nil, err
	}
	class, err := getBy[ServiceClass](ctx, q, `namespace = $1 AND name = $2`, ns, refName(classRef))
	if err != nil {
		return nil, nil, err
	}
	return class, plan, nil
}

// describe writes the fields of spec that name the class ('c'), the plan
// ('b') or both ('v'), as Service Catalog's PlanReference formats itself
// in its messages: {ClusterServiceClassExternalName:"db"}.
func describe(spec *InstanceSpec, verb byte) string {
	var class, plan []string
	add := func(to *[]string, name, v string) {
		if v != "" {
			*to = append(*to, fmt.Sprintf("%s:%q", name, v))
		}
	}
	add(&class, "ClusterServiceClassExternalName", spec.ClusterServiceClassExternalName)
	add(&class, "ClusterServiceClassExternalID", spec.ClusterServiceClassExternalID)
	add(&class, "ClusterServiceClassName", spec.ClusterServiceClassName)
	add(&class, "ServiceClassExternalName", spec.ServiceClassExternalName)
	add(&class, "ServiceClassExternalID", spec.ServiceClassExternalID)
	add(&class, "ServiceClassName", spec.ServiceClassName)
	add(&plan, "ClusterServicePlanExternalName", spec.ClusterServicePlanExternalName)
	add(&plan, "ClusterServicePlanExternalID", spec.ClusterServicePlanExternalID)
	add(&plan, "ClusterServicePlanName", spec.ClusterServicePlanName)
	add(&plan, "ServicePlanExternalName", spec.ServicePlanExternalName)
	add(&plan, "ServicePlanExternalID", spec.ServicePlanExternalID)
	add(&plan, "ServicePlanName", spec.ServicePlanName)
	switch verb {
	case 'c':
		return "{" + strings.Join(class, ", ") + "}"
	case 'b':
		return "{" + strings.Join(plan, ", ") + "}"
	}
	return "{" + strings.Join(append(class, plan...), ", ") + "}"
}

// lookupPlan finds the class and plan a spec names (its naming checked),
// among those brokers offer now. When the spec names no plan and the class
// has exactly one, that plan is chosen and named in the spec, in the
// spec's way, as Service Catalog's admission did. What is not offered
// comes back as a *ReferenceError.
func lookupPlan(ctx context.Context, q querier, spec *InstanceSpec, n planNaming) (*ServiceClass, *ServicePlan, error) {
	rows, err := q.Query(ctx, `SELECT `+columns(KindServiceClass)+` FROM catalog.service_classes WHERE `+n.classWhere+` AND namespace = $2 AND NOT removed`, n.classVal, n.namespace)
	if err != nil {
		return nil, nil, mapErr(err)
	}
	classes, err := collect[ServiceClass](rows)
	if err != nil {
		return nil, nil, err
	}
	if len(classes) != 1 {
		msg := "References a non-existent " + n.classKind() + " " + describe(spec, 'c')
		if !n.byName {
			msg += fmt.Sprintf(" or there is more than one (found: %d)", len(classes))
		}
		return nil, nil, &ReferenceError{Reason: ReasonNonexistentServiceClass, field: n.classField,
			Message: "The instance references a " + n.classKind() + " that does not exist. " + msg}
	}
	class := classes[0]
	if n.planVal == "" {
		rows, err := q.Query(ctx, `SELECT `+columns(KindServicePlan)+` FROM catalog.service_plans
			WHERE class_id = $1 AND NOT removed AND catalog.plan_visible(metadata, ARRAY[$2]) ORDER BY position`, class.ID, n.visibleTo)
		if err != nil {
			return nil, nil, mapErr(err)
		}
		plans, err := collect[ServicePlan](rows)
		if err != nil {
			return nil, nil, err
		}
		if len(plans) != 1 {
			msg := fmt.Sprintf("%s (K8S: %v ExternalName: %v) has more than one plan, PlanName must be specified", n.classKind(), class.Name, class.Spec.ExternalName)
			if len(plans) == 0 {
				msg = fmt.Sprintf("no %ss found at all for %s %q", n.planKind(), n.classKind(), class.Spec.ExternalName)
			}
			return nil, nil, &ReferenceError{Reason: ReasonNonexistentServicePlan, Message: msg, field: n.planField,
				refused: fmt.Sprintf("service class %q has %d plans: name one", class.Spec.ExternalName, len(plans))}
		}
		plan := plans[0]
		n.setPlanName(spec, plan)
		return class, plan, nil
	}
	// Plans of one class may share an external name: a broker that gave a
	// plan a new id leaves the old one, removed, while instances hold it.
	// The one offered is taken then, and a plan counts as removed only
	// when every plan of the name is.
	plan, err := getBy[ServicePlan](ctx, q, n.planWhere+` AND class_id = $1::uuid AND catalog.plan_visible(metadata, ARRAY[$3])
		ORDER BY removed, position, id LIMIT 1`, class.ID, n.planVal, n.visibleTo)
	if errors.Is(err, ErrNotFound) {
		msg := "References a non-existent " + n.planKind() + " " + describe(spec, 'v')
		if !n.byName {
			msg = fmt.Sprintf("References a non-existent %s %s on %s %s %s or there is more than one (found: 0)",
				n.planKind(), describe(spec, 'b'), n.classKind(), class.Name, describe(spec, 'c'))
		}
		return nil, nil, &ReferenceError{Reason: ReasonNonexistentServicePlan, field: n.planField,
			Message: "The instance references a " + n.planKind() + " that does not exist. " + msg}
	}
	if err != nil {
		return nil, nil, err
	}
	if plan.Status.RemovedFromBrokerCatalog {
		return nil, nil, &ReferenceError{Reason: ReasonDeletedServicePlan, field: n.planField,
			Message: fmt.Sprintf("%s (K8S: %q ExternalName: %q) has been deleted; cannot provision.", n.planKind(), plan.Name, plan.Spec.ExternalName),
			refused: fmt.Sprintf("plan %q was removed from the broker's catalog: new instances of it are refused", plan.Spec.ExternalName)}
	}
	return class, plan, nil
}

// collect reads rows of a kind's columns.
func collect[T any, P interface {
	*T
	object
}](rows pgx.Rows) ([]P, error) {
	defer rows.Close()
	var out []P
	for rows.Next() {
		obj := P(new(T))
		if err := scanInto(rows, obj); err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
	return out, mapErr(rows.Err())
}

// resolveNew resolves the class and plan a new (or not yet resolved)
// instance names, filling in its references when they are offered. A
// reference to what is not offered yet is accepted and left unresolved
// (plan nil); one the catalog knows will not come as named (a removed
// plan, a class of several plans with none named) is a field error.
func resolveNew(ctx context.Context, q querier, spec *InstanceSpec, namespace string, path *field.Path, errs *field.ErrorList) (*ServicePlan, error) {
	clearRefs(spec)
	n, nerrs := newNaming(spec, namespace, path)
	if len(nerrs) > 0 {
		*errs = append(*errs, nerrs...)
		return nil, nil
	}
	class, plan, err := lookupPlan(ctx, q, spec, n)
	if r, ok := AsReference(err); ok {
		if r.refused != "" {
			*errs = append(*errs, bad(path.Child(r.field), r.detail()))
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	setRefs(spec, class, plan)
	return plan, nil
}

// ResolveInstance resolves the class and plan of an instance that was
// recorded before they were offered, once they are: its references (and
// the plan, when the spec named none and the class has one) are filled in,
// without a new generation. What is still missing comes back as a
// *ReferenceError, and nothing is written. Parameters that do not match
// the plan's schema come back as a *ValidationError after the references
// are recorded. An instance already resolved is returned as it is.
func (s *Store) ResolveInstance(ctx context.Context, id string) (*Instance, error) {
	var out *Instance
	var paramsErr error
	_, err := s.write(ctx, func(w *txn) error {
		in, err := getBy[Instance](ctx, w, `id = $1 FOR NO KEY UPDATE`, id)
		if err != nil {
			return err
		}
		out = in
		if in.Resolved() {
			return nil
		}
		n, errs := naming(&in.Spec, in.Namespace, field.NewPath("spec"))
		if len(errs) > 0 {
			return invalid(errs)
		}
		class, plan, err := lookupPlan(ctx, w, &in.Spec, n)
		if err != nil {
			return err
		}
		setRefs(&in.Spec, class, plan)
		checkParameters(plan, "instance create", plan.Spec.InstanceCreateParameterSchema, in.Spec.Parameters, field.NewPath("spec", "parameters"), &errs)
		paramsErr = invalid(errs)
		// The plan's quota (its instances, paid plans), with the update: an
		// instance refused waits, unresolved, for room.
		admitInstance(w, in.Namespace, plan, false, &in.ID)
		if _, err := w.Exec(ctx, `UPDATE catalog.instances SET spec = $2, plan_id = $3, class_id = $4 WHERE id = $1`,
			id, mustJSON(in.Spec), plan.ID, class.ID); err != nil {
			return mapErr(err)
		}
		if err := addEvent(ctx, w, KindInstance, id, "Normal", "ReferencesResolved",
			fmt.Sprintf("Service class %s and plan %s are offered by broker %s.", class.Spec.ExternalName, plan.Spec.ExternalName, class.Spec.BrokerName()), ""); err != nil {
			return err
		}
		w.changed(Modified, in)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, paramsErr
}

// UnresolvedInstances lists the instances whose class and plan are not
// resolved yet: a change to the catalogue may resolve them.
func (s *Store) UnresolvedInstances(ctx context.Context) ([]Key, error) {
	return s.queryKeys(ctx, `SELECT namespace, id FROM catalog.instances WHERE plan_id IS NULL`)
}

// nonexistentInstance is how Service Catalog said a binding's instance
// does not exist.
func nonexistentInstance(namespace, name string) *ReferenceError {
	return &ReferenceError{Reason: ReasonNonexistentInstance, field: "instanceRef",
		Message: fmt.Sprintf(`References a non-existent ServiceInstance "%s/%s"`, namespace, name)}
}

// LinkBinding returns the instance a binding belongs to, linking the
// binding to it first if the binding was recorded before the instance
// existed. An instance that does not exist, or is being deleted (a binding
// is not linked to that), comes back as a *ReferenceError.
func (s *Store) LinkBinding(ctx context.Context, id string) (*Instance, error) {
	var out *Instance
	_, err := s.write(ctx, func(w *txn) error {
		var namespace, name string
		var linked *string
		err := w.QueryRow(ctx, `SELECT namespace, spec->'instanceRef'->>'name', instance_id FROM catalog.bindings WHERE id = $1 FOR NO KEY UPDATE`, id).
			Scan(&namespace, &name, &linked)
		if err != nil {
			return mapErr(err)
		}
		if linked != nil {
			out, err = getBy[Instance](ctx, w, `id = $1`, *linked)
			return err
		}
		in, err := getBy[Instance](ctx, w, `namespace = $1 AND name = $2`, namespace, name)
		if errors.Is(err, ErrNotFound) {
			return nonexistentInstance(namespace, name)
		}
		if err != nil {
			return err
		}
		if in.DeletionTimestamp != nil {
			return &ReferenceError{Reason: ReasonNonexistentInstance, field: "instanceRef",
				Message: fmt.Sprintf(`References ServiceInstance "%s/%s", which is being deleted`, namespace, name)}
		}
		if _, err := w.Exec(ctx, `UPDATE catalog.bindings SET instance_id = $2 WHERE id = $1`, id, in.ID); err != nil {
			return mapErr(err)
		}
		out = in
		return nil
	})
	return out, err
}
