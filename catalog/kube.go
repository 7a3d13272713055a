package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The Kubernetes API's side of the store (apiserver): objects read
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
//
// The feed's documents are the typed objects' JSON, which leaves out
// Meta.Extra (the Kubernetes metadata the catalog has no column for:
// ownerReferences, managedFields, generateName, …). ChangesSince fills it
// in from the object's row while the row exists (Current): that is the
// object's newest Extra, not necessarily the one it had at Revision when
// the Kubernetes API changed Extra again since (a later change of the
// feed then carries the newer value anyway). Once the row is gone
// (Current false, a Deleted change or one before it), Extra is empty: the
// reader fills it in from what it saw last (apiserver keeps the
// last Extra of each object it has seen).
type FeedChange struct {
	Revision int64
	Kind     string
	Type     string
	Object   *RawObject
	// Current says that the object's row exists, and Object.Extra is read
	// from it.
	Current bool
}

// extraJoin reads, for each change c, the Extra of its object's row and
// whether the row exists.
var extraJoin = func() string {
	kinds := make([]string, 0, len(tables))
	for k := range tables {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	parts := make([]string, 0, len(kinds))
	for _, k := range kinds {
		parts = append(parts, `SELECT metadata->'extra' AS extra, true AS found FROM `+tables[k]+` WHERE c.kind = '`+k+`' AND id = c.object_id`)
	}
	return ` LEFT JOIN LATERAL (` + strings.Join(parts, ` UNION ALL `) + `) x ON true`
}()

// ChangesSince reads the change feed after a revision, oldest first, for
// the given kinds (all when none), at most limit entries (all when 0).
// Entries of one revision are never split across calls when limit cuts:
// the last revision read is completed.
func (s *Store) ChangesSince(ctx context.Context, after int64, kinds []string, limit int) ([]FeedChange, error) {
	f := &filter{}
	f.add("c.revision > ?", after)
	if len(kinds) > 0 {
		f.add("c.kind = ANY(?)", kinds)
	}
	const cols = `SELECT c.revision, c.kind, c.type, c.object, x.extra, coalesce(x.found, false) FROM catalog.changes c`
	sql := cols + extraJoin + ` WHERE ` + f.where() + ` ORDER BY c.revision, c.object_id`
	if limit > 0 {
		// Finish the last revision: a watcher resumes after a whole revision.
		sql = `WITH page AS (SELECT c.revision FROM catalog.changes c WHERE ` + f.where() + ` ORDER BY c.revision, c.object_id LIMIT ` + fmt.Sprint(limit) + `)
			` + cols + extraJoin + ` WHERE ` + f.where() + ` AND c.revision <= (SELECT max(revision) FROM page)
			ORDER BY c.revision, c.object_id`
	}
	rows, err := s.pool.Query(ctx, sql, f.args...)
	if err != nil {
		return nil, fmt.Errorf("read changes after %d: %w", after, mapErr(err))
	}
	defer rows.Close()
	var out []FeedChange
	for rows.Next() {
		var c FeedChange
		var doc, extra []byte
		var current bool
		if err := rows.Scan(&c.Revision, &c.Kind, &c.Type, &doc, &extra, &current); err != nil {
			return nil, fmt.Errorf("read changes after %d: %w", after, mapErr(err))
		}
		o := &RawObject{}
		// A change's document is the typed object's JSON: Meta's fields
		// inline, then spec and status.
		if err := json.Unmarshal(doc, o); err != nil {
			return nil, fmt.Errorf("decode change %d of %s: %w", c.Revision, c.Kind, err)
		}
		c.Current = current
		if len(extra) > 0 && string(extra) != "null" {
			o.Extra = extra
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
		if len(m.Finalizers) == 0 && Released(any(obj)) {
			// The last other finalizer is gone and the engine had finished:
			// the object goes, as Kubernetes deletes it then.
			if _, err := w.Exec(ctx, `DELETE FROM `+tables[obj.kind()]+` WHERE id = $1`, id); err != nil {
				return mapErr(err)
			}
			w.changed(Deleted, obj)
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
	if _, err := s.validateNewInstance(ctx, s.pool, in); err != nil {
		return err
	}
	return s.nameFree(ctx, KindInstance, in.Namespace, in.Name)
}

// CheckBinding validates a new binding as CreateBinding does, without
// recording it, for a dry run.
func (s *Store) CheckBinding(ctx context.Context, b *Binding) error {
	if _, err := s.validateNewBinding(ctx, s.pool, b); err != nil {
		return err
	}
	return s.nameFree(ctx, KindBinding, b.Namespace, b.Name)
}

// nameFree returns ErrConflict when an object of kind has the name in the
// namespace.
func (s *Store) nameFree(ctx context.Context, kind, namespace, name string) error {
	var taken bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+tables[kind]+` WHERE namespace = $1 AND name = $2)`,
		namespace, name).Scan(&taken); err != nil {
		return fmt.Errorf("check %s %s/%s: %w", kind, namespace, name, mapErr(err))
	}
	if taken {
		return fmt.Errorf("%w: a %s named %q exists in namespace %q", ErrConflict, kind, name, namespace)
	}
	return nil
}

// CheckBroker validates a new broker as CreateBroker does (without
// credentials: the Kubernetes API gives none) and that its name is free,
// without recording it, for a dry run.
func (s *Store) CheckBroker(ctx context.Context, b *Broker) error {
	if err := validateBroker(b, nil); err != nil {
		return err
	}
	var taken bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM catalog.brokers WHERE name = $1)`, b.Name).Scan(&taken); err != nil {
		return fmt.Errorf("check broker %s: %w", b.Name, mapErr(err))
	}
	if taken {
		return fmt.Errorf("%w: a broker named %q exists", ErrConflict, b.Name)
	}
	return nil
}

// ChangesAt reads, for each of the objects of kind with these ids, the
// newest change of the feed at or before revision at: what the object was
// then (nothing when the change is Deleted, or when it is older than what
// the feed keeps). The documents carry no Extra. A watch with a selector
// uses it to tell whether an object matched when the watch began.
func (s *Store) ChangesAt(ctx context.Context, kind string, ids []string, at int64) (map[string]FeedChange, error) {
	out := map[string]FeedChange{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT ON (object_id) object_id::text, revision, type, object FROM catalog.changes
		WHERE kind = $1 AND revision <= $2 AND object_id = ANY($3::uuid[]) ORDER BY object_id, revision DESC`, kind, at, ids)
	if err != nil {
		return nil, fmt.Errorf("read changes at %d: %w", at, mapErr(err))
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var doc []byte
		c := FeedChange{Kind: kind}
		if err := rows.Scan(&id, &c.Revision, &c.Type, &doc); err != nil {
			return nil, fmt.Errorf("read changes at %d: %w", at, mapErr(err))
		}
		if c.Type == Deleted {
			continue
		}
		o := &RawObject{}
		if err := json.Unmarshal(doc, o); err != nil {
			return nil, fmt.Errorf("decode change %d of %s: %w", c.Revision, kind, err)
		}
		c.Object = o
		out[id] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read changes at %d: %w", at, mapErr(err))
	}
	return out, nil
}

// PruneChangesKeeping prunes the change feed (PruneChanges) while keeping
// every change younger than minAge and at least the newest minCount
// changes. It returns the revision the feed is kept from (changes before
// it are gone) and how many were removed.
func (s *Store) PruneChangesKeeping(ctx context.Context, minAge time.Duration, minCount int) (int64, int64, error) {
	if minCount < 1 {
		minCount = 1
	}
	var before int64
	// Revisions are granted at commit and created_at is the transaction's
	// start: every change before the oldest young revision is old.
	err := s.pool.QueryRow(ctx, `SELECT least(
			coalesce((SELECT min(revision) FROM catalog.changes WHERE created_at >= now() - make_interval(secs => $1)),
				(SELECT value + 1 FROM catalog.revision)),
			coalesce((SELECT revision FROM catalog.changes ORDER BY revision DESC, object_id DESC OFFSET $2 - 1 LIMIT 1), 0))`,
		minAge.Seconds(), minCount).Scan(&before)
	if err != nil {
		return 0, 0, fmt.Errorf("find where to prune the change feed: %w", mapErr(err))
	}
	if before <= 0 {
		return 0, 0, nil
	}
	n, err := s.PruneChanges(ctx, before)
	return before, n, err
}
