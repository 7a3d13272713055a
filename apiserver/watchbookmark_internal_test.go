package apiserver

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// TestBookmarksBetweenRevisions: a relist writes a broker's classes at
// one revision, which the hub hands over one change at a time. A bookmark
// says every change up to its revision was sent, and a client resumes
// from it: no bookmark comes between two changes of one revision, and no
// change after a bookmark of its revision.
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
