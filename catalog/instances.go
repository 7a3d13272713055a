package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/bindery-dev/bindery/internal/params"
)

// DefaultNamespace is where objects go when a request names none.
const DefaultNamespace = "default"

// schemaCache keeps compiled plan schemas by plan id and schema kind, at
// the plan's newest resourceVersion: a plan its broker changed replaces
// its entry, and at most maxCachedSchemas are kept, so a broker that
// changes its plans at every fetch, or names new plans each time, does
// not grow the process.
type schemaCache struct {
	mu sync.Mutex
	m  map[string]cachedSchema
}

// cachedSchema is a plan's schema compiled at one of its resourceVersions.
type cachedSchema struct {
	rv     int64
	schema *params.Schema
}

// maxCachedSchemas bounds the compiled schemas kept: three kinds of schema
// for a catalogue's worth of plans.
const maxCachedSchemas = 1024

func (c *schemaCache) get(plan *ServicePlan, which string, raw json.RawMessage) (*params.Schema, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	key := plan.ID + "/" + which
	c.mu.Lock()
	e, ok := c.m[key]
	c.mu.Unlock()
	if ok && e.rv == plan.ResourceVersion {
		return e.schema, nil
	}
	s, err := params.Compile(raw, false)
	if err != nil {
		return nil, fmt.Errorf("plan %s has an invalid %s schema: %w", plan.Spec.ExternalName, which, err)
	}
	c.put(key, cachedSchema{rv: plan.ResourceVersion, schema: s})
	return s, nil
}

// put keeps e unless a newer version of the plan is kept already; when
// the cache is full, an arbitrary entry makes room.
func (c *schemaCache) put(key string, e cachedSchema) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]cachedSchema{}
	}
	if old, ok := c.m[key]; ok {
		if old.rv > e.rv {
			return
		}
	} else if len(c.m) >= maxCachedSchemas {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[key] = e
}

var schemas schemaCache

// checkParameters validates raw parameters against a plan schema.
func checkParameters(plan *ServicePlan, which string, schema json.RawMessage, raw json.RawMessage, path *field.Path, errs *field.ErrorList) {
	p, err := params.Decode(raw)
	if err != nil {
		*errs = append(*errs, bad(path, err.Error()))
		return
	}
	s, err := schemas.get(plan, which, schema)
	if err != nil {
		*errs = append(*errs, bad(path, err.Error()))
		return
	}
	for _, msg := range s.Validate(path.String(), p) {
		at, text, _ := cutPath(msg)
		// The schema's paths go below the field: spec.parameters/a/0
		// becomes spec.parameters.a.0.
		*errs = append(*errs, &field.Error{Type: field.ErrorTypeInvalid, Field: strings.ReplaceAll(at, "/", "."), BadValue: field.OmitValueType{}, Detail: text})
	}
}

func cutPath(msg string) (string, string, bool) {
	for i := 0; i+1 < len(msg); i++ {
		if msg[i] == ':' && msg[i+1] == ' ' {
			return msg[:i], msg[i+2:], true
		}
	}
	return "", msg, false
}

// defaultInstance fills in what a new instance may leave out: its
// namespace.
func defaultInstance(in *Instance) {
	if in.Namespace == "" {
		in.Namespace = DefaultNamespace
	}
}

// validateNewInstance defaults and checks a new instance — name,
// namespace, how it names its class and plan, parameters — and fills in
// the references its plan resolves to when the plan is offered. A class or
// plan not offered yet is no error: the instance waits for it (plan nil).
// It returns every problem at once.
func (s *Store) validateNewInstance(ctx context.Context, r *catalogueReader, in *Instance) (*ServicePlan, error) {
	defaultInstance(in)
	errs := validateName(field.NewPath("name"), in.Name)
	errs = append(errs, validateNamespace(field.NewPath("namespace"), in.Namespace)...)
	errs = append(errs, validateMeta(&in.Meta)...)
	unstorable := validateStorable(&in.Spec)
	errs = append(errs, unstorable...)
	errs = append(errs, validateParametersFrom(in.Spec.ParametersFrom)...)
	errs = append(errs, validateCounter(field.NewPath("spec", "updateRequests"), in.Spec.UpdateRequests, 0)...)
	errs = append(errs, validateExternalID(in.Spec.ExternalID)...)
	if len(unstorable) > 0 {
		// The names of its class and plan may be ones the database
		// cannot be asked for.
		return nil, invalid(errs)
	}
	plan, err := r.resolveNew(ctx, &in.Spec, in.Namespace, field.NewPath("spec"), &errs)
	if err != nil {
		return nil, err
	}
	if plan != nil {
		checkParameters(plan, "instance create", plan.Spec.InstanceCreateParameterSchema, in.Spec.Parameters, field.NewPath("spec", "parameters"), &errs)
	}
	return plan, invalid(errs)
}

