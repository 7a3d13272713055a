package apiserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/apiserver"
	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/eventually"
)

func newInstance(ns, name string) *v1beta1.ServiceInstance {
	return &v1beta1.ServiceInstance{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": name}},
		Spec: v1beta1.ServiceInstanceSpec{PlanReference: v1beta1.PlanReference{
			ClusterServiceClassExternalName: "fake-service", ClusterServicePlanExternalName: "sync",
		}},
	}
}

// TestCreateValidation: the catalog's validation comes back as a 422 with
// field paths; a taken name as 409 AlreadyExists.
func TestCreateValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.client.ServicecatalogV1beta1().ServiceInstances("team")
	bad := newInstance("team", "bad")
	bad.Spec.ClusterServicePlanExternalName = ""
	_, err := c.Create(ctx, bad, metav1.CreateOptions{})
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) {
		t.Fatalf("create naming no plan of a class of several: %v", err)
	}
	causes := status.Status().Details.Causes
	if len(causes) != 1 || causes[0].Field != "spec.clusterServicePlanExternalName" {
		t.Errorf("causes: %+v", causes)
	}
	if _, err := c.Create(ctx, newInstance("team", "db"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, newInstance("team", "db"), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("second create: %v", err)
	}
	gen := newInstance("team", "")
	gen.GenerateName = "db-"
	got, err := c.Create(ctx, gen, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Name) <= 3 || got.GenerateName != "db-" {
		t.Errorf("generateName: name %q, generateName %q", got.Name, got.GenerateName)
	}
}

