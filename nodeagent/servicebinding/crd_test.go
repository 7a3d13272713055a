package servicebinding_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sbv1 "github.com/bindery-dev/bindery/apis/servicebinding/v1"
	sbv1beta1 "github.com/bindery-dev/bindery/apis/servicebinding/v1beta1"
	"github.com/bindery-dev/bindery/nodeagent/servicebinding"
)

// TestWatchFollowsCRDs: the controller watches a Provisioned Service's kind
// once a binding names it. When the kind's CRD is deleted, the watch stops
// (its informer would otherwise log "Failed to watch" for ever) and the
// binding says the service is missing; when the CRD comes back, the watch
// starts again: a service created afterwards is projected.
func TestWatchFollowsCRDs(t *testing.T) {
	b := setup(t, admissionregistrationv1.Ignore)
	ctx := t.Context()
	c, ns := b.c, b.ns
	createAccountServiceCRD(t, c)
	create(t, c, secret(ns, "db-1"), secret(ns, "db-2"))
	// service creates the service with status.binding.name secretName.
	service := func(secretName string) {
		t.Helper()
		svc := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "com.example/v1alpha1", "kind": "AccountService",
			"metadata": map[string]any{"namespace": ns, "name": "prod-account-service"},
		}}
		create(t, c, svc)
		svc.Object["status"] = map[string]any{"binding": map[string]any{"name": secretName}}
		if err := c.Status().Update(ctx, svc); err != nil {
			t.Fatal(err)
		}
	}
	service("db-1")
	d := deployment(ns, "online-banking", nil, "app")
	create(t, c, d)
	sb := binding(ns, "account-service", sbv1.ServiceBindingServiceReference{APIVersion: "com.example/v1alpha1", Kind: "AccountService", Name: "prod-account-service"}, deploymentRef("online-banking"))
	create(t, c, sb)
	sb = waitReady(t, c, sb, metav1.ConditionTrue, "Projected")

	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	crd.SetName("accountservices.com.example")
	if err := c.Delete(ctx, crd); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the CRD gone", func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(crd), crd.DeepCopy()); !apierrors.IsNotFound(err) {
			return fmt.Errorf("CRD: %v", err)
		}
		return nil
	})
	waitReady(t, c, sb, metav1.ConditionFalse, servicebinding.ReasonServiceMissing)
	// A reflector retries a failed watch after 0.8 s, then 1.6, 3.2, 6.4
	// and 12.8 s, and controller-runtime logs each failure: in 15 s a
	// watch left running says so a few times.
	_, mark := b.logs.since(0)
	time.Sleep(15 * time.Second)
	lines, _ := b.logs.since(mark)
	for _, l := range lines {
		if strings.Contains(l, "Failed to watch") && strings.Contains(strings.ToLower(l), "accountservice") {
			t.Errorf("a watch of the deleted kind still runs: %s", l)
		}
	}

	createAccountServiceCRD(t, c)
	service("db-2")
	waitReady(t, c, sb, metav1.ConditionTrue, "Projected")
	eventually(t, "Deployment projects db-2", func(ctx context.Context) error {
		var got appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKeyFromObject(d), &got); err != nil {
			return err
		}
		return projected(&got.Spec.Template.Spec, string(sb.UID), "db-2", "/bindings", "account-service")
	})
}

// TestBindingDirectoryNotDotDot: spec.name "." or ".." would mount the
// Secret over $SERVICE_BINDING_ROOT or the directory above it; the CRD
// refuses them, and takes any other name of its characters.
func TestBindingDirectoryNotDotDot(t *testing.T) {
	b := setup(t, admissionregistrationv1.Ignore)
	svc := sbv1.ServiceBindingServiceReference{APIVersion: "v1", Kind: "Secret", Name: "db"}
	for i, name := range []string{".", "..", "..x", ".x", "x..", "a.b-c", strings.Repeat("a", 253)} {
		sb := binding(b.ns, fmt.Sprintf("sb-%d", i), svc, deploymentRef("app"))
		sb.Spec.Name = name
		err := b.c.Create(t.Context(), sb)
		if refused := apierrors.IsInvalid(err); refused != (name == "." || name == "..") {
			t.Errorf("spec.name %q: %v", name, err)
		}
	}
}

// TestWorkloadKindImmutable: a binding's workload apiVersion and kind
// cannot change (as servicebinding/runtime, the specification's reference
// implementation, has it), in v1 and v1beta1; its name or selector can.
// The controller finds the workloads a binding is projected into among
// those of the kind the binding names, so a binding re-pointed to another
// kind used to leave the workloads of the first projected, through its
// deletion too.
func TestWorkloadKindImmutable(t *testing.T) {
	b := setup(t, admissionregistrationv1.Ignore)
	ctx, c := t.Context(), b.c
	create(t, c, secret(b.ns, "db"))
	sb := binding(b.ns, "db", secretRef("db"), deploymentRef("web"))
	create(t, c, sb)
	for _, tc := range []struct {
		workload sbv1.ServiceBindingWorkloadReference
		refused  bool
	}{
		{sbv1.ServiceBindingWorkloadReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "web"}, true},
		{sbv1.ServiceBindingWorkloadReference{APIVersion: "batch/v1", Kind: "Deployment", Name: "web"}, true},
		{sbv1.ServiceBindingWorkloadReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "api"}, false},
		{sbv1.ServiceBindingWorkloadReference{APIVersion: "apps/v1", Kind: "Deployment",
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"bind": "yes"}}}, false},
	} {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(sb), sb); err != nil {
				return err
			}
			sb.Spec.Workload = tc.workload
			return c.Update(ctx, sb)
		})
		if refused := apierrors.IsInvalid(err); refused != tc.refused || (err != nil && !refused) {
			t.Errorf("workload changed to %+v: %v, want refused %v", tc.workload, err, tc.refused)
		}
	}
	old := &sbv1beta1.ServiceBinding{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(sb), old); err != nil {
		t.Fatal(err)
	}
	old.Spec.Workload.Kind = "StatefulSet"
	if err := c.Update(ctx, old); !apierrors.IsInvalid(err) {
		t.Errorf("v1beta1: workload kind changed: %v, want refused", err)
	}
}
