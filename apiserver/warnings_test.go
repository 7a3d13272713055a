package apiserver_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/client/clientset/versioned"
)

// warnings collects the Warning headers a client is sent, as kubectl's
// handler prints them ("Warning: …").
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

// TestWarnings: an instance naming a class or plan no broker offers, and a
// binding naming an instance that does not exist, are accepted (Service
// Catalog's semantics, for GitOps applies) with a warning, which kubectl
// prints; what exists draws none.
func TestWarnings(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", b.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	got := &warnings{}
	cfg.WarningHandler = got
	client, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	instance := func(name, class, plan string) *v1beta1.ServiceInstance {
		return &v1beta1.ServiceInstance{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team"},
			Spec: v1beta1.ServiceInstanceSpec{PlanReference: v1beta1.PlanReference{ClusterServiceClassExternalName: class, ClusterServicePlanExternalName: plan}}}
	}
	for _, tc := range []struct {
		in   *v1beta1.ServiceInstance
		want string
	}{
		{instance("ok", "fake-service", "sync"), ""},
		{instance("typo-class", "fake-servic", "sync"), `No service class named "fake-servic" is offered by the cluster's brokers: the instance waits until a broker offers it.`},
		{instance("typo-plan", "fake-service", "synk"), `Service class "fake-service" has no plan named "synk": the instance waits until its broker offers it.`},
	} {
		if _, err := client.ServicecatalogV1beta1().ServiceInstances("team").Create(ctx, tc.in, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", tc.in.Name, err)
		}
		w := got.take()
		if tc.want == "" && len(w) != 0 || tc.want != "" && !slices.ContainsFunc(w, func(s string) bool { return strings.HasPrefix(s, tc.want) }) {
			t.Errorf("create %s: warnings %q, want %q", tc.in.Name, w, tc.want)
		}
	}
	sb := &v1beta1.ServiceBinding{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "team"},
		Spec: v1beta1.ServiceBindingSpec{InstanceRef: v1beta1.LocalObjectReference{Name: "nope"}}}
	if _, err := client.ServicecatalogV1beta1().ServiceBindings("team").Create(ctx, sb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if w := got.take(); len(w) != 1 || !strings.HasPrefix(w[0], `No instance named "nope" exists in namespace "team"`) {
		t.Errorf("binding of a missing instance: warnings %q", w)
	}
}
