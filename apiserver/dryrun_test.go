package apiserver_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/apiserver"
	"github.com/bindery-dev/bindery/catalog"
)

// TestDryRunUpdateChecked: an update or a patch with dryRun=All answers
// what the same request would answer without it (kubectl diff and
// --dry-run=server rely on it): 422 for what the catalog refuses, naming
// the field, and the object as the write would leave it otherwise; and it
// records nothing, no new resourceVersion and no history entry. The same
// for deletes. Dry runs of updates and deletes used to skip the catalog's
// checks and answer 200 for any change.
func TestDryRunUpdateChecked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.client.ServicecatalogV1beta1()
	created := createDB(t, b)
	history := func() int {
		t.Helper()
		events, err := b.store.Events(ctx, string(created.UID), 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(events)
	}
	entries := history()
	for _, tc := range []struct{ path, body, field string }{
		{"namespaces/a/serviceinstances/db", `{"spec":{"clusterServicePlanExternalName":"nope"}}`, "spec.clusterServicePlanExternalName"},
		{"namespaces/a/serviceinstances/db", `{"spec":{"parameters":{"a":"\u0000"}}}`, "spec.parameters.a"},
		{"namespaces/a/serviceinstances/db", `{"metadata":{"annotations":{"a":"\u0000"}}}`, "metadata.annotations[a]"},
		{"namespaces/a/serviceinstances/db/status", `{"status":{"lastOperation":"\u0000"}}`, "status.lastOperation"},
		{"clusterservicebrokers/fake", `{"spec":{"url":"http://user:hunter2@broker.example"}}`, "spec.url"},
	} {
		var code int
		res := c.RESTClient().Patch(types.MergePatchType).AbsPath("/apis/servicecatalog.k8s.io/v1beta1", tc.path).
			Param("dryRun", "All").Body([]byte(tc.body)).Do(ctx)
		raw, _ := res.Raw()
		res.StatusCode(&code)
		if code != http.StatusUnprocessableEntity || !strings.Contains(string(raw), `"field":"`+tc.field+`"`) {
			t.Errorf("dry run of PATCH %s %s: %d %.300s, want 422 naming %s", tc.path, tc.body, code, raw, tc.field)
		}
	}
	got, err := c.ServiceInstances("a").Patch(ctx, "db", types.MergePatchType, []byte(`{"spec":{"parameters":{"size":"large"}}}`),
		metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil || got.Generation != created.Generation+1 || got.ResourceVersion != created.ResourceVersion {
		t.Fatalf("a dry run of a good change: %v, %+v; want the object as it would be, at its resourceVersion", err, got.ObjectMeta)
	}
	// Deletes: the broker has an instance, which a dry run is told as the
	// delete would be; the instance's dry run shows it marked.
	dry := metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}
	dryErr := c.ClusterServiceBrokers().Delete(ctx, "fake", dry)
	if realErr := c.ClusterServiceBrokers().Delete(ctx, "fake", metav1.DeleteOptions{}); realErr == nil || apierrors.ReasonForError(dryErr) != apierrors.ReasonForError(realErr) {
		t.Errorf("a dry run of deleting a broker with an instance: %v; the delete: %v", dryErr, realErr)
	}
	var marked v1beta1.ServiceInstance
	if err := c.RESTClient().Delete().Namespace("a").Resource("serviceinstances").Name("db").Param("dryRun", "All").Do(ctx).Into(&marked); err != nil || marked.DeletionTimestamp == nil {
		t.Errorf("a dry run of deleting the instance: %v, deletionTimestamp %v; want it as the delete would leave it", err, marked.DeletionTimestamp)
	}
	stored, err := c.ServiceInstances("a").Get(ctx, "db", metav1.GetOptions{})
	if err != nil || stored.ResourceVersion != created.ResourceVersion || stored.Spec.Parameters != nil || stored.DeletionTimestamp != nil || history() != entries {
		t.Errorf("after dry runs: %v, resourceVersion %s (was %s), parameters %v, %d history entries (were %d)",
			err, stored.ResourceVersion, created.ResourceVersion, stored.Spec.Parameters, history(), entries)
	}
}