// CreateInstance records a new instance: the desired state the engine then
// provisions. Its class and plan need not be offered yet (the engine waits
// for them), but a plan that is must not have been removed, and the
// parameters must match its schema; the name must be free in the
// namespace. Bindings recorded before the instance are linked to it.
func (s *Store) CreateInstance(ctx context.Context, in *Instance) (*Instance, error) {
	err := s.createWithCatalogue(ctx, func(r *catalogueReader) error {
		return s.createInstance(ctx, r, in)
	})
	if err != nil {
		return nil, err
	}
	s.warnUnresolved(ctx, in)
	return in, nil
}

// createInstance is CreateInstance, its class and plan resolved by r. With
// them kept by the store, it is one round trip: BEGIN, the check of the
// catalogue's version, the rows and COMMIT.
func (s *Store) createInstance(ctx context.Context, r *catalogueReader, in *Instance) error {
	_, err := s.write(ctx, func(w *txn) error {
		r.q = w
		plan, err := s.validateNewInstance(ctx, r, in)
		if err != nil {
			return err
		}
		r.check(w)
		admitInstance(w, in.Namespace, plan, true, nil)
		var planID *string
		if plan != nil {
			planID = &plan.ID
		}
		if in.ID == "" {
			in.ID = uuid.NewString()
		}
		if in.Spec.ExternalID == "" {
			in.Spec.ExternalID = uuid.NewString()
		}
		now := s.now().UTC()
		in.Generation, in.CreationTimestamp, in.DeletionTimestamp = 1, now, nil
		// No condition yet, as Service Catalog recorded it: the engine's
		// first look writes Ready, which stays the first condition.
		in.Status = InstanceStatus{DeprovisionStatus: DeprovisionNotRequired}
		setSpecLabels(in)
		md, err := encodeMeta(&in.Meta)
		if err != nil {
			return err
		}
		// The rest goes with the commit (txn.queue): a name taken shows
		// there. The row goes in with the transaction's revision.
		rev := w.probedRevision("catalog.instances", in.Namespace, in.Name)
		w.insertedWithRevision(in.ID)
		classRef, _, classNS := in.Refs()
		// The bindings recorded before the instance are linked to it in
		// the same statement.
		insertCreated(w, func(err error) error {
			var fc *FieldConflictError
			if err := mapErr(err); errors.As(err, &fc) {
				return err
			}
			if errors.Is(mapErr(err), ErrConflict) {
				return nameTaken("instance", in.Name, in.Namespace)
			}
			return mapErr(err)
		}, KindInstance, in.ID, "Desired state recorded.", `created AS (INSERT INTO catalog.instances (id, namespace, name, class_id, plan_id, metadata, spec, status, generation, resource_version, created_at)
				VALUES ($1, $2, $3, `+classOfRef(9)+`, $4, $5, $6, $7, 1, `+rev+`, $8)),
			linked AS (UPDATE catalog.bindings SET instance_id = $1
				WHERE instance_id IS NULL AND namespace = $2 AND spec->'instanceRef'->>'name' = $3)`,
			in.ID, in.Namespace, in.Name, planID, md, mustJSON(in.Spec), mustJSON(in.Status), now, classNS, refName(classRef))
		w.changed(Added, in)
		return nil
	})
	return err
}

