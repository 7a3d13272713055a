package catalog

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Pruning: the change feed is kept long enough for readers to resume from
// a revision they saw (a Kubernetes watch's resourceVersion), and no
// longer, and never past a size. Every process that owns the catalog runs
// RunPruner; the rounds are claimed in PostgreSQL, so one replica prunes
// at a time.

// The least of the change feed that is kept, and the defaults.
const (
	MinChangeRetention = 10 * time.Minute
	MinChangesRetained = 100_000
)

// MaxChangeBytes is the most of the change feed that is kept by default,
// in bytes of documents as stored (pg_column_size: compressed when
// PostgreSQL compresses them). At about 1 kB a change (docs/sizing.md) it
// holds the newest MinChangesRetained changes twice over; a storm of
// large documents makes the feed keep less than MinChangeRetention's 10
// minutes instead of growing with it.
const MaxChangeBytes = 256 << 20

// Retention is how much of the change feed is kept: every change younger
// than MinAge, and at least the newest MinCount changes — unless they hold
// more than MaxBytes of documents: then only the newest changes that fit
// in MaxBytes, whole revisions, and always the newest revision. A reader
// that resumes from a revision before what is kept (a watch from an old
// resourceVersion) gets 410 Gone, as it does after MinAge.
type Retention struct {
	// MinAge: changes younger than it are kept (default
	// MinChangeRetention).
	MinAge time.Duration
	// MinCount: the newest MinCount changes are kept (default
	// MinChangesRetained).
	MinCount int
	// MaxBytes bounds the documents kept, over MinAge and MinCount
	// (default MaxChangeBytes).
	MaxBytes int64
	// Every is how often RunPruner prunes (default a minute).
	Every time.Duration
	// DeletedHistory is how long the history of a deleted broker,
	// instance or binding is kept after its last entry (default
	// DeletedHistoryRetention); RunPruner prunes it once an hour.
	DeletedHistory time.Duration
}

// DeletedHistoryRetention is how long the history of a deleted object is
// kept by default. Only an operator reads it once the object is gone (an
// abandon's entry says who left what behind at the broker): long enough
// for that, and a bound, since objects are created and deleted without
// end and each keeps up to HistoryLimit entries.
const DeletedHistoryRetention = 30 * 24 * time.Hour

// historyEvery is how often RunPruner prunes deleted objects' history.
const historyEvery = time.Hour

func (r Retention) withDefaults() Retention {
	if r.MinAge == 0 {
		r.MinAge = MinChangeRetention
	}
	if r.MinCount == 0 {
		r.MinCount = MinChangesRetained
	}
	if r.MaxBytes <= 0 {
		r.MaxBytes = MaxChangeBytes
	}
	if r.Every <= 0 {
		r.Every = time.Minute
	}
	if r.DeletedHistory <= 0 {
		r.DeletedHistory = DeletedHistoryRetention
	}
	return r
}

// pruneLock is the advisory lock (pg_try_advisory_xact_lock's key, in the
// namespace Claimer's keys hash into) that a pruning round holds.
const pruneLock = "catalog.changes: prune"

// RunPruner prunes the change feed every r.Every until ctx ends, keeping
// what r says (zero fields take the defaults: 10 minutes and 100,000
// changes within 256 MiB, every minute), and deleted objects' history
// at its first round and every hour after. Each process that owns the catalog (the catalog
// server, the engine, the Kubernetes API server) calls it from its Run:
// every topology then prunes, and the rounds are claimed in PostgreSQL so
// that one replica prunes at a time while the others skip.
func (f *Feed) RunPruner(ctx context.Context, r Retention) {
	r = r.withDefaults()
	t := time.NewTicker(r.Every)
	defer t.Stop()
	var historyDue time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if now := time.Now(); !now.Before(historyDue) {
			historyDue = now.Add(historyEvery)
			if n, err := f.s.PruneDeletedHistory(ctx, r.DeletedHistory); err != nil && ctx.Err() == nil {
				f.s.log.WarnContext(ctx, "prune deleted objects' history", "error", err)
			} else if n > 0 {
				f.s.log.DebugContext(ctx, "pruned deleted objects' history", "entries", n)
			}
		}
		before, n, err := f.PruneKeeping(ctx, r)
		switch {
		case err != nil && ctx.Err() == nil:
			f.s.log.WarnContext(ctx, "prune the change feed", "error", err)
		case n > 0:
			f.s.log.DebugContext(ctx, "pruned the change feed", "changes", n, "before", before)
		}
	}
}

