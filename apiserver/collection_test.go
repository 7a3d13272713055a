package apiserver_test

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/catalog"
)

// TestDeleteCollection: deletecollection honours label and field
// selectors and marks each object for deletion as a single delete does
// (the engine then deprovisions it); kubectl delete --all works.
func TestDeleteCollection(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	sc := b.client.ServicecatalogV1beta1()
	createNamed(t, b, "team", "a", "b", "c")
	if _, err := sc.ServiceInstances("elsewhere").Create(ctx, newInstance("elsewhere", "a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deleting := func(ns string) map[string]bool {
		t.Helper()
		l, err := b.store.ListInstances(ctx, catalog.ListOptions{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, in := range l.Items {
			out[in.Name] = in.DeletionTimestamp != nil
		}
		return out
	}
	if err := sc.ServiceInstances("team").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "app=a"}); err != nil {
		t.Fatal(err)
	}
	if got := deleting("team"); !got["a"] || got["b"] || got["c"] {
		t.Errorf("after deleting app=a in team: %v", got)
	}
	if got := deleting("elsewhere"); got["a"] {
		t.Errorf("deletecollection in team reached elsewhere: %v", got)
	}
	if err := sc.ServiceInstances("team").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{FieldSelector: "metadata.name=b"}); err != nil {
		t.Fatal(err)
	}
	if got := deleting("team"); !got["b"] || got["c"] {
		t.Errorf("after deleting metadata.name=b: %v", got)
	}
	// kubectl would wait for the engine: it is not running here.
	b.mustKubectl(nil, "delete", "serviceinstances", "--all", "-n", "team", "--wait=false")
	if got := deleting("team"); !got["a"] || !got["b"] || !got["c"] {
		t.Errorf("after kubectl delete --all: %v", got)
	}
	if got := deleting("elsewhere"); got["a"] {
		t.Errorf("kubectl delete --all -n team reached elsewhere: %v", got)
	}

	// Bindings.
	for _, name := range []string{"x", "y"} {
		bd := &v1beta1.ServiceBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "elsewhere", Labels: map[string]string{"app": name}},
			Spec:       v1beta1.ServiceBindingSpec{InstanceRef: v1beta1.LocalObjectReference{Name: "a"}},
		}
		if _, err := sc.ServiceBindings("elsewhere").Create(ctx, bd, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := sc.ServiceBindings("elsewhere").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "app=x"}); err != nil {
		t.Fatal(err)
	}
	l, err := b.store.ListBindings(ctx, catalog.ListOptions{Namespace: "elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	for _, bd := range l.Items {
		if (bd.DeletionTimestamp != nil) != (bd.Name == "x") {
			t.Errorf("binding %s: deletionTimestamp %v", bd.Name, bd.DeletionTimestamp)
		}
	}
}

// TestFilteredPages: a list with a label selector and a limit fills its
// pages (every page but the last holds limit objects) and, following
// continue, returns every match once.
func TestFilteredPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	sc := b.client.ServicecatalogV1beta1()
	want := map[string]bool{}
	for i := range 30 {
		in := newInstance("team", fmt.Sprintf("db-%02d", i))
		in.Labels = map[string]string{"tier": "other"}
		if i%3 == 0 {
			in.Labels["tier"] = "gold"
			want[in.Name] = true
		}
		if _, err := sc.ServiceInstances("team").Create(ctx, in, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]bool{}
	var sizes []int
	opts := metav1.ListOptions{LabelSelector: "tier=gold", Limit: 4}
	for {
		l, err := sc.ServiceInstances("").List(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(l.Items))
		for _, in := range l.Items {
			if got[in.Name] || !want[in.Name] {
				t.Errorf("%s listed twice or not matching", in.Name)
			}
			got[in.Name] = true
		}
		if l.Continue == "" {
			break
		}
		opts.Continue = l.Continue
	}
	if len(got) != len(want) {
		t.Errorf("listed %d of the %d matches", len(got), len(want))
	}
	for i, n := range sizes[:len(sizes)-1] {
		if n != 4 {
			t.Errorf("page %d holds %d objects, want 4 (pages %v)", i, n, sizes)
		}
	}
}

// TestDeleteCollectionPage: deletecollection with a limit deletes one page
// of what the selectors match and answers its continue token, as
// kube-apiserver does; a continue token carries on from it, and one that
// is no token is 400 with nothing deleted. It used to delete every match
// whatever the limit and the token said.
func TestDeleteCollectionPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	sc := b.client.ServicecatalogV1beta1()
	createNamed(t, b, "team", "a", "b", "c")
	deleting := func() string {
		t.Helper()
		l, err := b.store.ListInstances(ctx, catalog.ListOptions{Namespace: "team"})
		if err != nil {
			t.Fatal(err)
		}
		out := ""
		for _, in := range l.Items {
			if in.DeletionTimestamp != nil {
				out += in.Name
			}
		}
		return out
	}
	err := sc.ServiceInstances("team").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{Continue: "not-a-token"})
	if !apierrors.IsBadRequest(err) || deleting() != "" {
		t.Fatalf("deletecollection with a bad continue token: %v, deleting %q; want 400 and nothing deleted", err, deleting())
	}
	var list v1beta1.ServiceInstanceList
	err = sc.RESTClient().Delete().Namespace("team").Resource("serviceinstances").Param("limit", "1").Do(ctx).Into(&list)
	if err != nil || len(list.Items) != 1 || list.Continue == "" || deleting() != "a" {
		t.Fatalf("deletecollection of limit 1: %v, %d items, continue %q, deleting %q; want a alone, and a token", err, len(list.Items), list.Continue, deleting())
	}
	err = sc.ServiceInstances("team").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{Continue: list.Continue})
	if err != nil || deleting() != "abc" {
		t.Fatalf("deletecollection from the token: %v, deleting %q; want b and c too", err, deleting())
	}
	// A limit larger than any list is every match, as no limit is.
	var all v1beta1.ServiceInstanceList
	err = sc.RESTClient().Delete().Namespace("team").Resource("serviceinstances").Param("limit", strconv.FormatInt(math.MaxInt64, 10)).Do(ctx).Into(&all)
	if err != nil || len(all.Items) != 3 || all.Continue != "" {
		t.Errorf("deletecollection of the largest limit: %v, %d items, continue %q; want the 3", err, len(all.Items), all.Continue)
	}
}

// createNamed creates instances of the given names in namespace, through
// the API.
func createNamed(t *testing.T, b *bundle, namespace string, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := b.client.ServicecatalogV1beta1().ServiceInstances(namespace).Create(context.Background(), newInstance(namespace, name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}
