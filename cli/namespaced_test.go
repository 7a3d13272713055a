package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
)

// TestNamespacedBrokers walks a team's own broker through the CLI against
// a real catalog, broker and engine: registered with -n, listed and offered
// in its namespace only, provisioned from by class and plan name (the
// namespace's when no cluster broker offers the class, --scope to choose),
// updated, bound, relisted, described and deregistered; a token of another
// namespace finds none of it.
func TestNamespacedBrokers(t *testing.T) {
	w := setup(t, true)
	w.login(w.admin)

	r := w.must(0, "brokers", "register", "team-db", w.brokerURL, "-u", brokerUser, "-p", brokerPass, "-n", "team-a")
	contains(t, "register -n", r.out, "team-db", "Ready")
	if r = w.must(0, "brokers", "list"); strings.Contains(r.out, "team-db") {
		t.Errorf("the cluster's brokers list team-a's:\n%s", r.out)
	}
	r = w.must(0, "brokers", "list", "-n", "team-a")
	contains(t, "brokers list -n", r.out, "team-db", w.brokerURL)
	if r = w.must(0, "brokers", "list", "-n", "team-b"); strings.Contains(r.out, "team-db") {
		t.Errorf("team-b's brokers list team-a's:\n%s", r.out)
	}

	if r = w.must(0, "marketplace"); strings.Contains(r.out, "postgresql") {
		t.Errorf("the cluster's marketplace offers team-a's class:\n%s", r.out)
	}
	r = w.must(0, "marketplace", "-n", "team-a")
	contains(t, "marketplace -n", r.out, "NAMESPACE", "postgresql", "small, standard, large-async", "team-db", "team-a")
	if r = w.must(0, "marketplace", "-n", "team-b"); strings.Contains(r.out, "postgresql") {
		t.Errorf("team-b's marketplace offers team-a's class:\n%s", r.out)
	}
	r = w.must(0, "marketplace", "-n", "team-a", "-c", "postgresql")
	contains(t, "marketplace -n -c", r.out, "PLAN", "small", "large-async")
	w.must(ExitNotFound, "marketplace", "-c", "postgresql")
	r = w.must(0, "__complete", "-n", "team-a", "provision", "db", "-c", "")
	contains(t, "class completion -n", r.out, "postgresql")
	r = w.must(0, "__complete", "-n", "team-a", "brokers", "relist", "")
	contains(t, "broker completion -n", r.out, "team-db")

	// No cluster broker offers postgresql: the namespace's is used.
	r = w.must(0, "-n", "team-a", "provision", "db", "-c", "postgresql", "-p", "small", "--wait")
	contains(t, "provision -n", r.out, "team-a", "db", "postgresql", "small")
	in := w.instance("team-a", "db")
	if in.Spec.ServiceClassExternalName != "postgresql" || in.Spec.ClusterServiceClassExternalName != "" || in.Spec.ServicePlanRef == nil {
		t.Errorf("provisioned from team-a's class: %+v", in.Spec)
	}
	r = w.must(0, "-n", "team-a", "instances")
	contains(t, "instances -n", r.out, "db", "postgresql", "small", "Ready")
	w.must(0, "-n", "team-a", "update", "db", "-p", "standard", "--wait")
	if in := w.instance("team-a", "db"); in.Spec.ServicePlanExternalName != "standard" || in.Spec.ClusterServicePlanExternalName != "" {
		t.Errorf("plan changed in the namespace's scope: %+v", in.Spec)
	}
	r = w.must(0, "-n", "team-a", "bind", "app", "--instance", "db", "--wait")
	contains(t, "bind", r.out, "app", "Ready")
	r = w.must(0, "-n", "team-a", "describe", "instance", "db")
	contains(t, "describe instance", r.out, "Class:", "postgresql", "Plan:", "standard")

	// Once the cluster offers a class of the same name, it is the default;
	// --scope chooses.
	w.must(0, "brokers", "register", "builtin", w.brokerURL, "-u", brokerUser, "-p", brokerPass)
	w.must(0, "-n", "team-a", "provision", "shared", "-c", "postgresql", "-p", "small")
	if in := w.instance("team-a", "shared"); in.Spec.ClusterServiceClassExternalName != "postgresql" {
		t.Errorf("with a cluster class of the name: %+v", in.Spec)
	}
	w.must(0, "-n", "team-a", "provision", "own", "-c", "postgresql", "-p", "small", "--scope", "namespace")
	if in := w.instance("team-a", "own"); in.Spec.ServiceClassExternalName != "postgresql" {
		t.Errorf("--scope namespace: %+v", in.Spec)
	}
	w.must(ExitUsage, "-n", "team-a", "provision", "x", "-c", "postgresql", "-p", "small", "--scope", "galaxy")
	r = w.must(0, "marketplace", "-n", "team-a", "-o", "json")
	var offer struct{ Classes []map[string]any }
	if err := json.Unmarshal([]byte(r.out), &offer); err != nil || len(offer.Classes) != 2 {
		t.Errorf("marketplace -n -o json: %v\n%s", err, r.out)
	}

	// A token of team-b finds none of team-a's.
	other, _, err := w.store.IssueToken(context.Background(), catalog.TokenRequest{Role: catalog.RoleAdmin, Namespaces: []string{"team-b"}})
	if err != nil {
		t.Fatal(err)
	}
	w.env["BINDERY_TOKEN"] = other
	w.must(ExitForbidden, "brokers", "list", "-n", "team-a")
	w.must(ExitForbidden, "marketplace", "-n", "team-a")
	w.must(ExitNotFound, "describe", "broker", "team-db", "-n", "team-a")
	w.must(ExitNotFound, "brokers", "relist", "team-db", "-n", "team-a")
	w.must(ExitNotFound, "brokers", "deregister", "team-db", "-n", "team-a")
	w.must(ExitForbidden, "brokers", "deregister", "builtin") // the cluster's
	w.must(0, "brokers", "register", "their-db", w.brokerURL, "-u", brokerUser, "-p", brokerPass, "-n", "team-b")
	delete(w.env, "BINDERY_TOKEN")

	r = w.must(0, "brokers", "relist", "team-db", "-n", "team-a")
	contains(t, "relist -n", r.out, "team-db")
	r = w.must(0, "describe", "broker", "team-db", "-n", "team-a")
	contains(t, "describe broker -n", r.out, "Namespace:", "team-a", "URL:", w.brokerURL, "History:", "Ready")

	// Its plans are in use: deregistering waits for the instances.
	r = w.must(ExitFailed, "brokers", "deregister", "team-db", "-n", "team-a")
	contains(t, "deregister in use", r.errOut, "instances")
	w.must(0, "-n", "team-a", "unbind", "app", "--wait")
	for _, name := range []string{"db", "shared", "own"} {
		w.must(0, "-n", "team-a", "deprovision", name, "--wait")
	}
	r = w.must(0, "brokers", "deregister", "team-db", "-n", "team-a")
	contains(t, "deregister -n", r.out, "team-db", "deregistered from namespace team-a")
	w.must(ExitNotFound, "brokers", "deregister", "team-db", "-n", "team-a")
}

// instance reads an instance from the catalog.
func (w *world) instance(namespace, name string) *catalog.Instance {
	w.t.Helper()
	in, err := w.store.GetInstanceByName(context.Background(), namespace, name)
	if err != nil {
		w.t.Fatal(err)
	}
	return in
}
