package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateNewBinding defaults and checks a new binding — name, namespace,
// secret name, an instance reference — and returns its instance when it
// exists: then the instance must not be being deleted and must have a
// bindable plan, and the predecessor of a rotation and the parameters are
// checked (checkBindingOf). An instance that does not exist yet is no
// error: the binding waits for it. Field problems are returned all at
// once.
func (s *Store) validateNewBinding(ctx context.Context, r *catalogueReader, b *Binding) (*Instance, error) {
	defaultBinding(b)
	errs := validateName(field.NewPath("name"), b.Name)
	errs = append(errs, validateNamespace(field.NewPath("namespace"), b.Namespace)...)
	errs = append(errs, validateMeta(&b.Meta)...)
	errs = append(errs, validateStorable(&b.Spec)...)
	errs = append(errs, validateParametersFrom(b.Spec.ParametersFrom)...)
	errs = append(errs, validateSecretTransforms(b.Spec.SecretTransforms, b.Namespace)...)
	errs = append(errs, validateExternalID(b.Spec.ExternalID)...)
	errs = append(errs, ownNamespace(field.NewPath("spec", "instanceRef", "namespace"), b.Spec.InstanceRef.Namespace, b.Namespace, "instance")...)
	instanceRef := field.NewPath("spec", "instanceRef", "name")
	refErrs := validateName(instanceRef, b.Spec.InstanceRef.Name)
	errs = append(errs, refErrs...)
	errs = append(errs, validateName(field.NewPath("spec", "secretName"), b.Spec.SecretName)...)
	if len(refErrs) > 0 {
		return nil, invalid(errs)
	}
	in, err := getBy[Instance](ctx, r.q, `namespace = $1 AND name = $2`, b.Namespace, b.Spec.InstanceRef.Name)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, invalid(errs)
	case err != nil:
		return nil, err
	case in.DeletionTimestamp != nil:
		return nil, unprocessablef("Instance %s/%s is being deleted: it cannot be bound any more.", in.Namespace, in.Name)
	}
	if err := checkBindingOf(ctx, r, b, in, true, &errs); err != nil {
		return nil, err
	}
	return in, invalid(errs)
}

// checkBindingOf checks a binding against its instance, once the
// instance's plan is resolved: the plan must be bindable (and, for a
// rotation, rotatable, the predecessor a binding of the same instance),
// the parameters must match the plan's binding schema. With fill, a
// rotation without parameters takes its predecessor's. State problems are
// returned (ErrUnprocessable), field problems added to errs.
func checkBindingOf(ctx context.Context, r *catalogueReader, b *Binding, in *Instance, fill bool, errs *field.ErrorList) error {
	if !in.Resolved() {
		// The instance waits for its plan: so does this check.
		return nil
	}
	class, plan, err := r.resolvedPlan(ctx, in)
	if err != nil {
		return err
	}
	return checkBindingAgainst(ctx, r.q, b, in, class, plan, fill, errs)
}

// checkBindingAgainst is checkBindingOf with the instance's class and plan
// at hand.
func checkBindingAgainst(ctx context.Context, q querier, b *Binding, in *Instance, class *ServiceClass, plan *ServicePlan, fill bool, errs *field.ErrorList) error {
	bindable := class.Spec.Bindable
	if plan.Spec.Bindable != nil {
		bindable = *plan.Spec.Bindable
	}
	if !bindable {
		return unprocessablef("Plan %s of service %s cannot be bound: its broker offers no credentials for it.", plan.Spec.ExternalName, class.Spec.ExternalName)
	}
	if ref := b.Spec.PredecessorBindingRef; ref != nil {
		if !plan.Spec.BindingRotatable {
			return unprocessablef("Bindings of plan %s cannot be rotated: its broker does not support it. Create a new binding instead.", plan.Spec.ExternalName)
		}
		pred, err := getBy[Binding](ctx, q, `namespace = $1 AND name = $2`, b.Namespace, ref.Name)
		switch {
		case errors.Is(err, ErrNotFound) || (err == nil && pred.Spec.InstanceRef.Name != in.Name):
			*errs = append(*errs, bad(field.NewPath("spec", "predecessorBindingRef", "name"), fmt.Sprintf("no binding %q of instance %q in namespace %q", ref.Name, in.Name, b.Namespace)))
		case err != nil:
			return err
		case pred.DeletionTimestamp != nil && fill:
			return unprocessablef("Binding %s/%s is being deleted and cannot be rotated.", b.Namespace, ref.Name)
		case len(b.Spec.Parameters) == 0 && fill:
			// A rotation keeps the predecessor's parameters unless it is given new ones.
			b.Spec.Parameters = pred.Spec.Parameters
		}
	}
	checkParameters(plan, "binding create", plan.Spec.ServiceBindingCreateParameterSchema, b.Spec.Parameters, field.NewPath("spec", "parameters"), errs)
	return nil
}