// TestDryRunChecksQuota: a dry run answers a namespace's quota as the
// write would: a create past it, of an instance or a binding, and one
// of a name taken, are refused (kubectl apply --dry-run=server
// and admission previews rely on it), and the quota's count does not move.
func TestDryRunChecksQuota(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.client.ServicecatalogV1beta1()
	createDB(t, b)
	app := createApp(t, b)
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	taken := &v1beta1.ServiceInstance{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "a"},
		Spec: v1beta1.ServiceInstanceSpec{PlanReference: v1beta1.PlanReference{ClusterServiceClassExternalName: "fake-service", ClusterServicePlanExternalName: "sync"}}}
	_, real := c.ServiceInstances("a").Create(ctx, taken.DeepCopy(), metav1.CreateOptions{})
	if _, err := c.ServiceInstances("a").Create(ctx, taken, dry); !apierrors.IsAlreadyExists(err) || real == nil || err.Error() != real.Error() {
		t.Errorf("a dry-run create of a name taken: %v, want what the create answers: %v", err, real)
	}
	one := 1
	if _, err := b.store.SetQuota(ctx, &catalog.Quota{Namespace: "a", Instances: &one, Bindings: &one, PaidPlans: true}); err != nil {
		t.Fatal(err)
	}
	other := &v1beta1.ServiceInstance{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "a"},
		Spec: v1beta1.ServiceInstanceSpec{PlanReference: v1beta1.PlanReference{ClusterServiceClassExternalName: "fake-service", ClusterServicePlanExternalName: "sync"}}}
	_, real = c.ServiceInstances("a").Create(ctx, other.DeepCopy(), metav1.CreateOptions{})
	if _, err := c.ServiceInstances("a").Create(ctx, other, dry); !apierrors.IsForbidden(err) || real == nil || err.Error() != real.Error() {
		t.Errorf("a dry-run create of a second instance past a quota of one: %v, want what the create answers: %v", err, real)
	}
	second := &v1beta1.ServiceBinding{ObjectMeta: metav1.ObjectMeta{Name: "second", Namespace: "a"}, Spec: app.Spec}
	if _, err := c.ServiceBindings("a").Create(ctx, second, dry); !apierrors.IsForbidden(err) {
		t.Errorf("a dry-run create of a second binding past a quota of one: %v, want 403", err)
	}
	// A plan change past the plan's limit, dry and not (its checks are
	// not queued: this guards the update path, which answered right).
	if _, err := b.store.SetQuota(ctx, &catalog.Quota{Namespace: "a", PaidPlans: true,
		Plans: []catalog.PlanQuota{{Class: "fake-service", Plan: "async", Instances: 0}}}); err != nil {
		t.Fatal(err)
	}
	change := []byte(`{"spec":{"clusterServicePlanExternalName":"async"}}`)
	_, real = c.ServiceInstances("a").Patch(ctx, "db", types.MergePatchType, change, metav1.PatchOptions{})
	if _, err := c.ServiceInstances("a").Patch(ctx, "db", types.MergePatchType, change, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsForbidden(err) || real == nil || err.Error() != real.Error() {
		t.Errorf("a dry-run plan change past the plan's limit: %v, want what the change answers: %v", err, real)
	}
	st, err := b.store.QuotaStatus(ctx, "a")
	if err != nil || st.Instances.Used != 1 || st.Bindings.Used != 1 {
		t.Errorf("the quota's counts after the dry runs: %+v %+v, %v; want 1 and 1", st.Instances, st.Bindings, err)
	}
}

// TestDryRunCreateAnswersTheObject: a dry-run create answers the object
// as the create would make it (kubectl apply --dry-run=server -o yaml and
// admission previews show it): generation 1, the finalizer, the
// externalID and the references the catalog fills in, no
// resourceVersion, and nothing recorded. It used to answer the request's
// object back, none of those filled in.
func TestDryRunCreateAnswersTheObject(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.client.ServicecatalogV1beta1()
	createDB(t, b)
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	spec := v1beta1.ServiceInstanceSpec{PlanReference: v1beta1.PlanReference{ClusterServiceClassExternalName: "fake-service", ClusterServicePlanExternalName: "sync"}}
	in, err := c.ServiceInstances("a").Create(ctx, &v1beta1.ServiceInstance{ObjectMeta: metav1.ObjectMeta{Name: "dry", Namespace: "a"}, Spec: spec}, dry)
	if err != nil {
		t.Fatal(err)
	}
	if in.Generation != 1 || in.ResourceVersion != "" || in.UID == "" || !slices.Contains(in.Finalizers, apiserver.Finalizer) ||
		in.Spec.ExternalID == "" || in.Spec.ClusterServiceClassRef == nil || in.Spec.ClusterServicePlanRef == nil {
		t.Errorf("a dry-run create of an instance answered %+v %+v; want it as the create makes it", in.ObjectMeta, in.Spec)
	}
	bd, err := c.ServiceBindings("a").Create(ctx, &v1beta1.ServiceBinding{ObjectMeta: metav1.ObjectMeta{Name: "dry", Namespace: "a"},
		Spec: v1beta1.ServiceBindingSpec{InstanceRef: v1beta1.LocalObjectReference{Name: "db"}}}, dry)
	if err != nil {
		t.Fatal(err)
	}
	if bd.Generation != 1 || bd.ResourceVersion != "" || !slices.Contains(bd.Finalizers, apiserver.Finalizer) || bd.Spec.ExternalID == "" || bd.Spec.SecretName != "dry" {
		t.Errorf("a dry-run create of a binding answered %+v %+v; want it as the create makes it", bd.ObjectMeta, bd.Spec)
	}
	br, err := c.ClusterServiceBrokers().Create(ctx, &v1beta1.ClusterServiceBroker{ObjectMeta: metav1.ObjectMeta{Name: "dry"},
		Spec: v1beta1.ClusterServiceBrokerSpec{CommonServiceBrokerSpec: v1beta1.CommonServiceBrokerSpec{URL: "http://broker.example"}}}, dry)
	if err != nil {
		t.Fatal(err)
	}
	if br.Generation != 1 || br.ResourceVersion != "" || br.UID == "" {
		t.Errorf("a dry-run create of a broker answered %+v; want it as the create makes it", br.ObjectMeta)
	}
	if _, err := c.ServiceInstances("a").Get(ctx, "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the dry-run instance after the dry run: %v, want not found", err)
	}
	if _, err := c.ServiceBindings("a").Get(ctx, "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the dry-run binding after the dry run: %v, want not found", err)
	}
	if _, err := c.ClusterServiceBrokers().Get(ctx, "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the dry-run broker after the dry run: %v, want not found", err)
	}
}
