package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// The change feed: every committed write appends its objects' changes at
// a new revision and announces the revision on NotifyChannel. Every
// consumer (the engine, the Kubernetes API's watches) reads it through
// Feed: Follow to keep up with it, Since and At for one read. It is
// pruned to stay bounded (prune.go).

// NotifyChannel is the PostgreSQL channel on which every committed write
// announces its revision.
const NotifyChannel = "bindery_catalog"

// Feed is the catalog's change feed. Get it with Store.Feed.
type Feed struct {
	s *Store
}

// Feed is the store's change feed.
func (s *Store) Feed() *Feed { return s.feed }

// Change is an entry of the change feed with the object's document: the
// object after the change, or before it for Deleted. The document's
// resourceVersion is the object's before a deletion; Revision is the
// change's.
//
// The feed's documents are the typed objects' JSON, which leaves out
// Meta.Extra (the Kubernetes metadata the catalog has no column for:
// ownerReferences, managedFields, generateName, …). Since fills it in
// from the object's row while the row exists (Current): that is the
// object's newest Extra, not necessarily the one it had at Revision when
// the Kubernetes API changed Extra again since (a later change of the
// feed then carries the newer value anyway). Once the row is gone
// (Current false, a Deleted change or one before it), Extra is empty: the
// reader fills it in from what it saw last (apiserver keeps the last
// Extra of each object it has seen).
type Change struct {
	Revision int64
	Kind     string
	Type     string
	Object   *RawObject
	// Current says that the object's row exists, and Object.Extra is read
	// from it.
	Current bool
	// InstanceID is, for a binding, the id of its instance when that
	// exists: an instance being deleted waits for its bindings to go.
	InstanceID string
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

// instanceJoin finds, for a binding's change c, its instance i.
const instanceJoin = ` LEFT JOIN catalog.instances i ON c.kind = 'ServiceBinding' AND i.namespace = c.namespace
	AND i.name = c.object->'spec'->'instanceRef'->>'name'`

// Since reads the change feed after a revision, oldest first, for the
// given kinds (all when none), at most limit entries (all when 0), up to
// the catalog's final revision (Store.Revision): what is read is never
// followed by a change of a revision before it. Entries of one revision
// are never split across calls when limit cuts: the last revision read is
// completed.
func (f *Feed) Since(ctx context.Context, after int64, kinds []string, limit int) ([]Change, error) {
	p, err := f.Read(ctx, after, kinds, limit)
	return p.Changes, err
}

// Page is a read of the change feed.
type Page struct {
	// Changes are the changes read, oldest first.
	Changes []Change
	// UpTo is the revision the read is complete up to: a reader that
	// resumes after it misses nothing.
	UpTo int64
	// Final is the catalog's final revision the read went up to: less
	// than the revision read after when that is none the catalog has
	// reached.
	Final int64
}

// Read is Since, with the revision the read is complete up to: the final
// revision, or the last one read when limit cut the read short.
func (f *Feed) Read(ctx context.Context, after int64, kinds []string, limit int) (Page, error) {
	upTo, err := f.s.settledRevision(ctx)
	if err != nil {
		return Page{}, fmt.Errorf("read changes after %d: %w", after, err)
	}
	return f.readUpTo(ctx, after, upTo, kinds, limit, true)
}

// readUpTo reads the changes after after, up to upTo, as Read does.
func (f *Feed) readUpTo(ctx context.Context, after, upTo int64, kinds []string, limit int, documents bool) (Page, error) {
	final := upTo
	if upTo <= after {
		return Page{UpTo: after, Final: final}, nil
	}
	changes, err := f.since(ctx, after, upTo, kinds, limit, documents)
	if err != nil {
		return Page{}, err
	}
	if limit > 0 && len(changes) >= limit {
		upTo = changes[len(changes)-1].Revision
	}
	return Page{Changes: changes, UpTo: upTo, Final: final}, nil
}

// since reads the changes in (after, upTo]; without documents, each
// change's Object has only the object's id, namespace and name (decoding a
// page's documents costs more than reading it).
func (f *Feed) since(ctx context.Context, after, upTo int64, kinds []string, limit int, documents bool) ([]Change, error) {
	w := &filter{}
	w.add("c.revision > ?", after)
	w.add("c.revision <= ?", upTo)
	if len(kinds) > 0 {
		w.add("c.kind = ANY(?)", kinds)
	}
	cols := `SELECT c.revision, c.kind, c.type, c.object_id::text, c.namespace, c.name, coalesce(i.id::text, '')`
	joins := instanceJoin
	if documents {
		cols += `, c.object, x.extra, coalesce(x.found, false)`
		joins += extraJoin
	}
	cols += ` FROM catalog.changes c`
	sql := cols + joins + ` WHERE ` + w.where() + ` ORDER BY c.revision, c.object_id`
	if limit > 0 {
		// Finish the last revision: a reader resumes after a whole revision.
		// The page's revisions are matched with IN, not bounded by their
		// max: a bound the planner cannot know made it guess a range's
		// rows as 0.5 % of the table, and past some 300,000 changes it
		// launched a parallel worker for each page, of one row as often
		// as not (10-35 ms a page instead of 0.1).
		sql = `WITH page AS (SELECT c.revision FROM catalog.changes c WHERE ` + w.where() + ` ORDER BY c.revision, c.object_id LIMIT ` + fmt.Sprint(limit) + `)
			` + cols + joins + ` WHERE ` + w.where() + ` AND c.revision IN (SELECT revision FROM page)
			ORDER BY c.revision, c.object_id`
	}
	rows, err := f.s.pool.Query(ctx, sql, w.args...)
	if err != nil {
		return nil, fmt.Errorf("read changes after %d: %w", after, mapErr(err))
	}
	defer rows.Close()
	var out []Change
	for rows.Next() {
		var c Change
		o := &RawObject{}
		var doc, extra []byte
		dest := []any{&c.Revision, &c.Kind, &c.Type, &o.ID, &o.Namespace, &o.Name, &c.InstanceID}
		if documents {
			dest = append(dest, &doc, &extra, &c.Current)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("read changes after %d: %w", after, mapErr(err))
		}
		if documents {
			// A change's document is the typed object's JSON: Meta's
			// fields inline, then spec and status.
			if err := json.Unmarshal(doc, o); err != nil {
				return nil, fmt.Errorf("decode change %d of %s: %w", c.Revision, c.Kind, err)
			}
			if len(extra) > 0 && string(extra) != "null" {
				o.Extra = extra
			}
		}
		c.Object = o
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read changes after %d: %w", after, mapErr(err))
	}
	return out, nil
}

// feedAtSQL reads each object's newest change at or before $2 by the
// object's own key. Filtered through object_id = ANY($3), a cached generic
// plan, which cannot see how few ids come, walked the kind's index over
// every revision up to $2 and filtered them by id (50,000 rows read for 6
// at 100,000 changes).
const feedAtSQL = `SELECT o.id::text, c.revision, c.type, c.object
	FROM (SELECT DISTINCT id FROM unnest($3::uuid[]) AS u(id)) o
	CROSS JOIN LATERAL (SELECT revision, type, object FROM catalog.changes
		WHERE object_id = o.id AND revision <= $2 AND kind = $1 ORDER BY revision DESC LIMIT 1) c`

// At reads, for each of the objects of kind with these ids, the newest
// change of the feed at or before revision at: what the object was then
// (nothing when the change is Deleted, or when it is older than what the
// feed keeps). The documents carry no Extra. A watch with a selector uses
// it to tell whether an object matched when the watch began.
func (f *Feed) At(ctx context.Context, kind string, ids []string, at int64) (map[string]Change, error) {
	out := map[string]Change{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := f.s.pool.Query(ctx, feedAtSQL, kind, at, ids)
	if err != nil {
		return nil, fmt.Errorf("read changes at %d: %w", at, mapErr(err))
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var doc []byte
		c := Change{Kind: kind}
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

// KeptAfter is the oldest revision from which the change feed is
// complete: a reader may resume after any revision at or above it, while
// older ones are gone (pruned).
func (f *Feed) KeptAfter(ctx context.Context) (int64, error) {
	var oldest *int64
	if err := f.s.pool.QueryRow(ctx, `SELECT min(revision) FROM catalog.changes`).Scan(&oldest); err != nil {
		return 0, fmt.Errorf("read the change feed's start: %w", mapErr(err))
	}
	if oldest != nil {
		return *oldest - 1, nil
	}
	// Nothing kept (or nothing ever written): only the newest final
	// revision is a place to resume from.
	rev, err := f.s.settledRevision(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the change feed's start: %w", err)
	}
	return rev, nil
}

// LastOf is the position of the newest change of the given kinds: it
// moves on whenever an object of those kinds changes, and not otherwise,
// so a reader can keep what it made of them keyed by it. Once changes are
// pruned it may move on without such a change, but it never comes back to
// a position it had before one (pruning keeps a suffix of the feed). It
// counts only final revisions, so that a change committed after a higher
// revision still moves it.
func (f *Feed) LastOf(ctx context.Context, kinds ...string) (int64, error) {
	final, err := f.s.settledRevision(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the change feed's position: %w", err)
	}
	var rev int64
	err = f.s.pool.QueryRow(ctx, `SELECT coalesce(
		(SELECT max(m) FROM (SELECT (SELECT max(revision) FROM catalog.changes c WHERE c.kind = k AND c.revision <= $2) AS m FROM unnest($1::text[]) AS k) x),
		(SELECT min(revision) - 1 FROM catalog.changes),
		$2)`, kinds, final).Scan(&rev)
	if err != nil {
		return 0, fmt.Errorf("read the change feed's position: %w", mapErr(err))
	}
	return rev, nil
}
