package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/bindery-dev/bindery/internal/osb"
)

// Status: the engine's half of each object. Users own spec, the engine
// owns status; the two are written separately, so neither overwrites the
// other. Finalisation removes what the engine is done with.

// ReasonWaitingForFinalizers: the engine has deprovisioned (or unbound) an
// object being deleted, and finalizers that are not Bindery's keep it.
const ReasonWaitingForFinalizers = "WaitingForFinalizers"

// AbandonAnnotation on an instance or a binding (value "true") makes its
// deletion skip the broker, also when set on an object already being
// deleted, whatever it waits for: for operators who know the broker is
// gone for good, or will never answer about this object. The Kubernetes
// API sets it when a client removes Bindery's finalizer.
const AbandonAnnotation = "bindery.dev/abandon"

// CascadeAnnotation on an instance (value "true") makes its deletion
// delete its bindings first instead of waiting for them. The Kubernetes
// API sets it on a delete with propagationPolicy Foreground.
const CascadeAnnotation = "bindery.dev/cascade-delete"

// Abandoned reports whether the object's deletion skips the broker
// (AbandonAnnotation).
func Abandoned(m *Meta) bool { return m.Annotations[AbandonAnnotation] == "true" }

// Released reports whether the engine is done with an object being
// deleted, so only its other finalizers keep it.
func Released(obj any) bool {
	switch o := obj.(type) {
	case *Instance:
		return o.DeletionTimestamp != nil && o.Status.DeprovisionStatus == DeprovisionSucceeded && !o.Status.AsyncOpInProgress &&
			FindConditionReason(o.Status.Conditions, ConditionReady) == ReasonWaitingForFinalizers
	case *Binding:
		return o.DeletionTimestamp != nil && o.Status.UnbindStatus == UnbindSucceeded && !o.Status.AsyncOpInProgress &&
			FindConditionReason(o.Status.Conditions, ConditionReady) == ReasonWaitingForFinalizers
	}
	return false
}

// FindConditionReason is the reason of the condition of the given type, or "".
func FindConditionReason(conds []Condition, typ string) string {
	c, _ := FindCondition(conds, typ)
	return c.Reason
}

// UpdateInstanceStatus lets fn change an instance's status (and only its
// status) and records it with the given events, in one transaction.
func (s *Store) UpdateInstanceStatus(ctx context.Context, id string, fn func(*Instance) error, events ...EventRecord) (*Instance, error) {
	return s.updateInstanceStatus(ctx, id, func(w *txn) (*Instance, error) {
		return getBy[Instance](ctx, w, `id = $1 FOR NO KEY UPDATE`, id)
	}, fn, events...)
}

// UpdateInstanceStatusFrom is UpdateInstanceStatus for a caller that holds
// the instance as stored at its resourceVersion (in, which it leaves as
// it is): fn changes a copy, and the write checks in its one round trip
// that the row is still at that revision, instead of reading it first.
// An instance changed since is written as UpdateInstanceStatus does.
func (s *Store) UpdateInstanceStatusFrom(ctx context.Context, in *Instance, fn func(*Instance) error, events ...EventRecord) (*Instance, error) {
	out, err := s.updateInstanceStatus(ctx, in.ID, func(w *txn) (*Instance, error) {
		w.queue(movedErr, `SELECT catalog.lock_instance_at($1, $2)`, in.ID, in.ResourceVersion)
		cp := *in
		// Recording may set the spec's labels in the copy's metadata.
		cp.Labels, cp.Annotations = maps.Clone(in.Labels), maps.Clone(in.Annotations)
		cp.Status = InstanceStatus{}
		if err := json.Unmarshal(mustJSON(in.Status), &cp.Status); err != nil {
			return nil, err
		}
		w.read(&cp)
		return &cp, nil
	}, fn, events...)
	if errors.Is(err, errMoved) {
		return s.UpdateInstanceStatus(ctx, in.ID, fn, events...)
	}
	return out, err
}

