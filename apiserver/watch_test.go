package apiserver_test

import (
	"context"
	"slices"
	"strconv"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	apistorage "k8s.io/apiserver/pkg/storage"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// TestWatchSelectorTransitions: a watch with a label or field selector gets
// ADDED when an object starts matching and DELETED when it stops, live and
// when replayed from a resourceVersion.
func TestWatchSelectorTransitions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.client.ServicecatalogV1beta1().ServiceInstances("team")
	in, err := c.Create(ctx, newInstance("team", "db"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	from := in.ResourceVersion
	live, err := c.Watch(ctx, metav1.ListOptions{ResourceVersion: from, LabelSelector: "tier=gold"})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Stop()
	patch := func(labels string) *v1beta1.ServiceInstance {
		t.Helper()
		out, err := c.Patch(ctx, "db", types.MergePatchType, []byte(`{"metadata":{"labels":`+labels+`}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	patch(`{"tier":"gold"}`)
	if ev := nextEvent(t, live); ev.Type != watch.Added || ev.Object.(*v1beta1.ServiceInstance).Labels["tier"] != "gold" {
		t.Fatalf("starts matching: %s %+v", ev.Type, ev.Object)
	}
	patch(`{"tier":"gold","other":"x"}`)
	if ev := nextEvent(t, live); ev.Type != watch.Modified {
		t.Fatalf("still matching: %s", ev.Type)
	}
	patch(`{"tier":"silver"}`)
	if ev := nextEvent(t, live); ev.Type != watch.Deleted || ev.Object.(*v1beta1.ServiceInstance).Labels["tier"] != "silver" {
		t.Fatalf("stops matching: %s %+v", ev.Type, ev.Object)
	}
	// A change that does not match sends nothing: the next event is the
	// one for the change after it.
	patch(`{"tier":"bronze"}`)
	patch(`{"tier":"gold","again":"yes"}`)
	if ev := nextEvent(t, live); ev.Type != watch.Added || ev.Object.(*v1beta1.ServiceInstance).Labels["again"] != "yes" {
		t.Fatalf("after a change that does not match: %s %+v", ev.Type, ev.Object)
	}

	// The same from the feed's history.
	replay, err := c.Watch(ctx, metav1.ListOptions{ResourceVersion: from, LabelSelector: "tier=gold"})
	if err != nil {
		t.Fatal(err)
	}
	defer replay.Stop()
	for _, want := range []watch.EventType{watch.Added, watch.Modified, watch.Deleted} {
		if ev := nextEvent(t, replay); ev.Type != want {
			t.Fatalf("replay: %s, want %s", ev.Type, want)
		}
	}
	if ev := nextEvent(t, replay); ev.Type != watch.Added || ev.Object.(*v1beta1.ServiceInstance).Labels["again"] != "yes" {
		t.Fatalf("replay after a change that does not match: %s %+v", ev.Type, ev.Object)
	}

	// A field selector: kubectl wait and delete watch metadata.name.
	byName, err := c.Watch(ctx, metav1.ListOptions{ResourceVersion: from, FieldSelector: "metadata.name=db"})
	if err != nil {
		t.Fatal(err)
	}
	defer byName.Stop()
	for range 5 {
		if ev := nextEvent(t, byName); ev.Type != watch.Modified {
			t.Fatalf("metadata.name=db: %s", ev.Type)
		}
	}
}

// TestWatchExtra: ownerReferences, managedFields and generateName (kept in
// the catalog's Meta.Extra, which the change feed's documents leave out)
// are in watch events, the DELETED one included, live and replayed.
func TestWatchExtra(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.client.ServicecatalogV1beta1().ServiceInstances("team")
	list, err := c.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	live, err := c.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Stop()
	in := newInstance("team", "")
	in.GenerateName = "db-"
	in.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "0d5d3c4e-0000-4000-8000-000000000001"}}
	in, err = c.Create(ctx, in, metav1.CreateOptions{FieldManager: "tester"})
	if err != nil {
		t.Fatal(err)
	}
	if len(in.ManagedFields) == 0 {
		t.Fatalf("create: no managedFields")
	}
	check := func(what string, ev watch.Event, typ watch.EventType) {
		t.Helper()
		if ev.Type != typ {
			t.Fatalf("%s: %s, want %s", what, ev.Type, typ)
		}
		got := ev.Object.(*v1beta1.ServiceInstance)
		if len(got.OwnerReferences) != 1 || got.OwnerReferences[0].Name != "owner" || got.GenerateName != "db-" ||
			len(got.ManagedFields) == 0 || got.ManagedFields[0].Manager != "tester" {
			t.Errorf("%s %s: metadata %+v", what, typ, got.ObjectMeta)
		}
	}
	check("live", nextEvent(t, live), watch.Added)
	if _, err := b.store.UpdateInstanceStatus(ctx, string(in.UID), func(in *catalog.Instance) error {
		in.Status.DashboardURL = "https://example.com"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	check("live", nextEvent(t, live), watch.Modified)
	if err := c.Delete(ctx, in.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	check("live", nextEvent(t, live), watch.Modified)
	if err := b.store.FinalizeInstance(ctx, string(in.UID), catalog.EventRecord{Type: "Normal", Reason: "Deprovisioned"}); err != nil {
		t.Fatal(err)
	}
	check("live", nextEvent(t, live), watch.Deleted)

	replay, err := c.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer replay.Stop()
	for _, typ := range []watch.EventType{watch.Added, watch.Modified, watch.Modified, watch.Deleted} {
		check("replay", nextEvent(t, replay), typ)
	}
}

// TestWatchWithoutResourceVersion: a watch with no resourceVersion (the
// server defaults sendInitialEvents for it, without bookmarks) sends the
// current objects as ADDED and goes on; with allowWatchBookmarks as well,
// the initial events end with the annotated bookmark, as kube-apiserver's
// own storage does.
func TestWatchWithoutResourceVersion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.client.ServicecatalogV1beta1().ServiceInstances("team")
	if _, err := c.Create(ctx, newInstance("team", "db"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, bookmarks := range []bool{false, true} {
		w, err := c.Watch(ctx, metav1.ListOptions{AllowWatchBookmarks: bookmarks})
		if err != nil {
			t.Fatal(err)
		}
		var types []watch.EventType
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				t.Fatalf("bookmarks %v: the watch failed: %v", bookmarks, ev.Object)
			}
			if ev.Type == watch.Bookmark {
				if m, _ := ev.Object.(metav1.Object); m == nil || m.GetAnnotations()[metav1.InitialEventsAnnotationKey] != "true" {
					continue // a periodic bookmark
				}
			}
			types = append(types, ev.Type)
			if len(types) == 1 && !bookmarks {
				if _, err := c.Create(ctx, newInstance("team", "db2"), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if (bookmarks && len(types) == 3) || (!bookmarks && len(types) == 2) {
				break
			}
		}
		w.Stop()
		// Without bookmarks: db, then db2 created meanwhile. With them: db
		// and db2, then the end of the initial events.
		want := []watch.EventType{watch.Added, watch.Added}
		if bookmarks {
			want = []watch.EventType{watch.Added, watch.Added, watch.Bookmark}
		}
		if !slices.Equal(types, want) {
			t.Errorf("bookmarks %v: events %v, want %v", bookmarks, types, want)
		}
	}
}

// TestWatchSameRevision: the changes of one transaction (a relist adds
// every class of a broker at once), which an earlier release gave one
// revision and this one gives one each: a watch sends each of them, not
// only the first.
func TestWatchSameRevision(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	w, err := b.client.ServicecatalogV1beta1().ClusterServiceClasses().Watch(ctx, metav1.ListOptions{FieldSelector: "spec.clusterServiceBrokerName=two"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	fake := osbtest.New(t, osbtest.WithCatalog(osbtest.GenerateCatalog(2, 1)))
	broker := &catalog.Broker{Spec: catalog.BrokerSpec{URL: fake.URL()}}
	broker.Name = "two"
	broker, err = b.store.CreateBroker(ctx, broker, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Relist(ctx, broker.ID); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 2 {
		ev := nextEvent(t, w)
		c, ok := ev.Object.(*v1beta1.ClusterServiceClass)
		if ev.Type != watch.Added || !ok {
			t.Fatalf("event %s %T", ev.Type, ev.Object)
		}
		got = append(got, c.Spec.ExternalName)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"fake-service-1", "fake-service-2"}) {
		t.Errorf("classes watched: %q", got)
	}
}

// TestWatchListTooNew: a watch that asks for its initial events at least
// as new as a revision the catalog has not reached (sendInitialEvents with
// resourceVersionMatch=NotOlderThan) ends with kube-apiserver's "too large
// resource version" error, which client-go's reflector acts on, rather
// than sending older initial events and a bookmark that claims them as
// new enough.
func TestWatchListTooNew(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.client.ServicecatalogV1beta1().ServiceInstances("a")
	created := createDB(t, b)
	rv, _ := strconv.ParseInt(created.ResourceVersion, 10, 64)
	yes := true
	for _, tc := range []struct {
		from    int64
		tooLate bool
	}{{rv + 1000, true}, {rv, false}} {
		w, err := c.Watch(ctx, metav1.ListOptions{ResourceVersion: strconv.FormatInt(tc.from, 10), SendInitialEvents: &yes,
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true})
		if err != nil {
			t.Fatal(err)
		}
		ev := <-w.ResultChan()
		w.Stop()
		var err2 error
		if ev.Type == watch.Error {
			err2 = apierrors.FromObject(ev.Object)
		}
		if got := apistorage.IsTooLargeResourceVersion(err2); got != tc.tooLate {
			t.Errorf("initial events from %d (the catalog is at %d): first event %s %v, want a too large resource version error: %v",
				tc.from, rv, ev.Type, err2, tc.tooLate)
		}
	}
}

// TestWatchWithoutInitialEvents: a watch with sendInitialEvents=false and
// no resourceVersion (or "0") starts from now, as kube-apiserver's does:
// its first event is the next change, not the current objects as ADDED.
func TestWatchWithoutInitialEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.client.ServicecatalogV1beta1().ServiceInstances("a")
	createDB(t, b)
	no := false
	for _, rv := range []string{"", "0"} {
		w, err := c.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, SendInitialEvents: &no, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Patch(ctx, "db", types.MergePatchType, []byte(`{"metadata":{"labels":{"rv":"x`+rv+`"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		ev := <-w.ResultChan()
		w.Stop()
		if in, ok := ev.Object.(*v1beta1.ServiceInstance); ev.Type != watch.Modified || !ok || in.Labels["rv"] != "x"+rv {
			t.Errorf("watch from %q without initial events: first event %s %v, want the change, MODIFIED", rv, ev.Type, ev.Object)
		}
	}
}
