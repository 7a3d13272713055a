package catalog

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// txn is a write transaction that collects the objects it changed.
//
// Its round trips are what a write costs (the database's CPU and the
// wait for it), so it spends as few as it can: statements whose results
// the write does not need (queue) wait and go with the next statement
// that needs an answer, in one pipeline; BEGIN goes with the first
// statement, COMMIT with the last (commit). A write that reads a row and
// changes it is then three round trips: BEGIN and the read, the changes
// and the feed row, COMMIT with them.
type txn struct {
	conn    *pgxpool.Conn
	pending []queued
	// begun: BEGIN has been sent.
	begun bool

	changes []change
	// locked: the transaction has queued its ROW EXCLUSIVE lock of
	// catalog.revision (revision.go); revised: it has taken its first
	// revision (a creation's INSERT did); inserted are the rows its
	// creations inserted, with that revision already.
	locked, revised bool
	inserted        map[string]bool
	// staged are the ids of the objects whose changes are staged
	// (stage), by table.
	staged map[string][]string
	// statuses are the new statuses of changed objects, by id, written
	// with their stamps (changedStatus).
	statuses map[string]string
	events   []Event
	// names of the objects the transaction read, by kind and id, kept
	// when the store publishes events: an event may be about an object it
	// did not change.
	publishing bool
	names      map[[2]string][2]string
}

// queued is a statement waiting for the next round trip; onErr, when not
// nil, says what its failure means. A statement of checks (queueCheck)
// has checks instead.
type queued struct {
	sql    string
	args   []any
	onErr  func(error) error
	checks []check
}

// check is one expression of a statement of checks: onErr maps its
// failures, the errors of codes (SQLSTATEs).
type check struct {
	codes []string
	onErr func(error) error
}

// refusal is what the failure of q means.
func (q queued) refusal(err error) error {
	if q.onErr != nil {
		return q.onErr(err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		for _, c := range q.checks {
			if c.onErr != nil && slices.Contains(c.codes, pgErr.Code) {
				return c.onErr(err)
			}
		}
	}
	return mapErr(err)
}

// placeholder is a statement's parameter ($1, $2, ...).
var placeholder = regexp.MustCompile(`\$[0-9]+`)

// queueCheck adds a check to the next round trip: expr, an SQL
// expression whose value the write does not need, which refuses the write
// by failing (with an error of codes, which onErr maps). Checks queued one
// after another go as one SELECT of them all, evaluated in order: one
// statement for PostgreSQL to bind and run, not one each.
func (w *txn) queueCheck(codes []string, onErr func(error) error, expr string, args ...any) {
	if n := len(w.pending); n > 0 && w.pending[n-1].checks != nil {
		last := &w.pending[n-1]
		offset := len(last.args)
		last.sql += ", " + placeholder.ReplaceAllStringFunc(expr, func(p string) string {
			i, _ := strconv.Atoi(p[1:])
			return "$" + strconv.Itoa(i+offset)
		})
		last.args = append(last.args, args...)
		last.checks = append(last.checks, check{codes, onErr})
		return
	}
	w.pending = append(w.pending, queued{sql: "SELECT " + expr, args: args, checks: []check{{codes, onErr}}})
}

const (
	sqlBegin  = "begin"
	sqlCommit = "commit"
	// sqlLockRevision says the transaction is in its last round trip, about
	// to take its revision (revision.go).
	sqlLockRevision = "LOCK TABLE catalog.revision IN ROW EXCLUSIVE MODE"
)

// revision is the SQL expression of the transaction's first revision
// (record takes one more for each change after the first): the first use
// takes it from the sequence, after queueing the lock that says so; later
// ones repeat it. Only the last round trip may use it: a write holds
// the lock until it commits, and readers wait for it.
func (w *txn) revision() string {
	if w.revised {
		return "currval('catalog.revisions')"
	}
	if !w.locked {
		w.queue(nil, sqlLockRevision)
		w.locked = true
	}
	w.revised = true
	return "catalog.take_revision()"
}

// probedRevision is revision for a creation of namespace/name in table:
// it first waits for any write that holds a row of that name (a deletion
// about to commit), so that the creation takes its revision after the
// deletion took its own, and watchers see the two in the order they
// happened.
func (w *txn) probedRevision(table, namespace, name string) string {
	if !w.revised {
		w.queueCheck(nil, nil, `(SELECT 1 FROM `+table+` WHERE namespace = $1 AND name = $2 FOR KEY SHARE)`, namespace, name)
	}
	return w.revision()
}

// insertedWithRevision notes that the row of id was inserted with the
// transaction's first revision (w.revision()), so record gives its change
// that revision and need not stamp it.
func (w *txn) insertedWithRevision(id string) {
	if w.inserted == nil {
		w.inserted = map[string]bool{}
	}
	w.inserted[id] = true
}

// begin starts a write on one of the pool's connections; nothing is sent
// until the write's first statement.
func beginWrite(ctx context.Context, pool *pgxpool.Pool) (*txn, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	return &txn{conn: conn, pending: []queued{{sql: sqlBegin}}}, nil
}

// queue adds a statement whose result the write does not need; it is sent
// with the next one that needs an answer. onErr, when not nil, maps its
// failure (mapErr applies otherwise).
func (w *txn) queue(onErr func(error) error, sql string, args ...any) {
	w.pending = append(w.pending, queued{sql: sql, args: args, onErr: onErr})
}

// send pipelines the pending statements and then more, and reads the
// pending ones' results: the caller reads more's from the returned
// results, then closes them.
func (w *txn) send(ctx context.Context, more ...queued) (pgx.BatchResults, error) {
	b := &pgx.Batch{}
	list := append(w.pending, more...)
	w.pending = nil
	for _, q := range list {
		b.Queue(q.sql, q.args...)
		if q.sql == sqlBegin {
			w.begun = true
		}
	}
	br := w.conn.SendBatch(ctx, b)
	for _, q := range list[:len(list)-len(more)] {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return nil, q.refusal(err)
		}
	}
	return br, nil
}