// errMoved: the row is no longer at the revision a write from a copy
// expected (catalog.lock_instance_at, lock_binding_at).
var errMoved = errors.New("the object changed since it was read")

const movedCode = "BDS01"

func movedErr(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == movedCode {
		return errMoved
	}
	return mapErr(err)
}

// updateInstanceStatus is UpdateInstanceStatus with the instance, locked,
// from get.
func (s *Store) updateInstanceStatus(ctx context.Context, id string, get func(*txn) (*Instance, error), fn func(*Instance) error, events ...EventRecord) (*Instance, error) {
	var out *Instance
	_, err := s.write(ctx, func(w *txn) error {
		in, err := get(w)
		if err != nil {
			return err
		}
		before := mustJSON(in.Status)
		if err := fn(in); err != nil {
			return err
		}
		if err := boundInstanceStatus(&in.Status); err != nil {
			return err
		}
		for _, e := range events {
			if err := addEvent(ctx, w, KindInstance, id, e.Type, e.Reason, e.Message, e.Operation); err != nil {
				return err
			}
		}
		out = in
		after := mustJSON(in.Status)
		if string(before) == string(after) {
			return nil
		}
		w.changedStatus(in, after)
		return nil
	})
	return out, err
}

// FinalizeInstance removes an instance marked for deletion, once the engine
// has deprovisioned (or abandoned) it. An instance that still has bindings
// is kept.
func (s *Store) FinalizeInstance(ctx context.Context, id string, event EventRecord) error {
	_, err := s.write(ctx, func(w *txn) error {
		in, err := getBy[Instance](ctx, w, `id = $1 FOR NO KEY UPDATE`, id)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if in.DeletionTimestamp == nil {
			return unprocessablef("Instance %s/%s is not being deleted.", in.Namespace, in.Name)
		}
		if err := addEvent(ctx, w, KindInstance, id, event.Type, event.Reason, event.Message, event.Operation); err != nil {
			return err
		}
		if len(in.Finalizers) > 0 {
			// Other finalizers (a user's, another controller's) keep the
			// object until they are removed: the engine's part is done.
			if in.Status.DeprovisionStatus == DeprovisionSucceeded {
				return nil
			}
			in.Status.DeprovisionStatus = DeprovisionSucceeded
			SetCondition(&in.Status.Conditions, Condition{Type: ConditionReady, Status: ConditionFalse, Reason: ReasonWaitingForFinalizers,
				Message: "Deprovisioned; waiting for finalizers " + fmt.Sprint(in.Finalizers) + "."}, s.now().UTC())
			if _, err := w.Exec(ctx, `UPDATE catalog.instances SET status = $2 WHERE id = $1`, id, mustJSON(in.Status)); err != nil {
				return mapErr(err)
			}
			w.changed(Modified, in)
			return nil
		}
		// Bindings still linked to it were never bound (the engine waits
		// for bound ones to go, unless the instance is abandoned): they go
		// back to waiting for an instance of this name, as they would in
		// Kubernetes.
		if _, err := w.Exec(ctx, `UPDATE catalog.bindings SET instance_id = NULL WHERE instance_id = $1`, id); err != nil {
			return mapErr(err)
		}
		if _, err := w.Exec(ctx, `DELETE FROM catalog.instances WHERE id = $1`, id); err != nil {
			return mapErr(err)
		}
		w.changed(Deleted, in)
		return nil
	})
	return err
}

// UpdateBindingStatus lets fn change a binding's status; creds, when not
// nil, are stored (sealed) in the same transaction.
func (s *Store) UpdateBindingStatus(ctx context.Context, id string, fn func(*Binding) error, creds map[string]any, events ...EventRecord) (*Binding, error) {
	sealed, err := s.sealCredentials(id, creds)
	if err != nil {
		return nil, err
	}
	return s.updateBindingStatus(ctx, id, func(w *txn) (*Binding, error) {
		return getBy[Binding](ctx, w, `id = $1 FOR NO KEY UPDATE`, id)
	}, fn, sealed, events...)
}

