package apiserver

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/bindery-dev/bindery/catalog"
)

// TestPrune: the server's pruning keeps every change younger than the
// retention and at least the newest ChangesRetained, and the defaults are
// at least 10 minutes and 100,000 changes.
func TestPrune(t *testing.T) {
	t.Parallel()
	o := &Options{Listen: ":0"}
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	if o.ChangeRetention < 10*time.Minute || o.ChangesRetained < 100_000 {
		t.Errorf("defaults: %s, %d", o.ChangeRetention, o.ChangesRetained)
	}
	if err := (&Options{Listen: ":0", ChangeRetention: time.Minute, ChangesRetained: 10, PruneInterval: time.Minute}).Validate(); err == nil {
		t.Error("a retention under the minimum is accepted")
	}

	storages, store := storagesForTest(t)
	ctx := context.Background()
	instances := storages["serviceinstances"].(*instanceStorage)
	nsCtx := genericapirequest.WithNamespace(genericapirequest.NewContext(), "team")
	for _, name := range []string{"a", "b", "c", "d"} {
		in := validInstance()
		in.Name = name
		if _, err := instances.Create(nsCtx, in, nil, &metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rev, err := store.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kept := func() int64 {
		t.Helper()
		k, err := store.Feed().KeptAfter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	prune := func(r catalog.Retention) {
		t.Helper()
		if _, _, err := store.Feed().PruneKeeping(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	// Everything is young: nothing goes.
	prune(catalog.Retention{MinAge: time.Hour, MinCount: 1})
	if k := kept(); k != 0 {
		t.Errorf("young changes pruned: kept after %d", k)
	}
	// Age no matter: the newest 3 changes (one per create) stay.
	prune(catalog.Retention{MinAge: 0, MinCount: 3})
	if k := kept(); k != rev-3 {
		t.Errorf("kept after %d, want %d", k, rev-3)
	}
	prune(catalog.Retention{MinAge: 0, MinCount: 1})
	if k := kept(); k != rev-1 {
		t.Errorf("kept after %d, want %d", k, rev-1)
	}
}
