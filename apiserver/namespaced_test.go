package apiserver_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

const serviceBrokerYAML = `apiVersion: servicecatalog.k8s.io/v1beta1
kind: ServiceBroker
metadata:
  name: team-broker
  namespace: NAMESPACE
spec:
  url: URL
`

// TestNamespacedKinds drives ServiceBroker, ServiceClass and ServicePlan
// with kubectl and the typed client: discovery, a broker registered in one
// namespace whose classes and plans only that namespace lists, with
// Service Catalog's columns, field selectors, the broker's /status, a
// watch that sees the classes arrive, an instance naming them, the same
// broker name in another namespace, and deregistration.
func TestNamespacedKinds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	fake := osbtest.New(t, osbtest.WithCatalog(osbtest.GenerateCatalog(2, 2)))

	out := b.mustKubectl(nil, "api-resources", "--api-group=servicecatalog.k8s.io", "-o", "wide", "--no-headers")
	for _, want := range []string{"servicebrokers", "serviceclasses", "serviceplans"} {
		line := ""
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 0 && f[0] == want {
				line = l
			}
		}
		if !strings.Contains(line, " true ") || !strings.Contains(line, "all,svcat") {
			t.Errorf("api-resources: %s is not namespaced in the categories all and svcat: %q", want, line)
		}
	}

	// A watch of the namespace's classes, from before the broker exists.
	w, err := b.client.ServicecatalogV1beta1().ServiceClasses("team").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	b.mustKubectl([]byte(strings.NewReplacer("NAMESPACE", "team", "URL", fake.URL()).Replace(serviceBrokerYAML)), "apply", "-f", "-")
	b.mustKubectl(nil, "wait", "--for=condition=Ready", "servicebroker/team-broker", "-n", "team", "--timeout=30s")

	for range 2 {
		select {
		case ev := <-w.ResultChan():
			c, ok := ev.Object.(*v1beta1.ServiceClass)
			if ev.Type != watch.Added || !ok || c.Namespace != "team" || c.Spec.ServiceBrokerName != "team-broker" {
				t.Errorf("watch: %s %#v", ev.Type, ev.Object)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the watch saw no class")
		}
	}

	out = b.mustKubectl(nil, "get", "servicebrokers", "-n", "team")
	for _, want := range []string{"URL", "STATUS", "AGE", "team-broker", fake.URL(), "Ready"} {
		if !strings.Contains(out, want) {
			t.Errorf("get servicebrokers: no %q in\n%s", want, out)
		}
	}
	out = b.mustKubectl(nil, "get", "serviceclasses", "-n", "team")
	for _, want := range []string{"EXTERNAL-NAME", "BROKER", "fake-service-1", "fake-service-2", "team-broker"} {
		if !strings.Contains(out, want) {
			t.Errorf("get serviceclasses: no %q in\n%s", want, out)
		}
	}
	out = b.mustKubectl(nil, "get", "serviceplans", "-A", "--no-headers")
	if n := len(strings.Split(strings.TrimSpace(out), "\n")); n != 4 || !strings.HasPrefix(out, "team ") || !strings.Contains(out, "plan-1") {
		t.Errorf("get serviceplans -A: %d rows\n%s", n, out)
	}
	// Nothing of it elsewhere: another namespace, the cluster's classes.
	for _, args := range [][]string{
		{"get", "serviceclasses", "-n", "other", "-o", "name"},
		{"get", "serviceplans", "-n", "other", "-o", "name"},
		{"get", "servicebrokers", "-n", "other", "-o", "name"},
		{"get", "clusterserviceclasses", "--field-selector", "spec.clusterServiceBrokerName=team-broker", "-o", "name"},
	} {
		if out := b.mustKubectl(nil, args...); strings.TrimSpace(out) != "" {
			t.Errorf("kubectl %s: %q", strings.Join(args, " "), out)
		}
	}
	out = b.mustKubectl(nil, "get", "serviceclasses", "-A", "--field-selector", "spec.serviceBrokerName=team-broker,spec.externalName=fake-service-2", "-o", "name")
	if n := len(strings.Fields(out)); n != 1 {
		t.Errorf("field selector: %q", out)
	}
	class := strings.TrimPrefix(strings.TrimSpace(out), "serviceclass.servicecatalog.k8s.io/")
	out = b.mustKubectl(nil, "get", "serviceplans", "-n", "team", "--field-selector", "spec.serviceClassRef.name="+class, "-o", "jsonpath={.items[*].spec.externalName}")
	if out != "plan-1 plan-2" {
		t.Errorf("plans of %s: %q", class, out)
	}
	out = b.mustKubectl(nil, "get", "servicebroker", "team-broker", "-n", "team", "--subresource=status", "-o", "jsonpath={.status.serviceClassCount} {.status.servicePlanCount}")
	if out != "2 4" {
		t.Errorf("status subresource: %q", out)
	}

	// An instance names the namespace's class and plan; in another
	// namespace the same names resolve to nothing.
	for _, ns := range []string{"team", "other"} {
		in := &v1beta1.ServiceInstance{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
			Spec: v1beta1.ServiceInstanceSpec{PlanReference: v1beta1.PlanReference{ServiceClassExternalName: "fake-service-2", ServicePlanExternalName: "plan-1"}}}
		if _, err := b.client.ServicecatalogV1beta1().ServiceInstances(ns).Create(ctx, in, metav1.CreateOptions{}); err != nil {
			t.Fatalf("instance in %s: %v", ns, err)
		}
	}
	eventually.Succeeds(t, 30*time.Second, func(context.Context) error {
		out := b.mustKubectl(nil, "get", "serviceinstance", "db", "-n", "team", "-o", "jsonpath={.spec.serviceClassRef.name}")
		if out != class {
			return fmt.Errorf("the instance's serviceClassRef is %q, want %q", out, class)
		}
		return nil
	})
	out = b.mustKubectl(nil, "get", "serviceinstances", "-A")
	if !strings.Contains(out, "fake-service-2") || !strings.Contains(out, "plan-1") {
		t.Errorf("get serviceinstances -A:\n%s", out)
	}
	if out := b.mustKubectl(nil, "get", "serviceinstance", "db", "-n", "other", "-o", "jsonpath={.spec.serviceClassRef}"); out != "" {
		t.Errorf("the instance in other resolved to %q", out)
	}

	// The name is the namespace's: another team registers its own.
	b.mustKubectl([]byte(strings.NewReplacer("NAMESPACE", "other", "URL", fake.URL()).Replace(serviceBrokerYAML)), "apply", "-f", "-")
	if _, err := b.kubectl([]byte(strings.NewReplacer("NAMESPACE", "team", "URL", fake.URL()).Replace(serviceBrokerYAML)), "create", "-f", "-"); err == nil || !strings.Contains(err.Error(), "AlreadyExists") {
		t.Errorf("a second team-broker in team: %v", err)
	}

	b.mustKubectl(nil, "delete", "servicebroker", "team-broker", "-n", "other", "--wait", "--timeout=30s")
	// A broker with instances stays, as a ClusterServiceBroker does; once
	// the instance is gone (the engine's work, done here through the
	// catalog), it goes with its classes and plans.
	if _, err := b.kubectl(nil, "delete", "servicebroker", "team-broker", "-n", "team"); err == nil || !strings.Contains(err.Error(), "instances") {
		t.Errorf("deleting a broker with an instance: %v", err)
	}
	in, err := b.client.ServicecatalogV1beta1().ServiceInstances("team").Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.DeleteInstance(ctx, string(in.UID)); err != nil {
		t.Fatal(err)
	}
	if err := b.store.FinalizeInstance(ctx, string(in.UID), catalog.EventRecord{Type: "Normal", Reason: "Test"}); err != nil {
		t.Fatal(err)
	}
	b.mustKubectl(nil, "delete", "servicebroker", "team-broker", "-n", "team", "--wait", "--timeout=30s")
	if out := b.mustKubectl(nil, "get", "servicebrokers,serviceclasses,serviceplans", "-A", "-o", "name"); strings.Contains(out, "broker") {
		t.Errorf("after deregistration:\n%s", out)
	}
}
