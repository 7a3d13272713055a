package apiserver_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/kubetest"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// svcatNamespaced drives svcat v0.3.1 with its default scope, the
// namespace's, as a team does with a broker of its own: Carol, who holds
// edit in the team's namespace (deploy/bindery's aggregated roles),
// registers the user-provided-service broker there with its credentials in
// a Secret of the namespace, syncs it, lists brokers, classes and plans,
// provisions by class and plan names, binds, unbinds, deprovisions and
// deregisters. Its classes and plans are the namespace's only; Victor
// (view) reads them, Alice (no rights) does not.
func svcatNamespaced(t *testing.T, a *aggregated, step func(string, func(*testing.T))) {
	admin := newSvcat(t, a.cluster.KubeconfigFor(kubetest.Admin))
	teamCLI := newSvcat(t, a.cluster.KubeconfigFor(carol))
	ups := osbtest.New(t, osbtest.WithBasicAuth("ups", "ups-pass"), osbtest.WithCatalog(upsCatalog()), osbtest.WithCredentials(upsCredentials))
	const broker = "ups-broker-ns"
	upsClass, upsPlan := "4f6e6cf6-ffdd-425f-a2c7-3c9258ad2468", "86064792-7ea2-467b-af93-ac9694d96d52"
	ctx := t.Context()
	kubectl := func(user string, args ...string) string {
		t.Helper()
		return a.kubectl(user, nil, args...)
	}

	step("namespaced: register", func(t *testing.T) {
		kubectl(carol, "create", "secret", "generic", "ups-auth", "-n", team, "--from-literal=username=ups", "--from-literal=password=ups-pass")
		out := teamCLI.must(t, "register", broker, "--url", ups.URL(), "--basic-secret", "ups-auth", "--namespace", team)
		d := parseSvcat(out)
		wantFields(t, "register", d, map[string]string{"Name": broker, "Scope": "namespace", "Namespace": team, "URL": ups.URL()})
		if ref := kubectl(carol, "get", "servicebroker", broker, "-n", team, "-o", "jsonpath={.spec.authInfo.basic.secretRef}"); ref != `{"name":"ups-auth"}` {
			t.Errorf("the broker's secretRef is %s", ref)
		}
		kubectl(carol, "wait", "--for=condition=Ready", "servicebroker/"+broker, "-n", team, "--timeout=30s")
		if n := ups.Count(osbtest.VerbCatalog); n == 0 {
			t.Error("the broker's catalog was never fetched")
		}
	})

	step("namespaced: get brokers, classes and plans", func(t *testing.T) {
		// svcat's default scope, all: the cluster's brokers and the
		// namespace's.
		d := sameShape(t, "get-brokers.txt", admin.must(t, "get", "brokers", "-n", team))
		if row := d.table("").row("NAME", "bindery"); row == nil || row["NAMESPACE"] != "" {
			t.Errorf("get brokers: bindery is %v", row)
		}
		if row := d.table("").row("NAME", broker); row == nil || row["NAMESPACE"] != team || row["URL"] != ups.URL() || row["STATUS"] != "Ready" {
			t.Errorf("get brokers: %s is %v", broker, row)
		}
		d = sameShape(t, "get-brokers.txt", teamCLI.must(t, "get", "brokers", "--scope", "namespace", "-n", team))
		wantRows(t, "get-brokers.txt", d.table(""), [][]string{{broker, team, ups.URL(), "Ready"}})

		d = sameShape(t, "get-classes.txt", teamCLI.must(t, "get", "classes", "-n", team))
		wantRowSet(t, "get-classes.txt", nsRows(d, team), [][]string{
			{"user-provided-service", team, broker, "A user provided service"},
			{"user-provided-service-single-plan", team, broker, "A user provided service"},
			{"user-provided-service-with-schemas", team, broker, "A user provided service"},
		})
		d = sameShape(t, "get-plans.txt", teamCLI.must(t, "get", "plans", "-n", team))
		wantRowSet(t, "get-plans.txt", nsRows(d, team), [][]string{
			{"default", team, "user-provided-service", "Sample plan description"},
			{"premium", team, "user-provided-service", "Premium plan"},
			{"default", team, "user-provided-service-single-plan", "Sample plan description"},
			{"default", team, "user-provided-service-with-schemas", "Plan with parameter and response schemas"},
		})
		// Another namespace sees none of them, with svcat or kubectl.
		for _, what := range []string{"classes", "plans"} {
			d := parseSvcat(admin.must(t, "get", what, "-n", "default"))
			if rows := nsRows(d, team).rows; len(rows) > 0 {
				t.Errorf("svcat get %s -n default lists %q", what, rows)
			}
		}
		if out := kubectl(kubetest.Admin, "get", "servicebrokers,serviceclasses,serviceplans", "-n", "default", "-o", "name"); strings.TrimSpace(out) != "" {
			t.Errorf("kubectl get -n default: %q", out)
		}
		out := kubectl(carol, "get", "servicebrokers,serviceclasses,serviceplans", "-n", team, "-o", "name")
		if n := strings.Count(out, "servicebroker.servicecatalog.k8s.io/"+broker); n != 1 {
			t.Errorf("kubectl get -n %s:\n%s", team, out)
		}
		if n := strings.Count(out, "serviceclass.servicecatalog.k8s.io/"); n != 3 {
			t.Errorf("kubectl get -n %s: %d classes:\n%s", team, n, out)
		}
		if n := strings.Count(out, "serviceplan.servicecatalog.k8s.io/"); n != 4 {
			t.Errorf("kubectl get -n %s: %d plans:\n%s", team, n, out)
		}
		out = kubectl(kubetest.Admin, "get", "serviceplans", "-A")
		for _, want := range []string{"NAMESPACE", "EXTERNAL-NAME", "BROKER", "CLASS", team, broker, upsClass} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl get serviceplans -A: no %q in\n%s", want, out)
			}
		}
		out = kubectl(kubetest.Admin, "get", "servicebrokers", "-A")
		for _, want := range []string{"NAMESPACE", "URL", "STATUS", team, broker, ups.URL(), "Ready"} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl get servicebrokers -A: no %q in\n%s", want, out)
			}
		}
	})

	step("namespaced: svcat's default scope as edit and view", func(t *testing.T) {
		// At scope all, svcat reads the cluster's brokers beside the
		// namespace's: the browse role lets every authenticated user
		// read them, never the Secrets they name.
		for _, user := range []string{carol, victor} {
			cli := newSvcat(t, a.cluster.KubeconfigFor(user))
			d := sameShape(t, "get-brokers.txt", cli.must(t, "get", "brokers", "-n", team))
			if row := d.table("").row("NAME", "bindery"); row == nil || row["NAMESPACE"] != "" {
				t.Errorf("%s: get brokers: bindery is %v", user, row)
			}
			if row := d.table("").row("NAME", broker); row == nil || row["NAMESPACE"] != team {
				t.Errorf("%s: get brokers: %s is %v", user, broker, row)
			}
			if out := cli.must(t, "describe", "broker", "bindery", "-n", team); !strings.Contains(out, "bindery") {
				t.Errorf("%s: describe broker bindery:\n%s", user, out)
			}
			// The cluster's classes are listed beside the team's.
			// (describe class lists the ServicePlans of every namespace
			// whatever the scope, which stays refused: a team's plans
			// are its own.)
			if rows := nsRows(parseSvcat(cli.must(t, "get", "classes", "-n", team)), "").rows; len(rows) == 0 {
				t.Errorf("%s: svcat get classes lists no class of the cluster's", user)
			}
			if out, err := a.cluster.KubectlAs(t, user, nil, "auth", "can-i", "get", "secrets", "-n", systemNamespace); err == nil || strings.TrimSpace(out) != "no" {
				t.Errorf("%s may read Secrets in %s: %q, %v", user, systemNamespace, out, err)
			}
		}
	})

	step("namespaced: who may", func(t *testing.T) {
		// Victor views the team's namespace: he reads its brokers, classes
		// and plans, and registers none.
		if out := kubectl(victor, "get", "servicebrokers,serviceclasses,serviceplans", "-n", team, "-o", "name"); !strings.Contains(out, broker) {
			t.Errorf("victor listing the team's brokers: %q", out)
		}
		kubectl(victor, "get", "servicebroker", broker, "-n", team, "--subresource=status")
		manifest := []byte("apiVersion: servicecatalog.k8s.io/v1beta1\nkind: ServiceBroker\nmetadata:\n  name: victors\n  namespace: " + team + "\nspec:\n  url: " + ups.URL() + "\n")
		if _, err := a.cluster.KubectlAs(t, victor, manifest, "create", "-f", "-"); err == nil || !strings.Contains(err.Error(), "Forbidden") {
			t.Errorf("victor registering a broker: %v, want Forbidden", err)
		}
		if _, err := a.cluster.KubectlAs(t, kubetest.Alice, nil, "get", "serviceclasses", "-n", team); err == nil || !strings.Contains(err.Error(), "Forbidden") {
			t.Errorf("alice listing the team's classes: %v, want Forbidden", err)
		}
		// Nobody edits what the broker's catalog says.
		if _, err := a.cluster.KubectlAs(t, carol, nil, "delete", "serviceclass", upsClass, "-n", team); err == nil || !strings.Contains(err.Error(), "Forbidden") {
			t.Errorf("carol deleting a class: %v, want Forbidden", err)
		}
	})

	step("namespaced: sync", func(t *testing.T) {
		cat := upsCatalog()
		gold := true
		cat[0].Plans = append(cat[0].Plans, osbtest.Plan{ID: "0b7a42c4-5f0e-4a57-9e1c-3d8f9b6a2e11", Name: "gold", Description: "Gold plan", Free: &gold})
		ups.SetCatalog(cat)
		wantGolden(t, "sync-broker-ns.txt", teamCLI.must(t, "sync", "broker", broker, "-n", team))
		if got := kubectl(carol, "get", "servicebroker", broker, "-n", team, "-o", "jsonpath={.spec.relistRequests}"); got != "1" {
			t.Errorf("relistRequests after sync: %q", got)
		}
		eventually.Succeeds(t, 30*time.Second, func(context.Context) error {
			d := parseSvcat(teamCLI.must(t, "get", "plans", "-n", team))
			if nsRows(d, team).row("NAME", "gold") == nil {
				return fmt.Errorf("no plan gold after the sync")
			}
			return nil
		})
	})

	step("namespaced: provision, bind, unbind, deprovision", func(t *testing.T) {
		out := teamCLI.must(t, "provision", "ups-instance", "-n", team, "--class", "user-provided-service", "--plan", "default",
			"--params-json", `{"param1": "value1"}`, "--wait")
		// svcat shows an instance's cluster-scoped class and plan only, as
		// it did with Service Catalog.
		wantFields(t, "provision", parseSvcat(out), map[string]string{"Name": "ups-instance", "Namespace": team,
			"Status": "/Ready - The instance was provisioned successfully @ .*/", "Class": "", "Plan": ""})
		spec := kubectl(carol, "get", "serviceinstance", "ups-instance", "-n", team,
			"-o", "jsonpath={.spec.serviceClassName} {.spec.servicePlanName} {.spec.serviceClassRef.name} {.spec.servicePlanRef.name} {.status.externalProperties.servicePlanExternalName}")
		if want := strings.Join([]string{upsClass, upsPlan, upsClass, upsPlan, "default"}, " "); spec != want {
			t.Errorf("the instance names %q, want %q", spec, want)
		}
		// Provisioned through the team's broker, with its parameters.
		id := kubectl(carol, "get", "serviceinstance", "ups-instance", "-n", team, "-o", "jsonpath={.spec.externalID}")
		i := slices.IndexFunc(ups.Instances(), func(in osbtest.Instance) bool { return in.ID == id })
		if i < 0 || ups.Instances()[i].Parameters["param1"] != "value1" {
			t.Fatalf("the team's broker has no instance %s with the parameters", id)
		}

		out = teamCLI.must(t, "bind", "ups-instance", "-n", team, "--name", "ups-binding", "--wait")
		wantFields(t, "bind", parseSvcat(out), map[string]string{"Name": "ups-binding", "Namespace": team, "Secret": "ups-binding", "Instance": "ups-instance",
			"Status": "/Ready - Injected bind result @ .*/"})
		secret, err := a.kube.CoreV1().Secrets(team).Get(ctx, "ups-binding", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if string(secret.Data["special-key-1"]) != "special-value-1" {
			t.Errorf("the binding's Secret holds %v", secret.Data)
		}

		teamCLI.must(t, "unbind", "ups-instance", "-n", team, "--wait")
		kubectl(carol, "wait", "--for=delete", "servicebinding/ups-binding", "-n", team, "--timeout=30s")
		if n := len(ups.Bindings()); n != 0 {
			t.Errorf("the broker still has %d bindings", n)
		}
		teamCLI.must(t, "deprovision", "ups-instance", "-n", team, "--wait")
		if _, err := teamCLI.run("", "get", "instance", "ups-instance", "-n", team); err == nil {
			t.Error("the instance is still there after deprovision --wait")
		}
		if slices.ContainsFunc(ups.Instances(), func(in osbtest.Instance) bool { return in.ID == id }) {
			t.Errorf("the broker still has instance %s", id)
		}
	})

	step("namespaced: an instance by external names, applied", func(t *testing.T) {
		manifest := "apiVersion: servicecatalog.k8s.io/v1beta1\nkind: ServiceInstance\nmetadata:\n  name: by-names\n  namespace: " + team +
			"\nspec:\n  serviceClassExternalName: user-provided-service\n  servicePlanExternalName: premium\n"
		a.kubectl(carol, []byte(manifest), "apply", "-f", "-")
		kubectl(carol, "wait", "--for=condition=Ready", "serviceinstance/by-names", "-n", team, "--timeout=30s")
		out := kubectl(carol, "get", "serviceinstance", "by-names", "-n", team)
		for _, want := range []string{"CLASS", "PLAN", "user-provided-service", "premium", "Ready"} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl get serviceinstance: no %q in\n%s", want, out)
			}
		}
		// The same names in another namespace name nothing there.
		a.kubectl(kubetest.Admin, []byte(strings.Replace(manifest, "namespace: "+team, "namespace: default", 1)), "apply", "-f", "-")
		eventually.Succeeds(t, 30*time.Second, func(context.Context) error {
			reason := kubectl(kubetest.Admin, "get", "serviceinstance", "by-names", "-n", "default", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].reason}`)
			if reason != "ReferencesNonexistentServiceClass" {
				return fmt.Errorf("the instance in default has Ready reason %q", reason)
			}
			return nil
		})
		kubectl(kubetest.Admin, "delete", "serviceinstance", "by-names", "-n", "default", "--timeout=30s")
		kubectl(carol, "delete", "serviceinstance", "by-names", "-n", team, "--timeout=30s")
	})

	step("namespaced: deregister", func(t *testing.T) {
		out := teamCLI.must(t, "deregister", broker, "-n", team)
		if want := fmt.Sprintf("Successfully removed broker %q\n", broker); out != want {
			t.Errorf("deregister: %q, want %q", out, want)
		}
		if out := kubectl(carol, "get", "servicebrokers,serviceclasses,serviceplans", "-n", team, "-o", "name"); strings.TrimSpace(out) != "" {
			t.Errorf("after deregister:\n%s", out)
		}
	})
}

// nsRows is the rows of d's table in namespace ns, with the table's header.
func nsRows(d *svcatDoc, ns string) *svcatBlock {
	b := d.table("")
	if b == nil {
		return &svcatBlock{}
	}
	col := slices.Index(b.header, "NAMESPACE")
	out := &svcatBlock{header: b.header}
	for _, r := range b.rows {
		if col >= 0 && r[col] == ns {
			out.rows = append(out.rows, r)
		}
	}
	return out
}