// GetInstance reads an instance by id.
func (s *Store) GetInstance(ctx context.Context, id string) (*Instance, error) {
	if !IsID(id) {
		return nil, ErrNotFound
	}
	return getBy[Instance](ctx, s.pool, `id = $1`, id)
}

// GetInstanceByName reads an instance by namespace and name.
func (s *Store) GetInstanceByName(ctx context.Context, namespace, name string) (*Instance, error) {
	return getBy[Instance](ctx, s.pool, `namespace = $1 AND name = $2`, namespace, name)
}

// ListInstances lists instances by namespace and name.
func (s *Store) ListInstances(ctx context.Context, opts ListOptions) (List[*Instance], error) {
	f := &filter{}
	if opts.Namespace != "" {
		f.add("namespace = ?", opts.Namespace)
	}
	if len(opts.Namespaces) > 0 {
		f.add("namespace = ANY(?)", opts.Namespaces)
	}
	return list[Instance](ctx, s.pool, f, "namespace, name",
		func(f *filter, c cursor) { f.add("(namespace, name) > (?, ?)", c.Namespace, c.Name) },
		func(i *Instance) cursor { return cursor{Namespace: i.Namespace, Name: i.Name} }, opts)
}

// UpdateInstance changes an instance's desired state: parameters, plan,
// labels. A plan change needs an updatable plan; new parameters must match
// the plan's update schema. expectRV, when not 0, must be the instance's
// resourceVersion.
func (s *Store) UpdateInstance(ctx context.Context, id string, expectRV int64, update func(*Instance) error) (*Instance, error) {
	out, err := s.updateInstance(ctx, id, expectRV, update)
	if err == nil && out != nil {
		s.warnUnresolved(ctx, out)
	}
	return out, err
}

// updateInstance is UpdateInstance without its warnings.
func (s *Store) updateInstance(ctx context.Context, id string, expectRV int64, update func(*Instance) error) (*Instance, error) {
	if !IsID(id) {
		return nil, ErrNotFound
	}
	var out *Instance
	_, err := s.write(ctx, func(w *txn) error {
		in, err := getBy[Instance](ctx, w, `id = $1 FOR NO KEY UPDATE`, id)
		if err != nil {
			return err
		}
		if expectRV != 0 && in.ResourceVersion != expectRV {
			return stale("instance", in.Namespace, in.Name)
		}
		if in.DeletionTimestamp != nil {
			return unprocessablef("Instance %s/%s is being deleted: it cannot be changed any more.", in.Namespace, in.Name)
		}
		before := in.Spec
		name, ns := in.Name, in.Namespace
		metaBefore, err := encodeMeta(&in.Meta)
		if err != nil {
			return err
		}
		if err := update(in); err != nil {
			return err
		}
		was := &Instance{Meta: Meta{Namespace: ns, Name: name}, Spec: before}
		plan, err := validateInstanceUpdate(ctx, w, was, in)
		if err != nil {
			return err
		}
		planChanged := !sameNames(&in.Spec, &before)
		setSpecLabels(in)
		md, err := encodeMeta(&in.Meta)
		if err != nil {
			return err
		}
		if sameJSON(in.Spec, before) && string(md) == string(metaBefore) {
			out = in // nothing changed: no write, no new resourceVersion
			return nil
		}
		// References resolved on the way are not the user's change.
		userChanged := !sameJSON(withoutRefs(in.Spec), withoutRefs(before))
		if plan != nil && (!was.Resolved() || planChanged) {
			// A plan given to an instance, or another one: its quota, with
			// the update.
			admitInstance(w, ns, plan, false, &id)
		}
		if userChanged {
			in.Generation++
		}
		classRef, _, classNS := in.Refs()
		if _, err := w.Exec(ctx, `UPDATE catalog.instances SET metadata = $2, spec = $3, generation = $4,
			plan_id = $5, class_id = `+classOfRef(6)+` WHERE id = $1`,
			id, md, mustJSON(in.Spec), in.Generation, planIDOf(plan), classNS, refName(classRef)); err != nil {
			return mapErr(err)
		}
		if userChanged {
			if err := addEvent(ctx, w, KindInstance, id, "Normal", "Updated", fmt.Sprintf("Desired state changed (generation %d).", in.Generation), ""); err != nil {
				return err
			}
		}
		w.changed(Modified, in)
		out = in
		return nil
	})
	return out, err
}