// flush sends the pending statements.
func (w *txn) flush(ctx context.Context) error {
	if len(w.pending) == 0 {
		return nil
	}
	br, err := w.send(ctx)
	if err != nil {
		return err
	}
	return br.Close()
}

// Exec runs sql after the pending statements, in the same round trip.
func (w *txn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	br, err := w.send(ctx, queued{sql: sql, args: args})
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// QueryRow runs sql after the pending statements, in the same round trip.
// Its row must be scanned before the next statement.
func (w *txn) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	br, err := w.send(ctx, queued{sql: sql, args: args})
	if err != nil {
		return errRow{err}
	}
	return batchRow{br}
}

// Query runs sql after the pending statements, in the same round trip.
// Its rows must be closed before the next statement.
func (w *txn) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if len(w.pending) == 0 {
		return w.conn.Query(ctx, sql, args...)
	}
	br, err := w.send(ctx, queued{sql: sql, args: args})
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return batchRows{rows, br}, nil
}

// SendBatch sends b once the pending statements are sent.
func (w *txn) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if err := w.flush(ctx); err != nil {
		return errResults{err: err}
	}
	return w.conn.SendBatch(ctx, b)
}

// commit sends the pending statements, then sql (when not empty, its row
// scanned into dest, after the lock a write takes before its revision)
// and COMMIT, in one round trip.
func (w *txn) commit(ctx context.Context, sql string, args []any, dest ...any) error {
	if !w.begun && sql == "" && len(w.pending) == 1 {
		// Nothing but BEGIN: nothing to send.
		w.pending = nil
		return nil
	}
	var more []queued
	if sql != "" {
		if !w.locked {
			more = append(more, queued{sql: sqlLockRevision})
			w.locked = true
		}
		more = append(more, queued{sql: sql, args: args})
	}
	more = append(more, queued{sql: sqlCommit})
	br, err := w.send(ctx, more...)
	if err != nil {
		return err
	}
	defer br.Close()
	for _, q := range more {
		switch q.sql {
		case sqlLockRevision:
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("lock the revision: %w", mapErr(err))
			}
		case sqlCommit:
			tag, err := br.Exec()
			if err != nil {
				return fmt.Errorf("commit: %w", mapErr(err))
			}
			if tag.String() != "COMMIT" {
				// PostgreSQL answers a COMMIT of a failed transaction so.
				return fmt.Errorf("commit: %w", pgx.ErrTxCommitRollback)
			}
		default:
			if err := br.QueryRow().Scan(dest...); err != nil {
				return fmt.Errorf("record changes: %w", mapErr(err))
			}
		}
	}
	return nil
}

// end rolls back what was not committed and gives the connection back.
func (w *txn) end(ctx context.Context) {
	if w.conn.Conn().PgConn().TxStatus() != 'I' {
		if _, err := w.conn.Exec(context.WithoutCancel(ctx), "rollback"); err != nil {
			// The pool closes a connection left in a transaction.
			_ = w.conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}
	w.conn.Release()
}

type batchRow struct{ br pgx.BatchResults }

func (r batchRow) Scan(dest ...any) error {
	err := r.br.QueryRow().Scan(dest...)
	if cerr := r.br.Close(); err == nil || (errors.Is(err, pgx.ErrNoRows) && cerr != nil) {
		err = cerr
	}
	return err
}

// batchRows are the rows of a batch's last statement; closing them closes
// the batch.
type batchRows struct {
	pgx.Rows
	br pgx.BatchResults
}

func (r batchRows) Close() {
	r.Rows.Close()
	_ = r.br.Close()
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// errResults are the results of a batch that was not sent.
type errResults struct {
	pgx.BatchResults
	err error
}

func (r errResults) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, r.err }
func (r errResults) Query() (pgx.Rows, error)         { return nil, r.err }
func (r errResults) QueryRow() pgx.Row                { return errRow{r.err} }
func (r errResults) Close() error                     { return r.err }
