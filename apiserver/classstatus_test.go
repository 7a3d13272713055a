package apiserver_test

import (
	"context"
	"net/http"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestClassAndPlanStatus: classes and plans have the status subresource
// Service Catalog gave them, listed by discovery; it reads the object,
// and since their status comes from brokers' catalogs, a write is 405.
func TestClassAndPlanStatus(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	res, err := b.client.Discovery().ServerResourcesForGroupVersion("servicecatalog.k8s.io/v1beta1")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, r := range res.APIResources {
		listed[r.Name] = true
	}
	for _, r := range []string{"clusterserviceclasses/status", "clusterserviceplans/status", "serviceclasses/status", "serviceplans/status"} {
		if !listed[r] {
			t.Errorf("discovery does not list %s", r)
		}
	}
	sc := b.client.ServicecatalogV1beta1()
	classes, err := sc.ClusterServiceClasses().List(ctx, metav1.ListOptions{})
	if err != nil || len(classes.Items) == 0 {
		t.Fatalf("classes: %v, %v", classes, err)
	}
	plans, err := sc.ClusterServicePlans().List(ctx, metav1.ListOptions{})
	if err != nil || len(plans.Items) == 0 {
		t.Fatalf("plans: %v, %v", plans, err)
	}
	rc := sc.RESTClient()
	for resource, name := range map[string]string{"clusterserviceclasses": classes.Items[0].Name, "clusterserviceplans": plans.Items[0].Name} {
		var code int
		raw, err := rc.Get().Resource(resource).Name(name).SubResource("status").Do(ctx).StatusCode(&code).Raw()
		if err != nil || code != http.StatusOK {
			t.Errorf("GET %s/%s/status: %d %v %.200s, want 200", resource, name, code, err, raw)
		}
		err = rc.Patch(types.MergePatchType).Resource(resource).Name(name).SubResource("status").
			Body([]byte(`{"status":{"removedFromBrokerCatalog":true}}`)).Do(ctx).Error()
		if !apierrors.IsMethodNotSupported(err) {
			t.Errorf("PATCH %s/%s/status: %v, want 405", resource, name, err)
		}
	}
}
