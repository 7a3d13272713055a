package catalog

import (
	"context"
	"fmt"
	"maps"
)

// Abandon is the operator's way out when a broker is gone for good, or
// will never answer about an object: the object leaves Bindery without
// its broker being asked, before or during its deletion, whatever the
// engine is waiting for. Every front door calls the one operation below:
// REST (POST .../abandon), the CLI (deprovision|unbind --abandon, over
// REST), the web UI's button, and the Kubernetes API when a client
// removes Bindery's finalizer. It marks the object abandoned
// (AbandonAnnotation) and deleted, and says who did it in the history;
// the engine then removes it at once, cancelling a call to the broker
// that is in flight.

// What stays behind at the broker, as the history and the confirmations
// say it.
const (
	InstanceLeftBehind = "The instance is removed without deprovisioning: whatever the broker created for it (and any credentials its bindings were given) stays at the broker, running and billed, until someone removes it there."
	BindingLeftBehind  = "The binding is removed without unbinding: the credentials the broker issued for it stay valid at the broker until someone revokes them there."
)

// ReasonAbandoned is the reason of an abandon's history entry.
const ReasonAbandoned = "Abandoned"

// AbandonInstance removes an instance without deprovisioning it: by names
// who asked (a token, a user), for the history.
func (s *Store) AbandonInstance(ctx context.Context, id, by string) (*Instance, error) {
	return abandon[Instance](ctx, s, id, by, InstanceLeftBehind)
}

// AbandonBinding removes a binding without unbinding it (see
// AbandonInstance).
func (s *Store) AbandonBinding(ctx context.Context, id, by string) (*Binding, error) {
	return abandon[Binding](ctx, s, id, by, BindingLeftBehind)
}

func abandon[T any, P interface {
	*T
	object
}](ctx context.Context, s *Store, id, by, leftBehind string) (P, error) {
	if !IsID(id) {
		return nil, ErrNotFound
	}
	if by == "" {
		by = "an unknown requester"
	}
	var out P
	_, err := s.write(ctx, func(w *txn) error {
		obj, err := getBy[T, P](ctx, w, `id = $1 FOR NO KEY UPDATE`, id)
		if err != nil {
			return err
		}
		out = obj
		m := obj.meta()
		if m.DeletionTimestamp != nil && Abandoned(m) {
			return nil // abandoned already: nothing more to say
		}
		annotations := maps.Clone(m.Annotations)
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[AbandonAnnotation] = "true"
		m.Annotations = annotations
		if m.DeletionTimestamp == nil {
			now := s.now().UTC()
			m.DeletionTimestamp = &now
		}
		meta, err := encodeMeta(m)
		if err != nil {
			return err
		}
		if _, err := w.Exec(ctx, `UPDATE `+tables[obj.kind()]+` SET metadata = $2, deletion_timestamp = $3 WHERE id = $1`,
			id, meta, m.DeletionTimestamp); err != nil {
			return mapErr(err)
		}
		if err := addEvent(ctx, w, obj.kind(), id, "Warning", ReasonAbandoned, fmt.Sprintf("Abandoned by %s. %s", by, leftBehind), ""); err != nil {
			return err
		}
		w.changed(Modified, obj)
		return nil
	})
	return out, err
}