// beginClaimed begins a transaction that holds the advisory lock key (as
// pg_try_advisory_xact_lock's key, in the namespace Claimer's keys hash
// into, what naming the work in errors). When another transaction holds
// it, it returns no transaction and no error: that one does the work.
func (s *Store) beginClaimed(ctx context.Context, key, what string) (pgx.Tx, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", mapErr(err))
	}
	var mine bool
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(hashtextextended($1, 7))`, key).Scan(&mine); err != nil || !mine {
		_ = tx.Rollback(ctx)
		if err != nil {
			return nil, fmt.Errorf("claim %s: %w", what, mapErr(err))
		}
		return nil, nil
	}
	return tx, nil
}

// PruneKeeping prunes the change feed, keeping every change younger than
// r.MinAge and at least the newest r.MinCount changes (the newest one
// always) within r.MaxBytes (Retention), unless another process is
// pruning it (then it does nothing). It returns the revision the feed is
// kept from (changes before it are gone, 0 when nothing was pruned) and
// how many were removed.
func (f *Feed) PruneKeeping(ctx context.Context, r Retention) (before, removed int64, err error) {
	minCount := max(r.MinCount, 1)
	maxBytes := r.MaxBytes
	if maxBytes <= 0 {
		maxBytes = MaxChangeBytes
	}
	tx, err := f.s.beginClaimed(ctx, pruneLock, "pruning the change feed")
	if tx == nil {
		return 0, 0, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after commit
	// Revisions are taken in a write's last round trip and created_at is
	// the transaction's start: every change before the oldest young
	// revision is old. The bound in bytes walks the feed from the newest
	// change (the primary key's order) and stops at the first that does
	// not fit: its revision goes whole.
	err = tx.QueryRow(ctx, `SELECT greatest(least(
			coalesce((SELECT min(revision) FROM catalog.changes WHERE created_at >= now() - make_interval(secs => $1)),
				(SELECT last_value + 1 FROM catalog.revisions)),
			coalesce((SELECT revision FROM catalog.changes ORDER BY revision DESC, object_id DESC OFFSET $2 - 1 LIMIT 1), 0)),
			coalesce((SELECT revision + 1 FROM (
				SELECT revision, sum(pg_column_size(object)) OVER (ORDER BY revision DESC, object_id DESC) AS size
				FROM catalog.changes ORDER BY revision DESC, object_id DESC) newest
				WHERE size > $3 LIMIT 1), 0))`,
		r.MinAge.Seconds(), minCount, maxBytes).Scan(&before)
	if err != nil {
		return 0, 0, fmt.Errorf("find where to prune the change feed: %w", mapErr(err))
	}
	if before <= 0 {
		return 0, 0, nil
	}
	tag, err := tx.Exec(ctx, pruneBefore, before)
	if err != nil {
		return 0, 0, fmt.Errorf("prune changes before %d: %w", before, mapErr(err))
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, 0, fmt.Errorf("commit: %w", mapErr(err))
	}
	return before, tag.RowsAffected(), nil
}

// pruneBefore removes the changes older than revision $1, keeping the
// newest revision whatever $1 says, so a reader can always resume from the
// newest state.
const pruneBefore = `DELETE FROM catalog.changes WHERE revision < least($1, (SELECT max(revision) FROM catalog.changes))`

// PruneBefore removes the change feed's entries older than revision
// before, keeping the newest revision whatever before says. It returns
// how many were removed.
func (f *Feed) PruneBefore(ctx context.Context, before int64) (int64, error) {
	tag, err := f.s.pool.Exec(ctx, pruneBefore, before)
	if err != nil {
		return 0, fmt.Errorf("prune changes before %d: %w", before, mapErr(err))
	}
	return tag.RowsAffected(), nil
}