// validateCounter checks a request counter at p (an instance's
// spec.updateRequests, a broker's spec.relistRequests), which only counts
// up (Service Catalog's rule): each increase asks for an update or a
// relist, so a count that went down, or below 0, asks for nothing.
func validateCounter(p *field.Path, n, was int64) field.ErrorList {
	switch {
	case n < 0:
		return field.ErrorList{bad(p, "must not be negative")}
	case n < was:
		return field.ErrorList{bad(p, fmt.Sprintf("must not be less than it was (%d): it only counts up", was))}
	}
	return nil
}

// validateInstanceUpdate checks the change from was to in (within a
// write) and resolves the plan in is then on: nil for an instance still
// waiting for its class and plan. It refuses what cannot change (name,
// namespace, externalID, the references Bindery resolves) and parameters
// the plan's schema does not accept, all problems in one error.
func validateInstanceUpdate(ctx context.Context, w *txn, was, in *Instance) (*ServicePlan, error) {
	var errs field.ErrorList
	if in.Name != was.Name {
		errs = append(errs, bad(field.NewPath("name"), "cannot be changed"))
	}
	if in.Namespace != was.Namespace {
		errs = append(errs, bad(field.NewPath("namespace"), "cannot be changed"))
	}
	errs = append(errs, validateMeta(&in.Meta)...)
	unstorable := validateStorable(&in.Spec)
	errs = append(errs, unstorable...)
	errs = append(errs, validateParametersFrom(in.Spec.ParametersFrom)...)
	errs = append(errs, validateCounter(field.NewPath("spec", "updateRequests"), in.Spec.UpdateRequests, was.Spec.UpdateRequests)...)
	if in.Spec.ExternalID != was.Spec.ExternalID {
		errs = append(errs, bad(field.NewPath("spec", "externalID"), "cannot be changed"))
	}
	if len(unstorable) > 0 {
		// As validateNewInstance: nothing is looked up by such names.
		return nil, invalid(errs)
	}
	planChanged := !sameNames(&in.Spec, &was.Spec)
	if !planChanged {
		keepResolvedRefs(in, was, &errs)
	}
	specPath := field.NewPath("spec")
	var plan *ServicePlan
	var err error
	switch {
	case !was.Resolved():
		// Recorded before its class and plan were offered: resolved now
		// if they are, else it goes on waiting for them. Nothing was
		// provisioned yet, so the parameters are those of a provision.
		if plan, err = resolveNew(ctx, w, &in.Spec, was.Namespace, specPath, &errs); err != nil {
			return nil, err
		}
		if plan != nil {
			checkParameters(plan, "instance create", plan.Spec.InstanceCreateParameterSchema, in.Spec.Parameters, specPath.Child("parameters"), &errs)
		}
	case planChanged:
		if plan, err = changePlan(ctx, w, was, in, &errs); err != nil {
			return nil, err
		}
	default:
		if _, plan, err = resolvedPlan(ctx, w, was); err != nil {
			return nil, err
		}
	}
	if plan != nil && was.Resolved() && !sameJSON(in.Spec.Parameters, was.Spec.Parameters) {
		checkParameters(plan, "instance update", plan.Spec.InstanceUpdateParameterSchema, in.Spec.Parameters, specPath.Child("parameters"), &errs)
	}
	return plan, invalid(errs)
}

