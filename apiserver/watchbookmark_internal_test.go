package apiserver

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/watch"

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
		g.Go(func() error { return checkRevisionsWhole(w, brokers*services) })
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

// checkRevisionsWhole reads a watch until it has seen want ADDED events,
// and fails on a change older than the one before it, or at or before a
// bookmark already sent, and on a bookmark older than a change.
func checkRevisionsWhole(w watch.Interface, want int) error {
	var lastEvent, lastMark int64
	timeout := time.After(60 * time.Second)
	for seen := 0; seen < want; {
		var ev watch.Event
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("the watch ended after %d of %d changes", seen, want)
			}
			ev = e
		case <-timeout:
			return fmt.Errorf("%d of %d changes within 60s", seen, want)
		}
		m, err := meta.Accessor(ev.Object)
		if err != nil {
			return err
		}
		rev, err := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
		if err != nil {
			return err
		}
		switch ev.Type {
		case watch.Bookmark:
			if rev < lastMark || rev < lastEvent {
				return fmt.Errorf("bookmark %d after bookmark %d and change %d", rev, lastMark, lastEvent)
			}
			lastMark = rev
		case watch.Added:
			if rev < lastEvent || rev <= lastMark {
				return fmt.Errorf("%s at %d after change %d and bookmark %d: a client resuming from the bookmark misses it", m.GetName(), rev, lastEvent, lastMark)
			}
			lastEvent = rev
			seen++
		default:
			return fmt.Errorf("unexpected %s", ev.Type)
		}
	}
	return nil
}
