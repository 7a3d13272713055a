package apiserver_test

import (
	"testing"

	"github.com/bindery-dev/bindery/internal/abandontest"
)

// TestAbandonThroughKubernetesAPI: removing Bindery's finalizer from an
// instance or a binding being deleted (kubectl's way, as svcat's
// --abandon does) removes it at once though its broker refuses, or never
// answers, the delete; the history names the Kubernetes user.
func TestAbandonThroughKubernetesAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	abandontest.Run(t, b.store, func(t *testing.T, kind, namespace, name, _ string) {
		resource := "serviceinstance"
		if kind == "binding" {
			resource = "servicebinding"
		}
		if out, err := b.kubectl(nil, "patch", resource, name, "-n", namespace, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`); err != nil {
			t.Fatalf("kubectl patch %s %s: %v\n%s", resource, name, err, out)
		}
	}, "Kubernetes user ")
}
