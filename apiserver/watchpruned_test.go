package apiserver_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
)

// TestWatchFromPrunedStateDeletes: a watch with a selector replayed from a
// list's resourceVersion, when the feed no longer holds the state the
// objects had then (pruned, as any object unchanged for long), sends
// DELETED for an object that stopped matching: the list showed it.
func TestWatchFromPrunedStateDeletes(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	c := b.client.ServicecatalogV1beta1().ServiceInstances("team")
	in := newInstance("team", "db")
	in.Labels["tier"] = "gold"
	if _, err := c.Create(ctx, in, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	other, err := c.Create(ctx, newInstance("team", "other"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rv, err := strconv.ParseInt(other.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Feed().PruneBefore(ctx, rv); err != nil {
		t.Fatal(err)
	}
	l, err := c.List(ctx, metav1.ListOptions{LabelSelector: "tier=gold"})
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("list: %v, %d items", err, len(l.Items))
	}
	if _, err := c.Patch(ctx, "db", types.MergePatchType, []byte(`{"metadata":{"labels":{"tier":"silver"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion, LabelSelector: "tier=gold"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	select {
	case ev := <-w.ResultChan():
		if in, _ := ev.Object.(*v1beta1.ServiceInstance); ev.Type != watch.Deleted || in == nil || in.Name != "db" {
			t.Errorf("first event %s of %v, want DELETED of db", ev.Type, ev.Object)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("watch from %s with tier=gold: no DELETED for db, which no longer matches", l.ResourceVersion)
	}
}
