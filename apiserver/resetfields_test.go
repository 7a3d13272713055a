package apiserver_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestApplyOwnsNoStatus: a write to the main resource leaves the status
// as it was, so, as kube-apiserver's storages do (their reset fields), a
// server-side apply whose manifest carries a status records no ownership
// of it; and one of the status subresource owns no spec. It used to
// record f:status for a manager that had changed none of it.
func TestApplyOwnsNoStatus(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.client.ServicecatalogV1beta1()
	for _, tc := range []struct {
		name  string
		apply func() ([]metav1.ManagedFieldsEntry, error)
	}{
		{"instance", func() ([]metav1.ManagedFieldsEntry, error) {
			in, err := c.ServiceInstances("a").Patch(ctx, "db", types.ApplyPatchType, []byte(`{"apiVersion":"servicecatalog.k8s.io/v1beta1","kind":"ServiceInstance",
				"metadata":{"name":"db","namespace":"a"},"spec":{"clusterServiceClassExternalName":"fake-service","clusterServicePlanExternalName":"sync"},
				"status":{"asyncOpInProgress":true,"orphanMitigationInProgress":true}}`), metav1.PatchOptions{FieldManager: "gitops"})
			if err != nil {
				return nil, err
			}
			return in.ManagedFields, nil
		}},
		{"binding", func() ([]metav1.ManagedFieldsEntry, error) {
			bd, err := c.ServiceBindings("a").Patch(ctx, "app", types.ApplyPatchType, []byte(`{"apiVersion":"servicecatalog.k8s.io/v1beta1","kind":"ServiceBinding",
				"metadata":{"name":"app","namespace":"a"},"spec":{"instanceRef":{"name":"db"}},"status":{"asyncOpInProgress":true}}`), metav1.PatchOptions{FieldManager: "gitops"})
			if err != nil {
				return nil, err
			}
			return bd.ManagedFields, nil
		}},
		{"broker", func() ([]metav1.ManagedFieldsEntry, error) {
			br, err := c.ClusterServiceBrokers().Patch(ctx, "applied", types.ApplyPatchType, []byte(`{"apiVersion":"servicecatalog.k8s.io/v1beta1","kind":"ClusterServiceBroker",
				"metadata":{"name":"applied"},"spec":{"url":"http://broker.example"},"status":{"reconciledGeneration":7}}`), metav1.PatchOptions{FieldManager: "gitops"})
			if err != nil {
				return nil, err
			}
			return br.ManagedFields, nil
		}},
	} {
		managed, err := tc.apply()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, e := range managed {
			if e.Manager == "gitops" && e.FieldsV1 != nil && strings.Contains(e.FieldsV1.GetRawString(), `"f:status"`) {
				t.Errorf("%s: the apply's manager owns %s; want no status field", tc.name, e.FieldsV1.GetRawString())
			}
		}
	}
}
