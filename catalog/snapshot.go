package catalog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Reads at one revision. A list, however long, is read from one
// snapshot: a read-only transaction at REPEATABLE READ, whose revision is
// the list's resourceVersion. A snapshot held open holds back PostgreSQL's
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
// the store's snapshot limit (fn reads under the ctx it is given); past it, fn's reads fail and snapshot
// returns ErrSnapshotExpired.
func (s *Store) snapshot(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx, rev int64) error) error {
	limit := s.snapshotLimit
	ctx, cancel := context.WithTimeoutCause(ctx, limit, ErrSnapshotExpired)
	defer cancel()
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("begin: %w", expired(ctx, mapErr(err)))
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read-only
	// PostgreSQL ends the transaction itself should this process stop
	// reading without ending it (a little later than the limit here).
	var rev int64
	err = tx.QueryRow(ctx, `SELECT value, set_config('idle_in_transaction_session_timeout', $1, true) FROM catalog.revision`,
		fmt.Sprint((limit+5*time.Second).Milliseconds())).Scan(&rev, nil)
	if err != nil {
		return fmt.Errorf("read revision: %w", expired(ctx, mapErr(err)))
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
			Labels: opts.Labels, Continue: opts.Continue, Limit: scanChunk}
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
		c, err := decodeCursor(opts.Continue)
		if err != nil {
			return nil, "", err
		}
		o.after(f, c)
	}
	f.addLabels(opts.Labels)
	rows, err := q.Query(ctx, `SELECT `+columns(kind)+` FROM `+tables[kind]+` WHERE `+f.where()+` ORDER BY `+o.order+
		fmt.Sprintf(" OFFSET %d LIMIT 2", opts.Limit-1), f.args...)
	if err != nil {
		return nil, "", mapErr(err)
	}
	defer rows.Close()
	for n := 0; rows.Next(); n++ {
		obj, pos, broker, err := scanRaw(rows, kind)
		if err != nil {
			return nil, "", err
		}
		if n == 0 {
			c := o.next(obj, pos, broker)
			end = &c
		} else {
			cont = encodeCursor(*end)
		}
	}
	return end, cont, mapErr(rows.Err())
}
