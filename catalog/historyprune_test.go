package catalog_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/catalog"
)

// TestDeletedHistoryPruned: the history of an object outlives it (an
// abandon's entry says who left what behind at the broker), and nothing
// reads it once the object is gone but an operator: the pruner removes it
// once it is older than the retention, and leaves alone the history of
// live objects, however old, and that of objects deleted recently.
func TestDeletedHistoryPruned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStoreAndPool(t)
	gone := register(t, s, "gone", "http://127.0.0.1:1", "")
	recent := register(t, s, "recent", "http://127.0.0.1:1", "")
	live := register(t, s, "live", "http://127.0.0.1:1", "")
	for _, b := range []*catalog.Broker{gone, recent, live} {
		for i := range 3 {
			if err := s.SetBrokerAvailable(ctx, b.ID, i%2 == 1, fmt.Sprint("breaker ", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, b := range []*catalog.Broker{gone, recent} {
		if err := s.DeleteBroker(ctx, b.ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `UPDATE catalog.events SET created_at = created_at - interval '60 days',
		last_time = last_time - interval '60 days' WHERE object_id = ANY($1::uuid[])`, []string{gone.ID, live.ID}); err != nil {
		t.Fatal(err)
	}
	count := func(id string) (n int) {
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM catalog.events WHERE object_id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(gone.ID); n != 3 {
		t.Fatalf("the deleted broker has %d history entries before pruning, want 3", n)
	}
	prune, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Feed().RunPruner(prune, catalog.Retention{Every: 20 * time.Millisecond})
	}()
	defer func() { stop(); <-done }()
	for deadline := time.Now().Add(20 * time.Second); count(gone.ID) != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the deleted broker's history (%d entries, 60 days old) was not pruned", count(gone.ID))
		}
	}
	if n := count(live.ID); n != 3 {
		t.Errorf("the live broker keeps %d of its 3 old history entries", n)
	}
	if n := count(recent.ID); n != 3 {
		t.Errorf("the broker deleted now keeps %d of its 3 history entries", n)
	}
}
