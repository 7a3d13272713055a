package apiserver_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/kubetest"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// TestSvcat drives every verb of svcat v0.3.1, Service Catalog's own
// command line (built by tools/svcat/build.sh), at cluster scope and then
// at its default, namespace, scope (svcatNamespaced), against
// Bindery behind a real kube-apiserver's aggregation layer with the
// engine running, as a Service Catalog user moving over would. Each output
// is compared with svcat's own golden file for the verb
// (cmd/svcat/testdata/output of its module) field by field: the same
// layout, and the values of the objects at hand. The objects are those of
// the goldens where the test can make them so: the broker serves the
// catalog of Service Catalog's user-provided-service broker, and the
// instances and bindings have the goldens' names and parameters.
//
// The subtests share one cluster and run in order; each leaves the state
// the next one starts from.
func TestSvcat(t *testing.T) {
	a := aggregate(t, true)
	sc := newSvcat(t, a.cluster.KubeconfigFor(kubetest.Admin))
	ups := osbtest.New(t, osbtest.WithBasicAuth("ups", "ups-pass"), osbtest.WithCatalog(upsCatalog()), osbtest.WithCredentials(upsCredentials))
	ctx := t.Context()
	admin := func(stdin string, args ...string) string {
		t.Helper()
		var in []byte
		if stdin != "" {
			in = []byte(stdin)
		}
		return a.kubectl(kubetest.Admin, in, args...)
	}
	admin("", "create", "namespace", "test-ns")
	admin("", "create", "secret", "generic", "ups-auth", "-n", systemNamespace, "--from-literal=username=ups", "--from-literal=password=ups-pass")
	// The Secrets svcat's goldens name as parameter sources.
	for _, ns := range []string{"test-ns", "default"} {
		admin("", "create", "secret", "generic", "instance-parameters", "-n", ns, `--from-literal=params={"secretparam1":"s1"}`)
		admin("", "create", "secret", "generic", "binding-parameters", "-n", ns, `--from-literal=params={"secretparam2":"s2"}`)
	}
	began := time.Now()
	step := func(name string, f func(t *testing.T)) {
		t.Helper()
		start := time.Now()
		t.Run(name, f)
		t.Logf("%s: %s", name, time.Since(start).Round(time.Millisecond))
	}

	step("register", func(t *testing.T) {
		out := sc.must(t, "register", "ups-broker", "--url", ups.URL(), "--basic-secret", "ups-auth", "--namespace", systemNamespace, "--scope", "cluster")
		wantGoldenExcept(t, "register-broker.txt", out, map[string]string{"URL": ups.URL()})
		if ref := admin("", "get", "clusterservicebroker", "ups-broker", "-o", "jsonpath={.spec.authInfo.basic.secretRef.namespace}/{.spec.authInfo.basic.secretRef.name}"); ref != systemNamespace+"/ups-auth" {
			t.Errorf("the broker's secretRef is %q", ref)
		}
		admin("", "wait", "--for=condition=Ready", "clusterservicebroker/ups-broker", "--timeout=30s")
	})

	step("get and describe brokers", func(t *testing.T) {
		d := sameShape(t, "get-brokers.txt", sc.must(t, "get", "brokers", "--scope", "cluster"))
		wantRows(t, "get-brokers.txt", d.table(""), [][]string{
			{"bindery", "", "/http://.*/", "Ready"},
			{"ups-broker", "", ups.URL(), "Ready"},
		})
		d = sameShape(t, "get-broker.txt", sc.must(t, "get", "broker", "ups-broker", "--scope", "cluster"))
		wantRows(t, "get-broker.txt", d.table(""), [][]string{{"ups-broker", "", ups.URL(), "Ready"}})
		wantGoldenExcept(t, "describe-broker.txt", sc.must(t, "describe", "broker", "ups-broker", "--scope", "cluster"), map[string]string{"URL": ups.URL()})
		for _, format := range []string{"json", "yaml"} {
			out := sc.must(t, "get", "broker", "ups-broker", "--scope", "cluster", "-o", format)
			sameDocument(t, "get-broker."+format, out,
				[]string{"metadata.uid", "metadata.resourceVersion", "metadata.creationTimestamp", "metadata.generation", "spec.url", "spec.relistRequests",
					"status.conditions[0].lastTransitionTime", "status.reconciledGeneration", "status.lastCatalogRetrievalTime"},
				// Bindery removes a broker at once, without a finalizer.
				[]string{"metadata.selfLink", "metadata.finalizers", "status.lastConditionState", "status.operationStartTime"})
		}
	})

	step("get and describe classes", func(t *testing.T) {
		d := sameShape(t, "get-classes.txt", sc.must(t, "get", "classes", "--scope", "cluster"))
		wantRowSet(t, "get-classes.txt", d.table(""), [][]string{
			{"postgresql", "", "bindery", "/A PostgreSQL database.*/"},
			{"user-provided-service", "", "ups-broker", "A user provided service"},
			{"user-provided-service-single-plan", "", "ups-broker", "A user provided service"},
			{"user-provided-service-with-schemas", "", "ups-broker", "A user provided service"},
		})
		// The class svcat's goldens show, as they show it.
		wantGolden(t, "get-class.txt", sc.must(t, "get", "class", "user-provided-service", "--scope", "cluster"))
		wantGolden(t, "describe-class.txt", sc.must(t, "describe", "class", "user-provided-service", "--scope", "cluster"))
		wantGolden(t, "describe-class.txt", sc.must(t, "describe", "class", "--kube-name", "4f6e6cf6-ffdd-425f-a2c7-3c9258ad2468"))
		for _, format := range []string{"json", "yaml"} {
			out := sc.must(t, "get", "class", "user-provided-service", "--scope", "cluster", "-o", format)
			sameDocument(t, "get-class."+format, out,
				[]string{"metadata.uid", "metadata.resourceVersion", "metadata.creationTimestamp"},
				[]string{"metadata.selfLink"})
		}
		_, err := sc.run("", "get", "class", "foo", "--scope", "cluster")
		if want := golden(t, "get-class-not-found-cluster.txt").blocks[0].text[0]; err == nil || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("get class foo: %v, want %q", err, want)
		}
	})

	step("get and describe plans", func(t *testing.T) {
		d := sameShape(t, "get-plans.txt", sc.must(t, "get", "plans", "--scope", "cluster"))
		wantRowSet(t, "get-plans.txt", d.table(""), [][]string{
			{"small", "", "postgresql", "/.+/"},
			{"standard", "", "postgresql", "/.+/"},
			{"large-async", "", "postgresql", "/.+/"},
			{"default", "", "user-provided-service", "Sample plan description"},
			{"premium", "", "user-provided-service", "Premium plan"},
			{"default", "", "user-provided-service-single-plan", "Sample plan description"},
			{"default", "", "user-provided-service-with-schemas", "Plan with parameter and response schemas"},
		})
		wantGolden(t, "get-plan.txt", sc.must(t, "get", "plan", "user-provided-service/default", "--scope", "cluster"))
		wantGolden(t, "get-plan.txt", sc.must(t, "get", "plan", "default", "--class", "user-provided-service", "--scope", "cluster"))
		wantGolden(t, "get-plan.txt", sc.must(t, "get", "plan", "--kube-name", "86064792-7ea2-467b-af93-ac9694d96d52", "--scope", "cluster"))
		wantGolden(t, "get-plans-by-class.txt", sc.must(t, "get", "plans", "--class", "user-provided-service", "--scope", "cluster"))
		// svcat lists a plan's instances with a label selector that holds
		// the plan's name itself, not its SHA-224 as Service Catalog's
		// labels do: against Service Catalog too it finds none, so the
		// golden without instances is the one to match.
		wantGolden(t, "describe-plan-without-schemas.txt", sc.must(t, "describe", "plan", "user-provided-service/premium", "--scope", "cluster"))
		// The user-provided-service broker's plan has an update schema
		// too, which the golden's plan had not.
		out := sc.must(t, "describe", "plan", "user-provided-service-with-schemas/default", "--scope", "cluster")
		d = parseSvcat(out)
		want := golden(t, "describe-plan-with-schemas.txt").shape()
		want = slices.Insert(want, 4, "[Instance Update Parameter Schema:]")
		if !slices.Equal(d.shape(), want) {
			t.Errorf("describe-plan-with-schemas.txt: layout %q, want %q", d.shape(), want)
		}
		wantFields(t, "describe-plan-with-schemas.txt", d, map[string]string{"Name": "default", "Kubernetes Name": "4dbcd97c-c9d2-4c6b-9503-4401a789b558",
			"Class": "user-provided-service-with-schemas", "Free": "true", "Status": "Active"})
		for _, title := range []string{"Instance Create Parameter Schema:", "Instance Update Parameter Schema:", "Binding Create Parameter Schema:"} {
			if s := d.section(title); s == nil || !slices.Contains(s.text, "param-1:") {
				t.Errorf("describe plan: %s is missing:\n%s", title, out)
			}
		}
		for _, format := range []string{"json", "yaml"} {
			out := sc.must(t, "get", "plan", "user-provided-service/default", "--scope", "cluster", "-o", format)
			sameDocument(t, "get-plan."+format, out,
				[]string{"metadata.uid", "metadata.resourceVersion", "metadata.creationTimestamp"},
				// Bindery keeps no default provision parameters (the
				// user-provided-service broker offers none either).
				[]string{"metadata.selfLink", "spec.defaultProvisionParameters"})
		}
	})

	step("marketplace", func(t *testing.T) {
		d := parseSvcat(sc.must(t, "marketplace"))
		row := d.table("").row("CLASS", "user-provided-service")
		if row == nil || row["PLANS"] != "default premium" || row["DESCRIPTION"] != "A user provided service" {
			t.Errorf("marketplace: user-provided-service is %v", row)
		}
		if row := d.table("").row("CLASS", "postgresql"); row == nil || row["PLANS"] != "small standard large-async" {
			t.Errorf("marketplace: postgresql is %v", row)
		}
	})

	// The instance of svcat's goldens, in test-ns: named by external names
	// as a manifest names them, with the goldens' parameters.
	const upsInstance = `apiVersion: servicecatalog.k8s.io/v1beta1
kind: ServiceInstance
metadata:
  name: ups-instance
  namespace: test-ns
spec:
  clusterServiceClassExternalName: user-provided-service
  clusterServicePlanExternalName: default
  parameters:
    param1: value1
    paramset:
      ps1: 1
      ps2: two
  parametersFrom:
  - secretKeyRef:
      name: instance-parameters
      key: params
`
	upsClass, upsPlan, premium := "4f6e6cf6-ffdd-425f-a2c7-3c9258ad2468", "86064792-7ea2-467b-af93-ac9694d96d52", "cc0d7529-18e8-416d-8946-6f7456acd589"
	step("provision and wait", func(t *testing.T) {
		out := sc.must(t, "provision", "ups-instance", "-n", "default", "--class", "user-provided-service", "--plan", "default",
			"--params-json", `{"param1": "value1", "paramset": {"ps1": 1, "ps2": "two"}}`, "--secret", "instance-parameters[params]", "--wait")
		// svcat names the class and plan by their Kubernetes names, the
		// golden's instance by external names.
		wantGoldenExcept(t, "provision-instance-and-wait.txt", out, map[string]string{"Namespace": "default", "Class": upsClass, "Plan": upsPlan})
		// What the broker got: the parameters and the Secret's, merged.
		id := admin("", "get", "serviceinstance", "ups-instance", "-n", "default", "-o", "jsonpath={.spec.externalID}")
		i := slices.IndexFunc(ups.Instances(), func(in osbtest.Instance) bool { return in.ID == id })
		if i < 0 {
			t.Fatalf("the broker has no instance %s", id)
		}
		if p := ups.Instances()[i].Parameters; p["param1"] != "value1" || p["secretparam1"] != "s1" {
			t.Errorf("the broker got parameters %v", p)
		}
	})

	step("provision", func(t *testing.T) {
		out := sc.must(t, "provision", "ups-params", "-n", "default", "--class", "user-provided-service", "--plan", "premium",
			"--param", "param-1=value-1", "--param", "param-2=value-2")
		d := sameShape(t, "provision-instance.txt", out)
		// The golden's instance had no parameters.
		wantFields(t, "provision-instance.txt", d, map[string]string{"Name": "ups-params", "Namespace": "default", "Class": upsClass, "Plan": premium})
		wantStatus(t, "provision-instance.txt", d, golden(t, "provision-instance.txt"))
		if got := d.section("Parameters:").text; !slices.Equal(got, []string{"param-1: value-1", "param-2: value-2"}) {
			t.Errorf("provision: parameters %q", got)
		}
		admin("", "wait", "--for=condition=Ready", "serviceinstance/ups-params", "-n", "default", "--timeout=30s")
		admin(upsInstance, "apply", "-f", "-")
		admin("", "wait", "--for=condition=Ready", "serviceinstance/ups-instance", "-n", "test-ns", "--timeout=30s")
	})

	step("get instances", func(t *testing.T) {
		wantGolden(t, "get-instances.txt", sc.must(t, "get", "instances", "-n", "test-ns"))
		wantGolden(t, "get-instance.txt", sc.must(t, "get", "instance", "ups-instance", "-n", "test-ns"))
		d := sameShape(t, "get-instances-all-namespaces.txt", sc.must(t, "get", "instances", "--all-namespaces"))
		wantRowSet(t, "get-instances-all-namespaces.txt", d.table(""), [][]string{
			{"ups-instance", "test-ns", "user-provided-service", "default", "Ready"},
			{"ups-instance", "default", upsClass, upsPlan, "Ready"},
			{"ups-params", "default", upsClass, premium, "Ready"},
		})
		// svcat filters on the class and plan as the spec names them.
		d = sameShape(t, "get-instances-all-namespaces-by-class.txt", sc.must(t, "get", "instances", "--all-namespaces", "--class", "user-provided-service"))
		wantRowSet(t, "get-instances-all-namespaces-by-class.txt", d.table(""), [][]string{{"ups-instance", "test-ns", "user-provided-service", "default", "Ready"}})
		d = sameShape(t, "get-instances-all-namespaces-by-plan.txt", sc.must(t, "get", "instances", "--all-namespaces", "--plan", upsPlan))
		wantRowSet(t, "get-instances-all-namespaces-by-plan.txt", d.table(""), [][]string{{"ups-instance", "default", upsClass, upsPlan, "Ready"}})
		wantGolden(t, "get-instances-all-namespaces-by-wrong-class.txt", sc.must(t, "get", "instances", "--all-namespaces", "--class", "wrong"))
		wantGolden(t, "get-instances-all-namespaces-by-wrong-plan.txt", sc.must(t, "get", "instances", "--all-namespaces", "--plan", "wrong"))
		for _, format := range []string{"json", "yaml"} {
			out := sc.must(t, "get", "instance", "ups-instance", "-n", "test-ns", "-o", format)
			sameDocument(t, "get-instance."+format, out,
				[]string{"metadata.uid", "metadata.resourceVersion", "metadata.creationTimestamp", "spec.externalID",
					"status.conditions[0].lastTransitionTime", "status.externalProperties.parameterChecksum",
					// The golden's fixture is half provisioned.
					"status.provisionStatus", "status.observedGeneration"},
				[]string{"metadata.selfLink", "status.lastConditionState", "status.userSpecifiedPlanName", "status.userSpecifiedClassName",
					// Bindery keeps a checksum of the parameters it sent,
					// not the parameters themselves.
					"status.externalProperties.parameters"})
		}
	})

	step("bind and wait", func(t *testing.T) {
		out := sc.must(t, "bind", "ups-instance", "-n", "test-ns", "--name", "ups-binding",
			"--params-json", `{"param1": "value1", "paramset": {"ps1": 1, "ps2": "two"}}`, "--secret", "binding-parameters[params]", "--wait")
		wantGolden(t, "bind-instance-and-wait.txt", out)
	})

	step("bind", func(t *testing.T) {
		out := sc.must(t, "bind", "ups-instance", "-n", "default", "--name", "ups-binding")
		// Bindery names the Secret after the binding at once, where the
		// golden's fixture had none yet.
		wantGoldenExcept(t, "bind-instance.txt", out, map[string]string{"Namespace": "default", "Secret": "ups-binding"})
		admin("", "wait", "--for=condition=Ready", "servicebinding/ups-binding", "-n", "default", "--timeout=30s")
	})

	step("get and describe bindings", func(t *testing.T) {
		wantGolden(t, "get-bindings.txt", sc.must(t, "get", "bindings", "-n", "test-ns"))
		wantGolden(t, "get-binding.txt", sc.must(t, "get", "binding", "ups-binding", "-n", "test-ns"))
		d := sameShape(t, "get-bindings-all-namespaces.txt", sc.must(t, "get", "bindings", "--all-namespaces"))
		wantRowSet(t, "get-bindings-all-namespaces.txt", d.table(""), golden(t, "get-bindings-all-namespaces.txt").table("").rows)
		// The Secret holds the broker's credentials (the goldens') and,
		// as servicebinding.io asks of a binding Secret, its type and
		// provider.
		extra := map[string]string{"type": "user-provided-service", "provider": "ups-broker"}
		wantGoldenSecret(t, "describe-binding.txt", sc.must(t, "describe", "binding", "ups-binding", "-n", "test-ns"), extra)
		wantGoldenSecret(t, "describe-binding-show-secrets.txt", sc.must(t, "describe", "binding", "ups-binding", "-n", "test-ns", "--show-secrets"), extra)
		for _, format := range []string{"json", "yaml"} {
			out := sc.must(t, "get", "binding", "ups-binding", "-n", "test-ns", "-o", format)
			sameDocument(t, "get-binding."+format, out,
				[]string{"metadata.uid", "metadata.resourceVersion", "metadata.creationTimestamp", "spec.externalID",
					"status.conditions[0].lastTransitionTime"},
				[]string{"metadata.selfLink", "status.lastConditionState",
					// Bindery keeps neither the parameters a binding was
					// created with nor their checksum in its status.
					"status.externalProperties"})
		}
		// The instances list their bindings.
		wantGolden(t, "describe-instance.txt", sc.must(t, "describe", "instance", "ups-instance", "-n", "test-ns"))
		out := sc.must(t, "describe", "instance", "ups-params", "-n", "default")
		if d := parseSvcat(out); d.table("Bindings:") != nil || !slices.ContainsFunc(d.blocks, func(b *svcatBlock) bool {
			return slices.Equal(b.text, []string{"No bindings defined"})
		}) {
			t.Errorf("describe instance ups-params, which has no bindings:\n%s", out)
		}
	})

	step("touch", func(t *testing.T) {
		updates := ups.Count(osbtest.VerbUpdate)
		sc.must(t, "touch", "instance", "ups-instance", "-n", "test-ns")
		if got := admin("", "get", "serviceinstance", "ups-instance", "-n", "test-ns", "-o", "jsonpath={.spec.updateRequests}"); got != "1" {
			t.Errorf("updateRequests after touch: %q", got)
		}
		// The engine sends the broker an update for the new generation.
		eventually.Succeeds(t, 30*time.Second, func(context.Context) error {
			got := admin("", "get", "serviceinstance", "ups-instance", "-n", "test-ns", "-o", "jsonpath={.metadata.generation} {.status.reconciledGeneration}")
			if n := ups.Count(osbtest.VerbUpdate); n != updates+1 || got != "2 2" {
				return fmt.Errorf("generation and reconciledGeneration %q, %d updates at the broker", got, n-updates)
			}
			return nil
		})
	})

	step("sync", func(t *testing.T) {
		// A plan the broker adds is there after a sync, with its labels:
		// svcat finds it by class and plan name.
		cat := upsCatalog()
		gold := true
		cat[0].Plans = append(cat[0].Plans, osbtest.Plan{ID: "f3b9c1a8-2c57-4a6e-9d0b-6a1e7c2d4b90", Name: "gold", Description: "Gold plan", Free: &gold})
		ups.SetCatalog(cat)
		wantGolden(t, "sync-broker.txt", sc.must(t, "sync", "broker", "ups-broker", "--scope", "cluster"))
		if got := admin("", "get", "clusterservicebroker", "ups-broker", "-o", "jsonpath={.spec.relistRequests}"); got != "1" {
			t.Errorf("relistRequests after sync: %q", got)
		}
		eventually.Succeeds(t, 30*time.Second, func(context.Context) error {
			_, err := sc.run("", "get", "plan", "user-provided-service/gold", "--scope", "cluster")
			return err
		})
	})

	step("unbind", func(t *testing.T) {
		wantGolden(t, "unbind-instance.txt", sc.must(t, "unbind", "-n", "default", "--name", "ups-binding"))
		admin("", "wait", "--for=delete", "servicebinding/ups-binding", "-n", "default", "--timeout=30s")
	})

	step("unbind and wait", func(t *testing.T) {
		wantGolden(t, "unbind-instance-and-wait.txt", sc.must(t, "unbind", "ups-instance", "-n", "test-ns", "--wait"))
		// svcat waits until the binding is Ready or Failed, which it still
		// is right after the delete, with Service Catalog as here.
		admin("", "wait", "--for=delete", "servicebinding/ups-binding", "-n", "test-ns", "--timeout=30s")
		if n := len(ups.Bindings()); n != 0 {
			t.Errorf("the broker still has %d bindings", n)
		}
	})

	step("unbind --abandon", func(t *testing.T) {
		sc.must(t, "bind", "ups-instance", "-n", "test-ns", "--name", "left-behind", "--wait")
		unbinds := ups.Count(osbtest.VerbUnbind)
		out := sc.must(t, "unbind", "-n", "test-ns", "--name", "left-behind", "--abandon", "-y")
		if !strings.Contains(out, "deleted left-behind") {
			t.Errorf("unbind --abandon:\n%s", out)
		}
		admin("", "wait", "--for=delete", "servicebinding/left-behind", "-n", "test-ns", "--timeout=30s")
		if n := ups.Count(osbtest.VerbUnbind); n != unbinds {
			t.Errorf("an abandoned binding was unbound at the broker (%d requests)", n-unbinds)
		}
		if n := len(ups.Bindings()); n != 1 {
			t.Errorf("the broker has %d bindings, want the abandoned one", n)
		}
		if _, err := a.kube.CoreV1().Secrets("test-ns").Get(ctx, "left-behind", metav1.GetOptions{}); err == nil {
			t.Error("the abandoned binding's Secret is still there")
		}
	})

	step("deprovision", func(t *testing.T) {
		wantGolden(t, "deprovision-instance.txt", sc.must(t, "deprovision", "ups-instance", "-n", "test-ns"))
		admin("", "wait", "--for=delete", "serviceinstance/ups-instance", "-n", "test-ns", "--timeout=30s")
	})

	step("deprovision and wait", func(t *testing.T) {
		wantGolden(t, "deprovision-instance-and-wait.txt", sc.must(t, "deprovision", "ups-instance", "-n", "default", "--wait"))
		if _, err := sc.run("", "get", "instance", "ups-instance", "-n", "default"); err == nil {
			t.Error("the instance is still there after deprovision --wait")
		}
	})

	step("deprovision --abandon", func(t *testing.T) {
		deprovisions := ups.Count(osbtest.VerbDeprovision)
		id := admin("", "get", "serviceinstance", "ups-params", "-n", "default", "-o", "jsonpath={.spec.externalID}")
		out := sc.must(t, "deprovision", "ups-params", "-n", "default", "--abandon", "-y", "--wait")
		if !strings.Contains(out, "deleted ups-params") {
			t.Errorf("deprovision --abandon:\n%s", out)
		}
		if _, err := sc.run("", "get", "instance", "ups-params", "-n", "default"); err == nil {
			t.Error("the instance is still there after deprovision --abandon --wait")
		}
		if n := ups.Count(osbtest.VerbDeprovision); n != deprovisions {
			t.Errorf("an abandoned instance was deprovisioned at the broker (%d requests)", n-deprovisions)
		}
		if !slices.ContainsFunc(ups.Instances(), func(in osbtest.Instance) bool { return in.ID == id }) {
			t.Errorf("the abandoned instance %s is not left at the broker", id)
		}
	})

	step("deregister", func(t *testing.T) {
		wantGolden(t, "deregister-broker.txt", sc.must(t, "deregister", "ups-broker", "--scope", "cluster"))
		if got := admin("", "get", "clusterserviceclasses", "-o", "name"); strings.Contains(got, upsClass) {
			t.Errorf("the broker's classes are still there:\n%s", got)
		}
	})

	svcatNamespaced(t, a, step)
	walkthrough(t, a, step)

	step("version and completion", func(t *testing.T) {
		out := sc.must(t, "version")
		if !strings.Contains(out, "Server Version: v1.36.3") {
			t.Errorf("svcat version:\n%s", out)
		}
		for _, shell := range []string{"bash", "zsh"} {
			want, err := os.ReadFile(filepath.Join(svcatGoldens(t), "completion-"+shell+".txt"))
			if err != nil {
				t.Fatal(err)
			}
			if out := sc.must(t, "completion", shell); out != string(want) {
				t.Errorf("svcat completion %s differs from its golden", shell)
			}
		}
	})

	step("create class", func(t *testing.T) {
		// Classes are the brokers' in Bindery: copying one into a class of
		// one's own, as svcat create class does, is refused, and says so.
		_, err := sc.run("", "create", "class", "my-postgresql", "--from", "postgresql", "--scope", "cluster")
		if err == nil || !strings.Contains(err.Error(), "does not allow this method") {
			t.Errorf("create class: %v, want it refused as a method the server does not allow", err)
		}
	})
	t.Logf("every svcat verb and the walkthrough in %s", time.Since(began).Round(time.Millisecond))
}