// UpdateBindingStatusFrom is UpdateInstanceStatusFrom for a binding.
func (s *Store) UpdateBindingStatusFrom(ctx context.Context, b *Binding, fn func(*Binding) error, creds map[string]any, events ...EventRecord) (*Binding, error) {
	sealed, err := s.sealCredentials(b.ID, creds)
	if err != nil {
		return nil, err
	}
	out, err := s.updateBindingStatus(ctx, b.ID, func(w *txn) (*Binding, error) {
		w.queue(movedErr, `SELECT catalog.lock_binding_at($1, $2)`, b.ID, b.ResourceVersion)
		cp := *b
		cp.Labels, cp.Annotations = maps.Clone(b.Labels), maps.Clone(b.Annotations)
		cp.Status = BindingStatus{}
		if err := json.Unmarshal(mustJSON(b.Status), &cp.Status); err != nil {
			return nil, err
		}
		w.read(&cp)
		return &cp, nil
	}, fn, sealed, events...)
	if errors.Is(err, errMoved) {
		return s.UpdateBindingStatus(ctx, b.ID, fn, creds, events...)
	}
	return out, err
}

// sealCredentials seals a binding's credentials for storing (nil: none).
func (s *Store) sealCredentials(id string, creds map[string]any) ([]byte, error) {
	if creds == nil {
		return nil, nil
	}
	keys, err := s.keyring()
	if err != nil {
		return nil, err
	}
	raw := mustJSON(creds)
	if err := boundCredentials(raw); err != nil {
		return nil, err
	}
	return keys.Seal(raw, []byte("binding:"+id)), nil
}

// updateBindingStatus is UpdateBindingStatus with the binding, locked,
// from get, and its credentials sealed.
func (s *Store) updateBindingStatus(ctx context.Context, id string, get func(*txn) (*Binding, error), fn func(*Binding) error, sealed []byte, events ...EventRecord) (*Binding, error) {
	var out *Binding
	_, err := s.write(ctx, func(w *txn) error {
		b, err := get(w)
		if err != nil {
			return err
		}
		before := mustJSON(b.Status)
		if err := fn(b); err != nil {
			return err
		}
		if err := boundBindingStatus(&b.Status); err != nil {
			return err
		}
		if sealed != nil {
			w.queue(nil, `INSERT INTO catalog.binding_credentials (binding_id, sealed) VALUES ($1, $2)
				ON CONFLICT (binding_id) DO UPDATE SET sealed = excluded.sealed, updated_at = now()`, id, sealed)
		}
		for _, e := range events {
			if err := addEvent(ctx, w, KindBinding, id, e.Type, e.Reason, e.Message, e.Operation); err != nil {
				return err
			}
		}
		out = b
		after := mustJSON(b.Status)
		if string(before) == string(after) {
			return nil
		}
		w.changedStatus(b, after)
		return nil
	})
	return out, err
}

// FinalizeBinding removes a binding marked for deletion, with its
// credentials, once the engine has unbound it.
func (s *Store) FinalizeBinding(ctx context.Context, id string, event EventRecord) error {
	_, err := s.write(ctx, func(w *txn) error {
		b, err := getBy[Binding](ctx, w, `id = $1 FOR NO KEY UPDATE`, id)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if b.DeletionTimestamp == nil {
			return unprocessablef("Binding %s/%s is not being deleted.", b.Namespace, b.Name)
		}
		if err := addEvent(ctx, w, KindBinding, id, event.Type, event.Reason, event.Message, event.Operation); err != nil {
			return err
		}
		if len(b.Finalizers) > 0 {
			if b.Status.UnbindStatus == UnbindSucceeded {
				return nil
			}
			b.Status.UnbindStatus = UnbindSucceeded
			SetCondition(&b.Status.Conditions, Condition{Type: ConditionReady, Status: ConditionFalse, Reason: ReasonWaitingForFinalizers,
				Message: "Unbound; waiting for finalizers " + fmt.Sprint(b.Finalizers) + "."}, s.now().UTC())
			if _, err := w.Exec(ctx, `UPDATE catalog.bindings SET status = $2 WHERE id = $1`, id, mustJSON(b.Status)); err != nil {
				return mapErr(err)
			}
			w.changed(Modified, b)
			return nil
		}
		if _, err := w.Exec(ctx, `DELETE FROM catalog.bindings WHERE id = $1`, id); err != nil {
			return mapErr(err)
		}
		w.changed(Deleted, b)
		return nil
	})
	return err
}