// keepResolvedRefs keeps the references Bindery resolved from the names
// when the names stay: one left out of an update is kept, one changed is
// refused.
func keepResolvedRefs(in, was *Instance, errs *field.ErrorList) {
	specPath := field.NewPath("spec")
	for _, r := range []struct {
		field     *field.Path
		now, then *ObjectRef
	}{
		{specPath.Child("clusterServiceClassRef", "name"), in.Spec.ClusterServiceClassRef, was.Spec.ClusterServiceClassRef},
		{specPath.Child("clusterServicePlanRef", "name"), in.Spec.ClusterServicePlanRef, was.Spec.ClusterServicePlanRef},
		{specPath.Child("serviceClassRef", "name"), in.Spec.ServiceClassRef, was.Spec.ServiceClassRef},
		{specPath.Child("servicePlanRef", "name"), in.Spec.ServicePlanRef, was.Spec.ServicePlanRef},
	} {
		if r.now != nil && refName(r.now) != refName(r.then) {
			*errs = append(*errs, bad(r.field, "cannot be changed: Bindery resolves it from the class and plan named in the spec"))
		}
	}
	in.Spec.ClusterServiceClassRef, in.Spec.ClusterServicePlanRef = was.Spec.ClusterServiceClassRef, was.Spec.ClusterServicePlanRef
	in.Spec.ServiceClassRef, in.Spec.ServicePlanRef = was.Spec.ServiceClassRef, was.Spec.ServicePlanRef
}

