package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// TestBookmarksBetweenRevisions: a relist writes a broker's classes in
// one transaction, which the hub hands over one change at a time. A
// bookmark says every change up to its revision was sent, and a client
// resumes from it: no change comes after a bookmark of its revision or a
// later one.
func TestBookmarksBetweenRevisions(t *testing.T) {
	t.Parallel()
	storages, store := storagesForTest(t)
	st := *storageOf(storages["clusterserviceclasses"])
	st.bookmarkEvery = 100 * time.Microsecond
	ctx := context.Background()
	from, err := store.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const brokers, services = 6, 200
	var g errgroup.Group
	for range 4 {
		w, err := st.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: strconv.FormatInt(from, 10), AllowWatchBookmarks: true})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		g.Go(func() error { return checkWatchOrder(w, brokers*services, false) })
	}
	for i := range brokers {
		fake := osbtest.New(t, osbtest.WithCatalog(osbtest.GenerateCatalog(services, 1)))
		b := &catalog.Broker{Spec: catalog.BrokerSpec{URL: fake.URL()}}
		b.Name = fmt.Sprintf("b%d", i)
		if b, err = store.CreateBroker(ctx, b, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Relist(ctx, b.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// TestWatchResumesWithinAWrite: a watch that ends after any change of a
// write of many (a relist's classes) and is resumed from the
// resourceVersion of that change gets the next one, never one it had.
func TestWatchResumesWithinAWrite(t *testing.T) {
	t.Parallel()
	storages, store := storagesForTest(t)
	st := storageOf(storages["clusterserviceclasses"])
	ctx := context.Background()
	from, err := store.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const services = 5
	fake := osbtest.New(t, osbtest.WithCatalog(osbtest.GenerateCatalog(services, 1)))
	b := &catalog.Broker{Spec: catalog.BrokerSpec{URL: fake.URL()}}
	b.Name = "many"
	if b, err = store.CreateBroker(ctx, b, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Relist(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for len(seen) < services {
		w, err := st.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: strconv.FormatInt(from, 10)})
		if err != nil {
			t.Fatal(err)
		}
		var ev watch.Event
		select {
		case ev = <-w.ResultChan():
		case <-time.After(10 * time.Second):
			t.Fatalf("resumed from %d after %d of %d classes: nothing more", from, len(seen), services)
		}
		w.Stop()
		m, err := meta.Accessor(ev.Object)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type != watch.Added || seen[m.GetName()] {
			t.Fatalf("resumed from %d: %s of %s (seen before: %v)", from, ev.Type, m.GetName(), seen[m.GetName()])
		}
		seen[m.GetName()] = true
		if from, err = strconv.ParseInt(m.GetResourceVersion(), 10, 64); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBacklogPrunedDuringItsRead: a prune that commits after a watch has
// checked that the feed keeps its resourceVersion, but before it reads the
// backlog, is a 410, not a watch that goes on without the pruned changes.
// The prune is held, uncommitted, with a lock that stops the backlog's
// read (it reads the changed objects' rows) but not the check before it;
// it commits once the read waits for the lock. (The hub's reads, which
// wait too, are paged: they start WITH page.)
func TestBacklogPrunedDuringItsRead(t *testing.T) {
	t.Parallel()
	storages, store := storagesForTest(t)
	st := storageOf(storages["clusterserviceclasses"])
	ctx := context.Background()
	pool := poolOf(store)
	from, err := store.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fake := osbtest.New(t, osbtest.WithCatalog(osbtest.GenerateCatalog(3, 1)))
	b := &catalog.Broker{Spec: catalog.BrokerSpec{URL: fake.URL()}}
	b.Name = "pruned"
	if b, err = store.CreateBroker(ctx, b, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Relist(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	upTo, err := store.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	prune, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer prune.Rollback(ctx) //nolint:errcheck // a no-op after commit
	if _, err := prune.Exec(ctx, `LOCK TABLE catalog.instances IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	if _, err := prune.Exec(ctx, `DELETE FROM catalog.changes WHERE revision < $1`, upTo); err != nil {
		t.Fatal(err)
	}
	w, err := st.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: strconv.FormatInt(from, 10)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting bool
		if err := pool.QueryRow(ctx, `SELECT count(*) > 0 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'SELECT c.revision%'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the backlog's read never waited for the prune")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := prune.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		status, ok := ev.Object.(*metav1.Status)
		if ev.Type != watch.Error || !ok || status.Code != http.StatusGone {
			t.Fatalf("a watch whose backlog was pruned under it: %s %+v", ev.Type, ev.Object)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
}