// Unsettled lists the instances and bindings the engine has work for: not
// Ready for their generation, being deleted, or in the middle of an
// operation. The engine reconciles them at start.
func (s *Store) Unsettled(ctx context.Context) (instances, bindings []Key, err error) {
	const unsettled = ` WHERE deletion_timestamp IS NOT NULL
		OR (status->>'observedGeneration')::bigint IS DISTINCT FROM generation
		OR coalesce((status->>'asyncOpInProgress')::boolean, false)
		OR coalesce((status->>'orphanMitigationInProgress')::boolean, false)
		OR NOT coalesce((SELECT c->>'status' = 'True' FROM jsonb_array_elements(status->'conditions') c WHERE c->>'type' = 'Ready'), false)`
	read := func(table string) ([]Key, error) {
		return s.queryKeys(ctx, `SELECT namespace, id FROM `+table+unsettled)
	}
	if instances, err = read("catalog.instances"); err != nil {
		return nil, nil, err
	}
	bindings, err = read("catalog.bindings")
	return instances, bindings, err
}

// UpdateInstanceStatusAt is UpdateInstanceStatus for clients of the
// status subresource: expectRV, when not 0, must be the instance's
// resourceVersion.
func (s *Store) UpdateInstanceStatusAt(ctx context.Context, id string, expectRV int64, fn func(*Instance) error) (*Instance, error) {
	if !IsID(id) {
		return nil, ErrNotFound
	}
	return s.UpdateInstanceStatus(ctx, id, func(in *Instance) error {
		if expectRV != 0 && in.ResourceVersion != expectRV {
			return stale("instance", in.Namespace, in.Name)
		}
		// Clients that do not know the engine's backoff (the v1beta1
		// status has no retries) must not reset it by writing status.
		old := in.Status
		if err := fn(in); err != nil {
			return err
		}
		if in.Status.Retries == nil {
			in.Status.Retries = old.Retries
		}
		return invalid(clientInstanceStatus(&old, &in.Status))
	})
}

// UpdateBindingStatusAt is UpdateInstanceStatusAt for a binding.
func (s *Store) UpdateBindingStatusAt(ctx context.Context, id string, expectRV int64, fn func(*Binding) error) (*Binding, error) {
	if !IsID(id) {
		return nil, ErrNotFound
	}
	return s.UpdateBindingStatus(ctx, id, func(b *Binding) error {
		if expectRV != 0 && b.ResourceVersion != expectRV {
			return stale("binding", b.Namespace, b.Name)
		}
		old := b.Status
		if err := fn(b); err != nil {
			return err
		}
		if b.Status.Retries == nil {
			b.Status.Retries = old.Retries
		}
		return invalid(clientBindingStatus(&old, &b.Status))
	}, nil)
}