// changePlan resolves the plan a provisioned instance moves to: one that
// is offered, in the same class, and only if the broker allows plan
// changes. A plan that cannot be resolved is a field problem in errs; the
// returned plan is nil then.
func changePlan(ctx context.Context, w *txn, was, in *Instance, errs *field.ErrorList) (*ServicePlan, error) {
	class, current, err := resolvedPlan(ctx, w, was)
	if err != nil {
		return nil, err
	}
	updatable := class.Spec.PlanUpdatable
	if current.Spec.PlanUpdatable != nil {
		updatable = *current.Spec.PlanUpdatable
	}
	specPath := field.NewPath("spec")
	n, nerrs := naming(&in.Spec, was.Namespace, specPath)
	*errs = append(*errs, nerrs...)
	if len(nerrs) > 0 {
		return nil, nil
	}
	newClass, newPlan, err := lookupPlan(ctx, w, &in.Spec, n)
	if r, ok := AsReference(err); ok {
		*errs = append(*errs, bad(specPath.Child(r.field), planChangeRefused(r, in)))
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	setRefs(&in.Spec, newClass, newPlan)
	if newPlan.ID != current.ID && !updatable {
		return nil, unprocessablef("The plan of instance %s/%s (%s) cannot be changed: its broker does not allow plan changes. Create a new instance with the other plan instead.", was.Namespace, was.Name, current.Spec.ExternalName)
	}
	if newClass.ID != class.ID {
		*errs = append(*errs, bad(specPath, "a plan change must stay within service class "+class.Spec.ExternalName))
	}
	return newPlan, nil
}

// withoutRefs is spec without the references Bindery resolves.
func withoutRefs(spec InstanceSpec) InstanceSpec {
	clearRefs(&spec)
	return spec
}

// sameNames tells whether two specs name the same class and plan the same
// way.
func sameNames(a, b *InstanceSpec) bool {
	return a.ClusterServiceClassExternalName == b.ClusterServiceClassExternalName &&
		a.ClusterServicePlanExternalName == b.ClusterServicePlanExternalName &&
		a.ClusterServiceClassExternalID == b.ClusterServiceClassExternalID &&
		a.ClusterServicePlanExternalID == b.ClusterServicePlanExternalID &&
		a.ClusterServiceClassName == b.ClusterServiceClassName &&
		a.ClusterServicePlanName == b.ClusterServicePlanName &&
		a.ServiceClassExternalName == b.ServiceClassExternalName &&
		a.ServicePlanExternalName == b.ServicePlanExternalName &&
		a.ServiceClassExternalID == b.ServiceClassExternalID &&
		a.ServicePlanExternalID == b.ServicePlanExternalID &&
		a.ServiceClassName == b.ServiceClassName &&
		a.ServicePlanName == b.ServicePlanName
}

// planIDOf is the plan's id, or nil for none.
// classOfRef is the id of the class an instance's spec refers to, its
// namespace and name the query's parameters n and n+1: NULL while the
// instance is unresolved. An instance's class is the one it was resolved
// to, not its plan's current one: a broker may move a plan to another
// service, and the instance's row must keep holding the class its spec
// names, or a relist deletes that class from under it (unheldClass).
func classOfRef(n int) string {
	return fmt.Sprintf("(SELECT c.id FROM catalog.service_classes c WHERE c.namespace = $%d AND c.name = $%d)", n, n+1)
}

func planIDOf(p *ServicePlan) *string {
	if p == nil {
		return nil
	}
	return &p.ID
}

func refName(r *ObjectRef) string {
	if r == nil {
		return ""
	}
	return r.Name
}

// DeleteInstance marks an instance for deletion; the engine deprovisions it
// (after its bindings are gone) and then removes it.
func (s *Store) DeleteInstance(ctx context.Context, id string) (*Instance, error) {
	return s.deleteInstance(ctx, id, false)
}

// DeleteInstanceCascading marks an instance for deletion as DeleteInstance
// does, and CascadeAnnotation on it in the same transaction, so its
// bindings are deleted first; it is the Kubernetes API's Foreground delete.
// An instance already being deleted gets the annotation.
func (s *Store) DeleteInstanceCascading(ctx context.Context, id string) (*Instance, error) {
	return s.deleteInstance(ctx, id, true)
}

func (s *Store) deleteInstance(ctx context.Context, id string, cascade bool) (*Instance, error) {
	if !IsID(id) {
		return nil, ErrNotFound
	}
	var out *Instance
	_, err := s.write(ctx, func(w *txn) error {
		in, err := getBy[Instance](ctx, w, `id = $1 FOR NO KEY UPDATE`, id)
		if err != nil {
			return err
		}
		if err := unchanged(ctx, "instance", &in.Meta); err != nil {
			return err
		}
		out = in
		mark := cascade && in.Annotations[CascadeAnnotation] != "true"
		if in.DeletionTimestamp != nil && !mark {
			return nil
		}
		var meta []byte // nil: the column as it is
		if mark {
			if meta, err = cascadeMeta(in); err != nil {
				return err
			}
		}
		deleting := in.DeletionTimestamp == nil
		if deleting {
			now := s.now().UTC()
			in.DeletionTimestamp = &now
		}
		if _, err := w.Exec(ctx, `UPDATE catalog.instances SET deletion_timestamp = $2, metadata = coalesce($3, metadata) WHERE id = $1`,
			id, in.DeletionTimestamp, meta); err != nil {
			return mapErr(err)
		}
		if deleting {
			if err := addEvent(ctx, w, KindInstance, id, "Normal", "DeletionRequested", "The instance will be deprovisioned.", ""); err != nil {
				return err
			}
		}
		w.changed(Modified, in)
		return nil
	})
	return out, err
}

// cascadeMeta puts CascadeAnnotation on the instance and returns its
// metadata column then.
func cascadeMeta(in *Instance) ([]byte, error) {
	in.Annotations = maps.Clone(in.Annotations)
	if in.Annotations == nil {
		in.Annotations = map[string]string{}
	}
	in.Annotations[CascadeAnnotation] = "true"
	if err := invalid(validateMeta(&in.Meta)); err != nil {
		return nil, err
	}
	return encodeMeta(&in.Meta)
}

// UpdateInstanceMeta changes an instance's labels, annotations, finalizers
// and Extra, and nothing else; it works while the instance is being
// deleted. expectRV, when not 0, must be the instance's resourceVersion.
// An update that changes nothing writes nothing.
func (s *Store) UpdateInstanceMeta(ctx context.Context, id string, expectRV int64, fn func(*Meta) error) (*Instance, error) {
	return updateMeta[Instance](ctx, s, id, expectRV, fn)
}

// CheckInstance is CreateInstance in a dry run (WithDryRun): every check
// a creation makes (name, namespace, plan, parameters, a free name, the
// namespace's quota), and nothing recorded. It fills in in as the
// creation would.
func (s *Store) CheckInstance(ctx context.Context, in *Instance) error {
	_, err := s.CreateInstance(WithDryRun(ctx), in)
	return err
}