// CheckBindable checks a binding against its instance as its creation
// does when the instance exists (checkBindingOf), for the engine, before
// it binds: the binding may have been recorded before its instance, or
// before the instance's plan was resolved. A plan that is not bindable (or
// not rotatable) is ErrUnprocessable; parameters that do not match the
// plan's schema a *ValidationError. class and plan, when the caller has
// them (the engine caches them), are the instance's resolved class and
// plan; nil reads them.
func (s *Store) CheckBindable(ctx context.Context, b *Binding, in *Instance, class *ServiceClass, plan *ServicePlan) error {
	var errs field.ErrorList
	var err error
	if class != nil && plan != nil && in.Resolved() {
		err = checkBindingAgainst(ctx, s.pool, b, in, class, plan, false, &errs)
	} else {
		err = checkBindingOf(ctx, &catalogueReader{q: s.pool}, b, in, false, &errs)
	}
	if err != nil {
		return err
	}
	return invalid(errs)
}

// defaultBinding fills in what a new binding may leave out: its namespace,
// and its Secret's name (the binding's).
func defaultBinding(b *Binding) {
	if b.Namespace == "" {
		b.Namespace = DefaultNamespace
	}
	if b.Spec.SecretName == "" {
		b.Spec.SecretName = b.Name
	}
}

// CreateBinding records a new binding of an instance in the same
// namespace: the desired state the engine then binds. The instance need
// not exist yet: the binding is linked to it when it is created.
func (s *Store) CreateBinding(ctx context.Context, b *Binding) (*Binding, error) {
	linked := false
	err := s.createWithCatalogue(ctx, func(r *catalogueReader) error {
		var err error
		linked, err = s.createBinding(ctx, r, b)
		return err
	})
	if err != nil {
		return nil, err
	}
	if !linked {
		warnNoInstance(ctx, b)
	}
	return b, nil
}

// createBinding is CreateBinding, the class and plan of its instance
// resolved by r. With them kept by the store, it is two round trips: BEGIN
// and the read of the instance; the check of the catalogue's version, the
// rows and COMMIT.
func (s *Store) createBinding(ctx context.Context, r *catalogueReader, b *Binding) (linked bool, err error) {
	_, err = s.write(ctx, func(w *txn) error {
		r.q = w
		in, err := s.validateNewBinding(ctx, r, b)
		if err != nil {
			return err
		}
		r.check(w)
		admitBinding(w, b.Namespace)
		if b.ID == "" {
			b.ID = uuid.NewString()
		}
		if b.Spec.ExternalID == "" {
			b.Spec.ExternalID = uuid.NewString()
		}
		now := s.now().UTC()
		b.Generation, b.CreationTimestamp, b.DeletionTimestamp = 1, now, nil
		// No condition yet, as for an instance.
		b.Status = BindingStatus{UnbindStatus: UnbindNotRequired}
		md, err := encodeMeta(&b.Meta)
		if err != nil {
			return err
		}
		var instanceID *string
		if in != nil {
			instanceID = &in.ID
		}
		linked = in != nil
		// With the commit (txn.queue): a name taken shows there. The row
		// goes in with the transaction's revision.
		rev := w.probedRevision("catalog.bindings", b.Namespace, b.Name)
		w.insertedWithRevision(b.ID)
		insertCreated(w, func(err error) error {
			var fc *FieldConflictError
			if err := mapErr(err); errors.As(err, &fc) {
				return err
			}
			if errors.Is(mapErr(err), ErrConflict) {
				return nameTaken("binding", b.Name, b.Namespace)
			}
			return mapErr(err)
		}, KindBinding, b.ID, "Desired state recorded.", `created AS (INSERT INTO catalog.bindings (id, namespace, name, instance_id, metadata, spec, status, generation, resource_version, created_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, 1, `+rev+`, $8))`,
			b.ID, b.Namespace, b.Name, instanceID, md, mustJSON(b.Spec), mustJSON(b.Status), now)
		w.changed(Added, b)
		return nil
	})
	return linked, err
}

// GetBinding reads a binding by id.
func (s *Store) GetBinding(ctx context.Context, id string) (*Binding, error) {
	if !IsID(id) {
		return nil, ErrNotFound
	}
	return getBy[Binding](ctx, s.pool, `id = $1`, id)
}

// GetBindingByName reads a binding by namespace and name.
func (s *Store) GetBindingByName(ctx context.Context, namespace, name string) (*Binding, error) {
	return getBy[Binding](ctx, s.pool, `namespace = $1 AND name = $2`, namespace, name)
}

