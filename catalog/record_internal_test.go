package catalog

import (
	"context"
	"testing"

	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/migrations"
)

// TestObjectWrittenTwiceInOneWrite: an object a transaction changes twice
// (its status, then the rest of it) is one change of the feed, at one
// revision, which its row carries.
func TestObjectWrittenTwiceInOneWrite(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	if err := migrations.Up(ctx, pool, migrations.Catalog); err != nil {
		t.Fatal(err)
	}
	s := NewStore(pool, nil, nil)
	b := &Broker{Spec: BrokerSpec{URL: "http://127.0.0.1:1"}}
	b.Name = "twice"
	b, err := s.CreateBroker(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	from, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := s.write(ctx, func(w *txn) error {
		w.changedStatus(b, mustJSON(b.Status))
		w.changed(Modified, b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	changes, err := s.Feed().Since(ctx, from, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || changes[0].Revision != rev || b.ResourceVersion != rev {
		t.Fatalf("%d changes (want 1 at %d); the object's resourceVersion %d", len(changes), rev, b.ResourceVersion)
	}
	got, err := s.GetBroker(ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != rev {
		t.Errorf("the row's resourceVersion %d, its change's %d", got.ResourceVersion, rev)
	}
}