// clientInstanceStatus checks the values of a status a client of the
// status subresource wrote, as Service Catalog's validation did: its
// operation, provision and deprovision states, and conditions are among
// those the engine knows, and its generations are not negative. A value
// the client left as it was is not checked again.
func clientInstanceStatus(old, st *InstanceStatus) field.ErrorList {
	path := field.NewPath("status")
	errs := oneOf(path.Child("currentOperation"), st.CurrentOperation, old.CurrentOperation, "", OperationProvision, OperationUpdate, OperationDeprovision)
	errs = append(errs, oneOf(path.Child("provisionStatus"), st.ProvisionStatus, old.ProvisionStatus, "", ProvisionStatusProvisioned, ProvisionStatusNotProvisioned)...)
	errs = append(errs, oneOf(path.Child("deprovisionStatus"), st.DeprovisionStatus, old.DeprovisionStatus,
		DeprovisionNotRequired, DeprovisionRequired, DeprovisionSucceeded, DeprovisionFailed)...)
	if st.DashboardURL != old.DashboardURL && st.DashboardURL != "" {
		if p := osb.DashboardURLProblem(st.DashboardURL); p != "" {
			errs = append(errs, bad(path.Child("dashboardURL"), p))
		}
	}
	return append(errs, clientStatusCommon(path, st.Conditions, st.ObservedGeneration, st.ReconciledGeneration)...)
}

// clientBindingStatus is clientInstanceStatus for a binding.
func clientBindingStatus(old, st *BindingStatus) field.ErrorList {
	path := field.NewPath("status")
	errs := oneOf(path.Child("currentOperation"), st.CurrentOperation, old.CurrentOperation, "", OperationBind, OperationUnbind)
	errs = append(errs, oneOf(path.Child("unbindStatus"), st.UnbindStatus, old.UnbindStatus,
		UnbindNotRequired, UnbindRequired, UnbindSucceeded, UnbindFailed)...)
	return append(errs, clientStatusCommon(path, st.Conditions, st.ObservedGeneration, st.ReconciledGeneration)...)
}

// oneOf refuses v, changed from old, when it is none of valid.
func oneOf(path *field.Path, v, old string, valid ...string) field.ErrorList {
	if v == old || slices.Contains(valid, v) {
		return nil
	}
	return field.ErrorList{field.NotSupported(path, v, valid)}
}

// clientStatusCommon checks the conditions' types and states and the
// generations of a status.
func clientStatusCommon(path *field.Path, conds []Condition, observed, reconciled int64) field.ErrorList {
	var errs field.ErrorList
	for i, c := range conds {
		p := path.Child("conditions").Index(i)
		if c.Type == "" {
			errs = append(errs, field.Required(p.Child("type"), ""))
		}
		if c.Status != ConditionTrue && c.Status != ConditionFalse && c.Status != ConditionUnknown {
			errs = append(errs, field.NotSupported(p.Child("status"), c.Status, []string{ConditionTrue, ConditionFalse, ConditionUnknown}))
		}
	}
	if observed < 0 {
		errs = append(errs, bad(path.Child("observedGeneration"), "must not be negative"))
	}
	if reconciled < 0 {
		errs = append(errs, bad(path.Child("reconciledGeneration"), "must not be negative"))
	}
	return errs
}

// Retry is the engine's backoff for one operation of an object that keeps
// failing. It is kept in status, not in the engine's memory, so that every
// replica and a restarted engine wait as long, and so that the engine's own
// status writes (which wake the object up through the change feed) cannot
// cut the wait short.
type Retry struct {
	// Failures is how many attempts in a row failed.
	Failures int `json:"failures"`
	// Requests is what those failures cost the broker: each request of
	// a failed attempt (the attempt, its polls), twice when the attempt
	// was orphan-mitigated. The backoff doubles with each (Weight).
	Requests int `json:"requests,omitempty"`
	// NextAttempt is when the operation may be tried again.
	NextAttempt time.Time `json:"nextAttempt"`
	// Generation is the spec generation the failures were for: a user's
	// change to the spec makes a new generation, which starts afresh.
	Generation int64 `json:"generation"`
}

// Weight is the exponent of the backoff: Requests, or Failures in a status
// written before requests were counted.
func (r Retry) Weight() int {
	if r.Requests > 0 {
		return r.Requests
	}
	return r.Failures
}

// RetryFor is the backoff of operation op that applies to generation gen:
// none when the spec changed since the failures.
func RetryFor(retries map[string]Retry, op string, gen int64) (Retry, bool) {
	r, ok := retries[op]
	if !ok || r.Generation != gen {
		return Retry{}, false
	}
	return r, true
}
