package catalog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// Reads at one revision. A list, however long, is read from one
// snapshot: a read-only transaction at REPEATABLE READ, whose revision is
// the list's resourceVersion: it holds every change up to it and none
// after it. A snapshot held open holds back PostgreSQL's
// vacuum of every row changed meanwhile, so it is bounded in time.

// DefaultSnapshotLimit is how long a read may hold its snapshot unless
// WithSnapshotLimit says otherwise.
const DefaultSnapshotLimit = time.Minute

// ErrSnapshotExpired means a read held its snapshot longer than the
// store's limit (WithSnapshotLimit) and was stopped: its reader took too
// long. Reading in pages does not hold a snapshot between them.
var ErrSnapshotExpired = errors.New("the read held its snapshot longer than allowed")

// WithSnapshotLimit bounds how long a read holds a snapshot open (a
// chunked list of every object, the initial events of a watch); d <= 0
// keeps the default, DefaultSnapshotLimit.
func WithSnapshotLimit(d time.Duration) Option {
	return func(s *Store) {
		if d > 0 {
			s.snapshotLimit = d
		}
	}
}

// snapshot runs fn in a read-only snapshot with its revision, for at most
// the store's snapshot limit (fn reads under the ctx it is given); past it,
// fn's reads fail and snapshot returns ErrSnapshotExpired.
//
// The snapshot holds every change up to its revision and none after it:
// it is taken while catalog.revision is held in SHARE mode, which waits
// for the writes in their last round trip to commit and holds back new
// ones; the lock is taken in a subtransaction and let go of as soon as the
// snapshot is, so writes wait for a commit's time at most (revision.go).
func (s *Store) snapshot(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx, rev int64) error) error {
	limit := s.snapshotLimit
	ctx, cancel := context.WithTimeoutCause(ctx, limit, ErrSnapshotExpired)
	defer cancel()
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		return fmt.Errorf("begin: %w", expired(ctx, mapErr(err)))
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read-only
	// One query string, in the simple protocol: PostgreSQL runs its
	// statements in order, so the snapshot is taken by the SELECT, once
	// the lock is held (a prepared SELECT would take it when parsed or
	// bound, which a pipeline may do before the lock is granted). It ends
	// the transaction itself should this process stop reading without
	// ending it (a little later than the limit here).
	res, err := tx.Conn().PgConn().Exec(ctx, `SAVEPOINT revision;
		SET LOCAL lock_timeout = '10s';
		LOCK TABLE catalog.revision IN SHARE MODE;
		SELECT last_value FROM catalog.revisions;
		ROLLBACK TO SAVEPOINT revision;
		SET LOCAL idle_in_transaction_session_timeout = `+fmt.Sprint((limit+5*time.Second).Milliseconds())+`;
		SET TRANSACTION READ ONLY`).ReadAll()
	if err != nil {
		return fmt.Errorf("take a snapshot: %w", expired(ctx, mapErr(err)))
	}
	rev, err := strconv.ParseInt(string(res[3].Rows[0][0]), 10, 64)
	if err != nil {
		return fmt.Errorf("take a snapshot: %w", err)
	}
	return expired(ctx, fn(ctx, tx, rev))
}

// expired is err, or ErrSnapshotExpired when the snapshot's time ran out.
func expired(ctx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), ErrSnapshotExpired) {
		return fmt.Errorf("%w (%v)", ErrSnapshotExpired, err)
	}
	return err
}

// scanChunk is how many objects ScanRaw reads at a time.
const scanChunk = 500

// ScanRaw reads the objects of kind that opts select, in the order
// ListRaw lists them, from one snapshot, a chunk of at most 500 at a time,
// handing each chunk to fn as it is read: memory does not grow with the
// list. fn is called at least once (with no items for an empty list) and
// every time with the snapshot's revision and the continue token of the
// whole read: with opts.Limit set, it stops after Limit objects, and cont
// resumes after them when there are more (known before the first chunk,
// so a response can begin with it). The items are fn's until it returns.
func (s *Store) ScanRaw(ctx context.Context, kind string, opts ListOptions, fn func(rev int64, cont string, items []*RawObject) error) error {
	o, ok := rawOrders[kind]
	if !ok {
		return fmt.Errorf("scan %s: unknown kind", kind)
	}
	err := s.snapshot(ctx, func(ctx context.Context, tx pgx.Tx, rev int64) error {
		var end *cursor
		var cont string
		if opts.Limit > 0 {
			var err error
			if end, cont, err = lastOfPage(ctx, tx, kind, o, opts); err != nil {
				return err
			}
		}
		chunk := ListOptions{Namespace: opts.Namespace, Namespaces: opts.Namespaces, Namespaced: opts.Namespaced,
			Labels: opts.Labels, Continue: opts.Continue, Limit: scanChunk, Parts: opts.Parts}
		for {
			f := &filter{}
			f.scope(kind, opts)
			if end != nil {
				o.upTo(f, *end)
			}
			l, err := listRaw(ctx, tx, kind, f, o.order, o.after, o.next, chunk)
			if err != nil {
				return err
			}
			if err := fn(rev, cont, l.Items); err != nil {
				return err
			}
			if l.Continue == "" {
				return nil
			}
			chunk.Continue = l.Continue
		}
	})
	if err != nil {
		return fmt.Errorf("scan %s: %w", kind, err)
	}
	return nil
}

// lastOfPage finds, for a read of at most opts.Limit objects, the
// position of the last one and, when more follow, the continue token
// after it; end is nil when the read holds fewer than Limit.
func lastOfPage(ctx context.Context, q querier, kind string, o rawOrder, opts ListOptions) (end *cursor, cont string, err error) {
	f := &filter{}
	f.scope(kind, opts)
	if opts.Continue != "" {
		c, err := decodeCursor(opts.Continue, o.order)
		if err != nil {
			return nil, "", err
		}
		o.after(f, c)
	}
	if err := f.addLabels(opts.Labels); err != nil {
		return nil, "", err
	}
	rows, err := q.Query(ctx, `SELECT `+columnsFor(kind, &Parts{})+` FROM `+tables[kind]+` WHERE `+f.where()+` ORDER BY `+o.order+
		fmt.Sprintf(" OFFSET %d LIMIT 2", opts.Limit-1), f.args...)
	if err != nil {
		return nil, "", mapErr(err)
	}
	defer rows.Close()
	rs := newRowScan(&Parts{})
	for n := 0; rows.Next(); n++ {
		obj, _, err := rs.scan(rows, kind)
		if err != nil {
			return nil, "", err
		}
		if n == 0 {
			c := o.next(obj, rs.pos, rs.broker)
			end = &c
		} else {
			cont = encodeCursor(*end)
		}
	}
	return end, cont, mapErr(rows.Err())
}
