package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// The change feed: every committed write appends its objects' changes at
// a new revision and announces it on NotifyChannel. Readers page through
// it; the feed is pruned to keep it bounded.

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

// NotifyChannel is the PostgreSQL channel on which every committed write
// announces its revision.
const NotifyChannel = "bindery_catalog"

// Revision is the newest revision of the catalog.
func (s *Store) Revision(ctx context.Context) (int64, error) {
	var rev int64
	err := s.pool.QueryRow(ctx, `SELECT value FROM catalog.revision`).Scan(&rev)
	return rev, mapErr(err)
}
