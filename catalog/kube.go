package catalog

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The Kubernetes API's side of the store (catalog/apiserver): objects read
// with spec and status as stored, lists at one revision, the change feed
// with each object's document, and the metadata-only and status writes
// that the API's update and status subresource need, with optimistic
// concurrency.

// GetRaw reads one object of kind by namespace (namespaced kinds only) and
// name, spec and status left as stored.
func (s *Store) GetRaw(ctx context.Context, kind, namespace, name string) (*RawObject, error) {
	if _, ok := tables[kind]; !ok {
		return nil, fmt.Errorf("get %s: unknown kind", kind)
	}
	f := &filter{}
	if kind == KindInstance || kind == KindBinding {
		f.add("namespace = ?", namespace)
	}
	f.add("name = ?", name)
	l, err := listRaw(ctx, s.pool, kind, f, "name", nil, nil, ListOptions{})
	if err != nil {
		return nil, err
	}
	if len(l.Items) == 0 {
		return nil, ErrNotFound
	}
	return l.Items[0], nil
}

// ListRaw lists objects of kind in the order of their own List method
// (classes and plans removed from their broker's catalogue included), in a
// read-only snapshot whose revision it returns as ResourceVersion: a watch
// from that revision sees every change the list does not.
func (s *Store) ListRaw(ctx context.Context, kind string, opts ListOptions) (List[*RawObject], error) {
	var out List[*RawObject]
	f := &filter{}
	var order string
	var after func(*filter, cursor)
	var next func(*RawObject, int, string) cursor
	switch kind {
	case KindInstance, KindBinding:
		if opts.Namespace != "" {
			f.add("namespace = ?", opts.Namespace)
		}
		order = "namespace, name"
		after = func(f *filter, c cursor) { f.add("(namespace, name) > (?, ?)", c.Namespace, c.Name) }
		next = func(o *RawObject, _ int, _ string) cursor { return cursor{Namespace: o.Namespace, Name: o.Name} }
	case KindBroker:
		order = "name"
		after = func(f *filter, c cursor) { f.add("name > ?", c.Name) }
		next = func(o *RawObject, _ int, _ string) cursor { return cursor{Name: o.Name} }
	case KindServiceClass, KindServicePlan:
		order = "broker_id, position"
		after = func(f *filter, c cursor) { f.add("(broker_id, position) > (?::uuid, ?)", c.Name, c.Pos) }
		next = func(_ *RawObject, pos int, broker string) cursor { return cursor{Name: broker, Pos: pos} }
	default:
		return out, fmt.Errorf("list %s: unknown kind", kind)
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return out, fmt.Errorf("begin: %w", mapErr(err))
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read-only
	var rev int64
	if err := tx.QueryRow(ctx, `SELECT value FROM catalog.revision`).Scan(&rev); err != nil {
		return out, fmt.Errorf("read revision: %w", mapErr(err))
	}
	out, err = listRaw(ctx, tx, kind, f, order, after, next, opts)
	if err != nil {
		return out, fmt.Errorf("list %s: %w", kind, err)
	}
	out.ResourceVersion = rev
	return out, nil
}

// FeedChange is an entry of the change feed with the object's document:
// the object after the change, or before it for Deleted. The document's
// resourceVersion is the object's before a deletion; Revision is the
// change's.
type FeedChange struct {
	Revision int64
	Kind     string
	Type     string
	Object   *RawObject
}

// ChangesSince reads the change feed after a revision, oldest first, for
// the given kinds (all when none), at most limit entries (all when 0).
// Entries of one revision are never split across calls when limit cuts:
// the last revision read is completed.
func (s *Store) ChangesSince(ctx context.Context, after int64, kinds []string, limit int) ([]FeedChange, error) {
	f := &filter{}
	f.add("revision > ?", after)
	if len(kinds) > 0 {
		f.add("kind = ANY(?)", kinds)
	}
	sql := `SELECT revision, kind, type, object FROM catalog.changes WHERE ` + f.where() + ` ORDER BY revision, object_id`
	if limit > 0 {
		// Finish the last revision: a watcher resumes after a whole revision.
		sql = `WITH page AS (SELECT revision FROM catalog.changes WHERE ` + f.where() + ` ORDER BY revision, object_id LIMIT ` + fmt.Sprint(limit) + `)
			SELECT revision, kind, type, object FROM catalog.changes WHERE ` + f.where() + ` AND revision <= (SELECT max(revision) FROM page)
			ORDER BY revision, object_id`
	}
	rows, err := s.pool.Query(ctx, sql, f.args...)
	if err != nil {
		return nil, fmt.Errorf("read changes after %d: %w", after, mapErr(err))
	}
	defer rows.Close()
	var out []FeedChange
	for rows.Next() {
		var c FeedChange
		var doc []byte
		if err := rows.Scan(&c.Revision, &c.Kind, &c.Type, &doc); err != nil {
			return nil, fmt.Errorf("read changes after %d: %w", after, mapErr(err))
		}
		o := &RawObject{}
		// A change's document is the typed object's JSON: Meta's fields
		// inline, then spec and status.
		if err := json.Unmarshal(doc, o); err != nil {
			return nil, fmt.Errorf("decode change %d of %s: %w", c.Revision, c.Kind, err)
		}
		c.Object = o
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read changes after %d: %w", after, mapErr(err))
	}
	return out, nil
}

// ChangesKeptAfter is the oldest revision from which the change feed is
// complete: a watch may resume after any revision at or above it, while
// older ones are gone (PruneChanges).
func (s *Store) ChangesKeptAfter(ctx context.Context) (int64, error) {
	var oldest *int64
	var rev int64
	err := s.pool.QueryRow(ctx, `SELECT (SELECT min(revision) FROM catalog.changes), value FROM catalog.revision`).Scan(&oldest, &rev)
	if err != nil {
		return 0, fmt.Errorf("read the change feed's start: %w", mapErr(err))
	}
	if oldest == nil {
		// Nothing kept (or nothing ever written): only the newest revision
		// is a place to resume from.
		return rev, nil
	}
	return *oldest - 1, nil
}

// PruneChanges removes the change feed's entries older than revision
// before, keeping the newest revision whatever before says (so a watch can
// always resume from the newest state). It returns how many were removed.
func (s *Store) PruneChanges(ctx context.Context, before int64) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM catalog.changes WHERE revision < least($1, (SELECT value FROM catalog.revision))`, before)
	if err != nil {
		return 0, fmt.Errorf("prune changes before %d: %w", before, mapErr(err))
	}
	return tag.RowsAffected(), nil
}

// UpdateInstanceMeta changes an instance's labels, annotations, finalizers
// and Extra, and nothing else; it works while the instance is being
// deleted. expectRV, when not 0, must be the instance's resourceVersion.
// An update that changes nothing writes nothing.
func (s *Store) UpdateInstanceMeta(ctx context.Context, id string, expectRV int64, fn func(*Meta) error) (*Instance, error) {
	return updateMeta[Instance](ctx, s, id, expectRV, fn)
}

// UpdateBindingMeta is UpdateInstanceMeta for a binding.
func (s *Store) UpdateBindingMeta(ctx context.Context, id string, expectRV int64, fn func(*Meta) error) (*Binding, error) {
	return updateMeta[Binding](ctx, s, id, expectRV, fn)
}

func updateMeta[T any, P interface {
	*T
	object
}](ctx context.Context, s *Store, id string, expectRV int64, fn func(*Meta) error) (P, error) {
	if _, err := uuid.Parse(id); err != nil {
		return nil, ErrNotFound
	}
	var out P
	_, err := s.write(ctx, func(w *txn) error {
		obj, err := getBy[T, P](ctx, w, `id = $1 FOR NO KEY UPDATE`, id)
		if err != nil {
			return err
		}
		m := obj.meta()
		if expectRV != 0 && m.ResourceVersion != expectRV {
			return fmt.Errorf("%w: %s %s/%s changed since resourceVersion %d", ErrConflict, obj.kind(), m.Namespace, m.Name, expectRV)
		}
		before, err := encodeMeta(m)
		if err != nil {
			return err
		}
		name, ns := m.Name, m.Namespace
		if err := fn(m); err != nil {
			return err
		}
		m.Name, m.Namespace = name, ns
		after, err := encodeMeta(m)
		if err != nil {
			return err
		}
		out = obj
		if string(before) == string(after) {
			return nil
		}
		if _, err := w.Exec(ctx, `UPDATE `+tables[obj.kind()]+` SET metadata = $2 WHERE id = $1`, id, after); err != nil {
			return mapErr(err)
		}
		w.changed(Modified, obj)
		return nil
	})
	return out, err
}

// UpdateInstanceStatusAt is UpdateInstanceStatus for clients of the
// status subresource: expectRV, when not 0, must be the instance's
// resourceVersion.
func (s *Store) UpdateInstanceStatusAt(ctx context.Context, id string, expectRV int64, fn func(*Instance) error) (*Instance, error) {
	if _, err := uuid.Parse(id); err != nil {
		return nil, ErrNotFound
	}
	return s.UpdateInstanceStatus(ctx, id, func(in *Instance) error {
		if expectRV != 0 && in.ResourceVersion != expectRV {
			return fmt.Errorf("%w: instance %s/%s changed since resourceVersion %d", ErrConflict, in.Namespace, in.Name, expectRV)
		}
		return fn(in)
	})
}

// UpdateBindingStatusAt is UpdateInstanceStatusAt for a binding.
func (s *Store) UpdateBindingStatusAt(ctx context.Context, id string, expectRV int64, fn func(*Binding) error) (*Binding, error) {
	if _, err := uuid.Parse(id); err != nil {
		return nil, ErrNotFound
	}
	return s.UpdateBindingStatus(ctx, id, func(b *Binding) error {
		if expectRV != 0 && b.ResourceVersion != expectRV {
			return fmt.Errorf("%w: binding %s/%s changed since resourceVersion %d", ErrConflict, b.Namespace, b.Name, expectRV)
		}
		return fn(b)
	}, nil)
}

// CheckInstance validates a new instance as CreateInstance does (name,
// namespace, plan, parameters, a free name) without recording it, for a
// dry run. It fills in the references the plan resolves to.
func (s *Store) CheckInstance(ctx context.Context, in *Instance) error {
	if in.Namespace == "" {
		in.Namespace = DefaultNamespace
	}
	var errs []FieldError
	checkName("name", in.Name, &errs)
	checkNamespace("namespace", in.Namespace, &errs)
	_, plan := s.resolvePlan(ctx, s.pool, &in.Spec, "spec", &errs)
	if plan != nil {
		checkParameters(plan, "instance create", plan.Spec.InstanceCreateParameterSchema, in.Spec.Parameters, "spec.parameters", &errs)
	}
	if err := invalid(errs...); err != nil {
		return err
	}
	var taken bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM catalog.instances WHERE namespace = $1 AND name = $2)`,
		in.Namespace, in.Name).Scan(&taken); err != nil {
		return fmt.Errorf("check instance %s/%s: %w", in.Namespace, in.Name, mapErr(err))
	}
	if taken {
		return fmt.Errorf("%w: an instance named %q exists in namespace %q", ErrConflict, in.Name, in.Namespace)
	}
	return nil
}
