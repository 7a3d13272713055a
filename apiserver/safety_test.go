package apiserver_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
)

// TestExternalIDUnique: a second instance or binding with another one's
// spec.externalID is refused with 409, the cause naming the field, in any
// namespace (OSB ids are global to a broker).
func TestExternalIDUnique(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	in := func(ns, name string) *v1beta1.ServiceInstance {
		return &v1beta1.ServiceInstance{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: v1beta1.ServiceInstanceSpec{
				PlanReference: v1beta1.PlanReference{ClusterServiceClassExternalName: "fake-service", ClusterServicePlanExternalName: "sync"},
				ExternalID:    "shared-instance-id"}}
	}
	if _, err := b.client.ServicecatalogV1beta1().ServiceInstances("a").Create(ctx, in("a", "db"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := b.client.ServicecatalogV1beta1().ServiceInstances("b").Create(ctx, in("b", "db"), metav1.CreateOptions{})
	checkFieldConflict(t, err)

	bind := func(name string) *v1beta1.ServiceBinding {
		return &v1beta1.ServiceBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "a"},
			Spec: v1beta1.ServiceBindingSpec{InstanceRef: v1beta1.LocalObjectReference{Name: "db"}, ExternalID: "shared-binding-id"}}
	}
	if _, err := b.client.ServicecatalogV1beta1().ServiceBindings("a").Create(ctx, bind("one"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = b.client.ServicecatalogV1beta1().ServiceBindings("a").Create(ctx, bind("two"), metav1.CreateOptions{})
	checkFieldConflict(t, err)
}

func checkFieldConflict(t *testing.T, err error) {
	t.Helper()
	var st apierrors.APIStatus
	if !apierrors.IsConflict(err) || !errorsAs(err, &st) {
		t.Fatalf("duplicate externalID: %v, want 409 Conflict", err)
	}
	s := st.Status()
	if s.Code != http.StatusConflict || s.Details == nil || len(s.Details.Causes) != 1 || s.Details.Causes[0].Field != "spec.externalID" {
		t.Fatalf("duplicate externalID: status %+v, want a cause naming spec.externalID", s)
	}
}

func errorsAs(err error, st *apierrors.APIStatus) bool {
	s, ok := err.(apierrors.APIStatus)
	*st = s
	return ok
}

// TestImmutableRefs: a patch that changes the class or plan reference
// Bindery resolved is 422 Invalid naming the field.
func TestImmutableRefs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	in := &v1beta1.ServiceInstance{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "a"},
		Spec: v1beta1.ServiceInstanceSpec{PlanReference: v1beta1.PlanReference{ClusterServiceClassExternalName: "fake-service", ClusterServicePlanExternalName: "sync"}}}
	if _, err := b.client.ServicecatalogV1beta1().ServiceInstances("a").Create(ctx, in, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := b.client.ServicecatalogV1beta1().ServiceInstances("a").Patch(ctx, "db", types.MergePatchType,
		[]byte(`{"spec":{"clusterServicePlanRef":{"name":"somebody-else"}}}`), metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.clusterServicePlanRef.name") {
		t.Fatalf("changing the plan reference: %v, want 422 Invalid naming spec.clusterServicePlanRef.name", err)
	}
}

// TestBrokerInputRefused: a broker whose URL holds credentials, or whose
// metadata PostgreSQL cannot store (a NUL byte), is 422 Invalid naming the
// field, never a 500, and the credentials are not quoted back.
func TestBrokerInputRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.client.ServicecatalogV1beta1().ClusterServiceBrokers()
	for _, tc := range []struct {
		name  string
		url   string
		annot map[string]string
		field string
	}{
		{"credentials in the URL", "http://user:hunter2@broker.example", nil, "spec.url"},
		{"a NUL byte in an annotation", "http://broker.example", map[string]string{"note": "a\x00b"}, "metadata.annotations[note]"},
	} {
		_, err := c.Create(ctx, &v1beta1.ClusterServiceBroker{ObjectMeta: metav1.ObjectMeta{Name: "refused", Annotations: tc.annot},
			Spec: v1beta1.ClusterServiceBrokerSpec{CommonServiceBrokerSpec: v1beta1.CommonServiceBrokerSpec{URL: tc.url}}}, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: %v, want 422 Invalid naming %s without the password", tc.name, err, tc.field)
		}
	}
}
