package apiserver_test

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/apiserver"
	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// TestWritesThatChangeNothing: as in kube-apiserver, a write that changes
// nothing (a PUT of the object as read, the same apply repeated, as a
// GitOps tool does) makes no new resourceVersion, and so no MODIFIED
// event; and a label is no new generation of a broker registered through
// the REST API, whose relist duration it keeps as given ("15m").
func TestWritesThatChangeNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ic := b.client.ServicecatalogV1beta1().ServiceInstances("team")
	in, err := ic.Create(ctx, newInstance("team", "db"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u, err := ic.Update(ctx, in, metav1.UpdateOptions{}); err != nil || u.ResourceVersion != in.ResourceVersion {
		t.Errorf("an instance PUT as read: resourceVersion %s -> %s (%v)", in.ResourceVersion, u.ResourceVersion, err)
	}
	apply := []byte(`{"apiVersion":"servicecatalog.k8s.io/v1beta1","kind":"ServiceInstance","metadata":{"name":"db","namespace":"team"},"spec":{"clusterServiceClassExternalName":"fake-service","clusterServicePlanExternalName":"sync"}}`)
	first, err := ic.Patch(ctx, "db", types.ApplyPatchType, apply, metav1.PatchOptions{FieldManager: "gitops"})
	if err != nil {
		t.Fatal(err)
	}
	if again, err := ic.Patch(ctx, "db", types.ApplyPatchType, apply, metav1.PatchOptions{FieldManager: "gitops"}); err != nil || again.ResourceVersion != first.ResourceVersion {
		t.Errorf("the same apply again: resourceVersion %s -> %s (%v)", first.ResourceVersion, again.ResourceVersion, err)
	}
	bc := b.client.ServicecatalogV1beta1().ClusterServiceBrokers()
	br, err := bc.Get(ctx, "fake", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u, err := bc.Update(ctx, br, metav1.UpdateOptions{}); err != nil || u.ResourceVersion != br.ResourceVersion {
		t.Errorf("a broker PUT as read: resourceVersion %s -> %s (%v)", br.ResourceVersion, u.ResourceVersion, err)
	}

	store := apiserver.NewTestStore(t)
	fake := osbtest.New(t)
	cb := &catalog.Broker{Spec: catalog.BrokerSpec{URL: fake.URL(), RelistBehavior: "Duration", RelistDuration: "15m"}}
	cb.Name = "rest"
	if cb, err = store.CreateBroker(ctx, cb, nil); err != nil {
		t.Fatal(err)
	}
	rest := serve(t, store, cb).client.ServicecatalogV1beta1().ClusterServiceBrokers()
	up, err := rest.Patch(ctx, "rest", types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"x"}}}`), metav1.PatchOptions{})
	if err != nil || up.Generation != cb.Generation {
		t.Errorf("a label of a broker registered with relistDuration 15m: generation %d -> %d (%v)", cb.Generation, up.Generation, err)
	}
}

// TestBindingReplacedFromItsManifest: kubectl replace with the manifest a
// binding was created from (no externalID, no secretName: the catalog
// filled them in) keeps what was filled in, as kube-apiserver keeps a
// Service's clusterIP.
func TestBindingReplacedFromItsManifest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if _, err := b.client.ServicecatalogV1beta1().ServiceInstances("team").Create(ctx, newInstance("team", "db"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bc := b.client.ServicecatalogV1beta1().ServiceBindings("team")
	manifest := func() *v1beta1.ServiceBinding {
		return &v1beta1.ServiceBinding{ObjectMeta: metav1.ObjectMeta{Name: "cred", Namespace: "team"},
			Spec: v1beta1.ServiceBindingSpec{InstanceRef: v1beta1.LocalObjectReference{Name: "db"}}}
	}
	created, err := bc.Create(ctx, manifest(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := manifest()
	r.Labels = map[string]string{"app": "web"}
	got, err := bc.Update(ctx, r, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("a replace with the manifest and a label: %v", err)
	}
	if got.Spec.ExternalID != created.Spec.ExternalID || got.Spec.SecretName != created.Spec.SecretName || got.Labels["app"] != "web" {
		t.Errorf("after the replace: externalID %q, secretName %q, labels %v", got.Spec.ExternalID, got.Spec.SecretName, got.Labels)
	}
}

// TestBrokerFinalizersRefused: a broker is deleted at once, with its
// classes and plans, so a finalizer would be kept and shown but hold
// nothing: it is refused (422) rather than ignored.
func TestBrokerFinalizersRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	bc := b.client.ServicecatalogV1beta1().ClusterServiceBrokers()
	_, err := bc.Patch(ctx, "fake", types.MergePatchType, []byte(`{"metadata":{"finalizers":["example.com/keep"]}}`), metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) {
		t.Errorf("a finalizer on a broker: %v, want 422", err)
	}
}

// TestResourceVersionFromTheFuture: a get or a watch at least as new as a
// resourceVersion the catalog has not given is kube-apiserver's 504 with
// the cause ResourceVersionTooLarge, which client-go's reflector acts on,
// not an answer as of an older revision (a watch that would skip every
// change up to it).
func TestResourceVersionFromTheFuture(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ic := b.client.ServicecatalogV1beta1().ServiceInstances("team")
	in, err := ic.Create(ctx, newInstance("team", "db"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	future := "1000000"
	if _, err := ic.Get(ctx, "db", metav1.GetOptions{ResourceVersion: future}); !apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) {
		t.Errorf("a get at resourceVersion %s: %v", future, err)
	}
	if _, err := ic.Get(ctx, "db", metav1.GetOptions{ResourceVersion: in.ResourceVersion}); err != nil {
		t.Errorf("a get at its own resourceVersion: %v", err)
	}
	w, err := ic.Watch(ctx, metav1.ListOptions{ResourceVersion: future})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var ev watch.Event
	select {
	case ev = <-w.ResultChan():
	case <-time.After(20 * time.Second):
		t.Fatalf("a watch from resourceVersion %s: nothing within 20 s", future)
	}
	if status, ok := ev.Object.(*metav1.Status); !ok || status.Code != 504 || status.Details == nil || len(status.Details.Causes) == 0 ||
		status.Details.Causes[0].Type != metav1.CauseTypeResourceVersionTooLarge {
		t.Errorf("a watch from resourceVersion %s: %s %+v", future, ev.Type, ev.Object)
	}
}
