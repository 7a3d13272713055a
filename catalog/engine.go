package catalog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The engine's side of the store: status writes, finalisation, the change
// feed and per-object claims. Users own spec, the engine owns status; the
// two are written separately, so neither overwrites the other.

// ReasonWaitingForFinalizers: the engine has deprovisioned (or unbound) an
// object being deleted, and finalizers that are not Bindery's keep it.
const ReasonWaitingForFinalizers = "WaitingForFinalizers"

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

// EventRecord is an entry of history the engine records with a status write.
type EventRecord struct {
	Type, Reason, Message, Operation string
}

// UpdateInstanceStatus lets fn change an instance's status (and only its
// status) and records it with the given events, in one transaction.
func (s *Store) UpdateInstanceStatus(ctx context.Context, id string, fn func(*Instance) error, events ...EventRecord) (*Instance, error) {
	var out *Instance
	_, err := s.write(ctx, func(w *txn) error {
		in, err := getBy[Instance](ctx, w, `id = $1 FOR NO KEY UPDATE`, id)
		if err != nil {
			return err
		}
		before := mustJSON(in.Status)
		if err := fn(in); err != nil {
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
		if _, err := w.Exec(ctx, `UPDATE catalog.instances SET status = $2 WHERE id = $1`, id, after); err != nil {
			return mapErr(err)
		}
		w.changed(Modified, in)
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
			return fmt.Errorf("%w: instance %s/%s is not being deleted", ErrUnprocessable, in.Namespace, in.Name)
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
	var sealed []byte
	if creds != nil {
		keys, err := s.keyring()
		if err != nil {
			return nil, err
		}
		sealed = keys.Seal(mustJSON(creds), []byte("binding:"+id))
	}
	var out *Binding
	_, err := s.write(ctx, func(w *txn) error {
		b, err := getBy[Binding](ctx, w, `id = $1 FOR NO KEY UPDATE`, id)
		if err != nil {
			return err
		}
		before := mustJSON(b.Status)
		if err := fn(b); err != nil {
			return err
		}
		if sealed != nil {
			if _, err := w.Exec(ctx, `INSERT INTO catalog.binding_credentials (binding_id, sealed) VALUES ($1, $2)
				ON CONFLICT (binding_id) DO UPDATE SET sealed = excluded.sealed, updated_at = now()`, id, sealed); err != nil {
				return mapErr(err)
			}
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
		if _, err := w.Exec(ctx, `UPDATE catalog.bindings SET status = $2 WHERE id = $1`, id, after); err != nil {
			return mapErr(err)
		}
		w.changed(Modified, b)
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
			return fmt.Errorf("%w: binding %s/%s is not being deleted", ErrUnprocessable, b.Namespace, b.Name)
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

// Unsettled lists the ids of instances and bindings the engine has work
// for: not Ready for their generation, being deleted, or in the middle of
// an operation. The engine reconciles them at start.
func (s *Store) Unsettled(ctx context.Context) (instances, bindings []string, err error) {
	const unsettled = ` WHERE deletion_timestamp IS NOT NULL
		OR (status->>'observedGeneration')::bigint IS DISTINCT FROM generation
		OR coalesce((status->>'asyncOpInProgress')::boolean, false)
		OR coalesce((status->>'orphanMitigationInProgress')::boolean, false)
		OR NOT coalesce((SELECT c->>'status' = 'True' FROM jsonb_array_elements(status->'conditions') c WHERE c->>'type' = 'Ready'), false)`
	read := func(table string) ([]string, error) {
		rows, err := s.pool.Query(ctx, `SELECT id FROM `+table+unsettled)
		if err != nil {
			return nil, mapErr(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		return ids, mapErr(err)
	}
	if instances, err = read("catalog.instances"); err != nil {
		return nil, nil, err
	}
	bindings, err = read("catalog.bindings")
	return instances, bindings, err
}

// Change is an entry of the change feed.
type Change struct {
	Revision int64
	Kind     string
	ObjectID string
	Type     string
	// InstanceID is, for a binding, the id of its instance (if it exists).
	InstanceID string
}

// Changes reads the feed after a revision, oldest first.
func (s *Store) Changes(ctx context.Context, after int64, limit int) ([]Change, error) {
	rows, err := s.pool.Query(ctx, `SELECT c.revision, c.kind, c.object_id, c.type, coalesce(i.id::text, '')
		FROM catalog.changes c
		LEFT JOIN catalog.instances i ON c.kind = 'ServiceBinding' AND i.namespace = c.namespace
			AND i.name = c.object->'spec'->'instanceRef'->>'name'
		WHERE c.revision > $1 ORDER BY c.revision, c.object_id LIMIT $2`, after, limit)
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Change, error) {
		var c Change
		err := r.Scan(&c.Revision, &c.Kind, &c.ObjectID, &c.Type, &c.InstanceID)
		return c, err
	})
	return out, mapErr(err)
}

// Claimer takes cluster-wide locks on objects, so that one engine replica
// at a time works on an object. A claim holds a connection for as long as
// it lasts, so claims have their own small pool: they can never take the
// connections the work itself needs.
type Claimer struct {
	pool *pgxpool.Pool
}

// NewClaimer opens a pool of at most n connections for claims.
func (s *Store) NewClaimer(ctx context.Context, n int) (*Claimer, error) {
	cfg := s.pool.Config().Copy()
	cfg.MaxConns, cfg.MinConns = int32(n), 0
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &Claimer{pool: pool}, nil
}

// Close closes the claims' pool; claims still held are released.
func (c *Claimer) Close() { c.pool.Close() }

// Claim takes the lock on key. ok is false when another process holds it;
// release gives it back.
func (c *Claimer) Claim(ctx context.Context, key string) (release func(), ok bool, err error) {
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return nil, false, err
	}
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1, 7))`, key).Scan(&ok); err != nil {
		conn.Release()
		return nil, false, mapErr(err)
	}
	if !ok {
		conn.Release()
		return nil, false, nil
	}
	return func() {
		ctx := context.WithoutCancel(ctx)
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock(hashtextextended($1, 7))`, key); err != nil {
			// A connection whose unlock failed is closed, which releases the lock.
			_ = conn.Conn().Close(ctx)
		}
		conn.Release()
	}, true, nil
}

// Listen waits for notifications of committed revisions on a connection of
// the claims' pool (one that the work never competes for). fn is called
// after each wake-up (a notification, or every idle period); Listen returns
// when ctx ends or the connection fails.
func (c *Claimer) Listen(ctx context.Context, idle time.Duration, fn func(notified bool) error) error {
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+NotifyChannel); err != nil {
		return err
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "UNLISTEN *") }()
	if err := fn(true); err != nil {
		return err
	}
	next := time.Now().Add(idle)
	for {
		wctx, cancel := context.WithDeadline(ctx, next)
		_, err := conn.Conn().WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			if err := fn(true); err != nil {
				return err
			}
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err):
			next = time.Now().Add(idle)
			if err := fn(false); err != nil {
				return err
			}
		default:
			return err
		}
	}
}
