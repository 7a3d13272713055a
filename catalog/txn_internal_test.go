package catalog

import (
	"context"
	"errors"
	"testing"

	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/migrations"
)

// TestWriteRoundTrips: statements a write queues go with its next round
// trip, and their failure fails the write as an immediate one would;
// nothing of a failed write is committed, and its connection goes back to
// the pool ready for the next.
func TestWriteRoundTrips(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	if err := migrations.Up(ctx, pool, migrations.Catalog); err != nil {
		t.Fatal(err)
	}
	s := NewStore(pool, nil, nil)
	revision := func() int64 {
		var rev int64
		if err := pool.QueryRow(ctx, `SELECT value FROM catalog.revision`).Scan(&rev); err != nil {
			t.Fatal(err)
		}
		return rev
	}
	count := func() int {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM catalog.events`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	obj := func() *Broker {
		b := &Broker{}
		b.ID, b.Name = "00000000-0000-0000-0000-000000000001", "b"
		return b
	}
	errQueued := errors.New("the queued statement failed")
	for _, tc := range []struct {
		name string
		fn   func(w *txn) error
		want error // nil: any
	}{
		{"a queued statement fails at the commit", func(w *txn) error {
			w.queue(func(error) error { return errQueued }, `INSERT INTO catalog.events (kind) VALUES (NULL)`)
			w.changed(Modified, obj())
			return nil
		}, errQueued},
		{"a queued statement fails before a read", func(w *txn) error {
			w.queue(func(error) error { return errQueued }, `INSERT INTO catalog.events (kind) VALUES (NULL)`)
			var one int
			if err := w.QueryRow(ctx, `SELECT 1`).Scan(&one); err != nil {
				return err
			}
			t.Error("the read after a failed statement succeeded")
			return nil
		}, errQueued},
		{"a failure swallowed by the write still fails its commit", func(w *txn) error {
			_, _ = w.Exec(ctx, `INSERT INTO catalog.events (kind) VALUES (NULL)`)
			addEvent(ctx, w, KindBroker, obj().ID, "Normal", "R", "m", "") //nolint:errcheck // always nil
			return nil
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rev, events := revision(), count()
			_, err := s.write(ctx, tc.fn)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("write: %v, want %v", err, tc.want)
			}
			if got := revision(); got != rev {
				t.Errorf("revision %d after a failed write, want %d", got, rev)
			}
			if got := count(); got != events {
				t.Errorf("%d history entries after a failed write, want %d", got, events)
			}
			// The connections are fit for the next write.
			for range pool.Config().MaxConns + 1 {
				if _, err := s.write(ctx, func(w *txn) error { return addEvent(ctx, w, KindBroker, obj().ID, "Normal", "R", "m", "") }); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	if got := count(); got != 1 {
		t.Errorf("%d history entries, want 1 folded", got)
	}
}