// ListBindings lists bindings by namespace and name.
func (s *Store) ListBindings(ctx context.Context, opts ListOptions) (List[*Binding], error) {
	f := &filter{}
	if opts.Namespace != "" {
		f.add("namespace = ?", opts.Namespace)
	}
	if len(opts.Namespaces) > 0 {
		f.add("namespace = ANY(?)", opts.Namespaces)
	}
	return list[Binding](ctx, s.pool, f, "namespace, name",
		func(f *filter, c cursor) { f.add("(namespace, name) > (?, ?)", c.Namespace, c.Name) },
		func(b *Binding) cursor { return cursor{Namespace: b.Namespace, Name: b.Name} }, opts)
}

// DeleteBinding marks a binding for deletion; the engine unbinds it and
// then removes it.
func (s *Store) DeleteBinding(ctx context.Context, id string) (*Binding, error) {
	if !IsID(id) {
		return nil, ErrNotFound
	}
	var out *Binding
	_, err := s.write(ctx, func(w *txn) error {
		b, err := getBy[Binding](ctx, w, `id = $1 FOR NO KEY UPDATE`, id)
		if err != nil {
			return err
		}
		if err := unchanged(ctx, "binding", &b.Meta); err != nil {
			return err
		}
		out = b
		if b.DeletionTimestamp != nil {
			return nil
		}
		now := s.now().UTC()
		b.DeletionTimestamp = &now
		if _, err := w.Exec(ctx, `UPDATE catalog.bindings SET deletion_timestamp = $2 WHERE id = $1`, id, now); err != nil {
			return mapErr(err)
		}
		if err := addEvent(ctx, w, KindBinding, id, "Normal", "DeletionRequested", "The binding will be unbound.", ""); err != nil {
			return err
		}
		w.changed(Modified, b)
		return nil
	})
	return out, err
}

// ErrNoCredentials says a binding has no credentials (yet).
var ErrNoCredentials = errors.New("the binding has no credentials yet")

// Credentials returns a binding's credentials, decrypted.
func (s *Store) Credentials(ctx context.Context, bindingID string) (map[string]any, error) {
	if !IsID(bindingID) {
		return nil, ErrNotFound
	}
	var sealed []byte
	err := s.pool.QueryRow(ctx, `SELECT c.sealed FROM catalog.bindings b LEFT JOIN catalog.binding_credentials c ON c.binding_id = b.id
		WHERE b.id = $1`, bindingID).Scan(&sealed)
	if err != nil {
		return nil, mapErr(err)
	}
	if sealed == nil {
		return nil, ErrNoCredentials
	}
	keys, err := s.keyring()
	if err != nil {
		return nil, err
	}
	raw, err := keys.Open(sealed, []byte("binding:"+bindingID))
	if err != nil {
		return nil, fmt.Errorf("open credentials of binding %s: %w", bindingID, err)
	}
	var creds map[string]any
	if err := json.Unmarshal(raw, &creds); err != nil {
		return nil, err
	}
	return creds, nil
}

// SetCredentials stores a binding's credentials, sealed.
func (s *Store) SetCredentials(ctx context.Context, bindingID string, creds map[string]any) error {
	raw, err := json.Marshal(creds)
	if err != nil {
		return err
	}
	keys, err := s.keyring()
	if err != nil {
		return err
	}
	sealed := keys.Seal(raw, []byte("binding:"+bindingID))
	_, err = s.pool.Exec(ctx, `INSERT INTO catalog.binding_credentials (binding_id, sealed) VALUES ($1, $2)
		ON CONFLICT (binding_id) DO UPDATE SET sealed = excluded.sealed, updated_at = now()`, bindingID, sealed)
	return mapErr(err)
}

// BindingsOf lists the bindings of an instance.
func (s *Store) BindingsOf(ctx context.Context, instanceID string) ([]*Binding, error) {
	f := &filter{}
	f.add("instance_id = ?", instanceID)
	l, err := list[Binding](ctx, s.pool, f, "namespace, name", nil, nil, ListOptions{})
	return l.Items, err
}

// InstanceOf returns the instance a binding belongs to.
func (s *Store) InstanceOf(ctx context.Context, b *Binding) (*Instance, error) {
	return getBy[Instance](ctx, s.pool, `id = (SELECT instance_id FROM catalog.bindings WHERE id = $1)`, b.ID)
}

// UpdateBindingMeta is UpdateInstanceMeta for a binding.
func (s *Store) UpdateBindingMeta(ctx context.Context, id string, expectRV int64, fn func(*Meta) error) (*Binding, error) {
	return updateMeta[Binding](ctx, s, id, expectRV, fn)
}

// CheckBinding is CheckInstance for a binding.
func (s *Store) CheckBinding(ctx context.Context, b *Binding) error {
	_, err := s.CreateBinding(WithDryRun(ctx), b)
	return err
}