// TestUpdateConflictAndPatch: a stale resourceVersion is a 409; a merge
// patch applies to the newest state; a spec change is a new generation.
func TestUpdateConflictAndPatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.client.ServicecatalogV1beta1().ServiceInstances("team")
	in, err := c.Create(ctx, newInstance("team", "db"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if in.Generation != 1 || in.UID == "" || in.CreationTimestamp.IsZero() {
		t.Errorf("created: generation %d, uid %q, creationTimestamp %v", in.Generation, in.UID, in.CreationTimestamp)
	}
	if _, err := b.store.GetInstance(ctx, string(in.UID)); err != nil {
		t.Errorf("uid is not the catalog id: %v", err)
	}
	stale := in.DeepCopy()
	in.Labels["tier"] = "gold"
	updated, err := c.Update(ctx, in, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.ResourceVersion == in.ResourceVersion || updated.Generation != 1 {
		t.Errorf("label update: resourceVersion %s -> %s, generation %d", in.ResourceVersion, updated.ResourceVersion, updated.Generation)
	}
	stale.Labels["tier"] = "silver"
	if _, err := c.Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("update with a stale resourceVersion: %v", err)
	}
	patch, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{"note": "hi"}},
		"spec":     map[string]any{"parameters": map[string]any{"size": 2}},
	})
	patched, err := c.Patch(ctx, "db", types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if patched.Annotations["note"] != "hi" || patched.Labels["tier"] != "gold" || patched.Generation != 2 {
		t.Errorf("patched: annotations %v, labels %v, generation %d", patched.Annotations, patched.Labels, patched.Generation)
	}
	if patched.Spec.Parameters == nil || string(patched.Spec.Parameters.Raw) != `{"size":2}` {
		t.Errorf("parameters: %+v", patched.Spec.Parameters)
	}
	// The status subresource changes status only.
	patched.Status.DashboardURL = "https://dash"
	patched.Labels["ignored"] = "yes"
	st, err := c.UpdateStatus(ctx, patched, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status.DashboardURL != "https://dash" || st.Labels["ignored"] != "" {
		t.Errorf("status update: dashboard %q, labels %v", st.Status.DashboardURL, st.Labels)
	}
	if _, err := c.UpdateStatus(ctx, patched, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("status update with a stale resourceVersion: %v", err)
	}
	// Read-only kinds refuse writes.
	_, err = b.client.ServicecatalogV1beta1().ClusterServiceClasses().Create(ctx, &v1beta1.ClusterServiceClass{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	if !apierrors.IsMethodNotSupported(err) {
		t.Errorf("create a class: %v", err)
	}
}

// TestStoreAndAPISeeEachOther: objects written through catalog.Store are
// in the API and the other way round.
func TestStoreAndAPISeeEachOther(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	in := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: "fake-service", ClusterServicePlanExternalName: "sync"}}
	in.Name, in.Namespace = "from-store", "team"
	if _, err := b.store.CreateInstance(ctx, in); err != nil {
		t.Fatal(err)
	}
	got, err := b.client.ServicecatalogV1beta1().ServiceInstances("team").Get(ctx, "from-store", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(got.UID) != in.ID || got.Spec.ClusterServicePlanRef == nil || got.ResourceVersion != strconv.FormatInt(in.ResourceVersion, 10) {
		t.Errorf("from the store: %+v", got)
	}
	if _, err := b.client.ServicecatalogV1beta1().ServiceInstances("team").Create(ctx, newInstance("team", "from-api"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stored, err := b.store.GetInstanceByName(ctx, "team", "from-api")
	if err != nil {
		t.Fatal(err)
	}
	if stored.Labels["app"] != "from-api" || stored.Spec.UserInfo == nil {
		t.Errorf("in the store: %+v", stored)
	}
	classes, err := b.client.ServicecatalogV1beta1().ClusterServiceClasses().List(ctx, metav1.ListOptions{FieldSelector: "spec.externalName=fake-service"})
	if err != nil || len(classes.Items) != 1 {
		t.Fatalf("classes by spec.externalName: %v %+v", err, classes)
	}
	list, err := b.client.ServicecatalogV1beta1().ServiceInstances("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil || len(list.Items) != 1 || list.Continue == "" {
		t.Fatalf("first page: %v %+v", err, list)
	}
	next, err := b.client.ServicecatalogV1beta1().ServiceInstances("").List(ctx, metav1.ListOptions{Limit: 1, Continue: list.Continue})
	if err != nil || len(next.Items) != 1 || next.Items[0].Name == list.Items[0].Name {
		t.Fatalf("second page: %v %+v", err, next)
	}
}

func nextEvent(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch ended")
			}
			if ev.Type == watch.Bookmark {
				continue
			}
			return ev
		case <-time.After(10 * time.Second):
			t.Fatal("no event within 10s")
		}
	}
}

// TestWatch: ADDED, MODIFIED, DELETED in order from a list's
// resourceVersion, the deletion finished by the engine's FinalizeInstance;
// a too old resourceVersion is an ERROR event with 410 Expired.
func TestWatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.client.ServicecatalogV1beta1().ServiceInstances("team")
	list, err := c.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion, FieldSelector: "metadata.name=db", AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := c.Create(ctx, newInstance("team", "other"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	in, err := c.Create(ctx, newInstance("team", "db"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, w); ev.Type != watch.Added || ev.Object.(*v1beta1.ServiceInstance).Name != "db" {
		t.Fatalf("first event: %s %+v", ev.Type, ev.Object)
	}
	if err := c.Delete(ctx, "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := nextEvent(t, w)
	got := ev.Object.(*v1beta1.ServiceInstance)
	if ev.Type != watch.Modified || got.DeletionTimestamp == nil || len(got.Finalizers) != 1 || got.Finalizers[0] != apiserver.Finalizer {
		t.Fatalf("second event: %s %+v", ev.Type, got.ObjectMeta)
	}
	if err := b.store.FinalizeInstance(ctx, string(in.UID), catalog.EventRecord{Type: "Normal", Reason: "Deprovisioned"}); err != nil {
		t.Fatal(err)
	}
	ev = nextEvent(t, w)
	if ev.Type != watch.Deleted {
		t.Fatalf("third event: %s", ev.Type)
	}
	if rv := ev.Object.(*v1beta1.ServiceInstance).ResourceVersion; rv <= got.ResourceVersion {
		t.Errorf("DELETED at resourceVersion %s, after %s", rv, got.ResourceVersion)
	}
	if _, err := c.Get(ctx, "db", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get after deletion: %v", err)
	}

	// Drop the history: a watch from before it is told 410.
	rev, err := b.store.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Feed().PruneBefore(ctx, rev); err != nil {
		t.Fatal(err)
	}
	old, err := c.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Stop()
	ev = nextEvent(t, old)
	status, ok := ev.Object.(*metav1.Status)
	if ev.Type != watch.Error || !ok || status.Code != 410 || status.Reason != metav1.StatusReasonExpired {
		t.Fatalf("watch from a pruned resourceVersion: %s %+v", ev.Type, ev.Object)
	}
}

// TestKubectlDeleteWait: kubectl delete waits until the engine removes the
// row, which it learns from a watch.
func TestKubectlDeleteWait(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	in, err := b.client.ServicecatalogV1beta1().ServiceInstances("team").Create(ctx, newInstance("team", "db"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := b.kubectl(nil, "delete", "serviceinstance", "db", "-n", "team", "--wait", "--timeout=30s")
		done <- err
	}()
	// Play the engine: finish the deletion once it is asked for.
	eventually.Succeeds(t, 20*time.Second, func(ctx context.Context) error {
		got, err := b.store.GetInstance(ctx, string(in.UID))
		if err != nil {
			t.Fatal(err)
		}
		if got.DeletionTimestamp == nil {
			return errors.New("kubectl did not delete")
		}
		return nil
	})
	select {
	case err := <-done:
		t.Fatalf("kubectl returned before the row was removed: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := b.store.FinalizeInstance(ctx, string(in.UID), catalog.EventRecord{Type: "Normal", Reason: "Deprovisioned"}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("kubectl delete --wait did not return")
	}
}

// TestReferencesWait: through the Kubernetes API as through the REST API,
// an instance naming a class or plan not offered yet and a binding naming
// an instance not created yet are stored, without references, also in a
// dry run; the instance created later is the binding's.
func TestReferencesWait(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	sc := b.client.ServicecatalogV1beta1()
	for _, tc := range []struct {
		name        string
		class, plan string
	}{
		{"no-class", "mysql", "small"},
		{"no-plan", "fake-service", "bigger"},
	} {
		in := newInstance("team", tc.name)
		in.Spec.ClusterServiceClassExternalName, in.Spec.ClusterServicePlanExternalName = tc.class, tc.plan
		if _, err := sc.ServiceInstances("team").Create(ctx, in, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("dry run of %s: %v", tc.name, err)
		}
		got, err := sc.ServiceInstances("team").Create(ctx, in, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got.Spec.ClusterServiceClassRef != nil || got.Spec.ClusterServicePlanRef != nil {
			t.Errorf("%s resolved to %+v %+v", tc.name, got.Spec.ClusterServiceClassRef, got.Spec.ClusterServicePlanRef)
		}
	}
	binding := &v1beta1.ServiceBinding{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "team"},
		Spec: v1beta1.ServiceBindingSpec{InstanceRef: v1beta1.LocalObjectReference{Name: "later"}}}
	if _, err := sc.ServiceBindings("team").Create(ctx, binding, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("dry run of a binding of an instance not created yet: %v", err)
	}
	created, err := sc.ServiceBindings("team").Create(ctx, binding, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a binding of an instance not created yet: %v", err)
	}
	later, err := sc.ServiceInstances("team").Create(ctx, newInstance("team", "later"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := b.store.GetBinding(ctx, string(created.UID))
	if err != nil {
		t.Fatal(err)
	}
	if in, err := b.store.InstanceOf(ctx, stored); err != nil || in.ID != string(later.UID) {
		t.Errorf("the binding is not linked to the instance created after it: %v", err)
	}
}
