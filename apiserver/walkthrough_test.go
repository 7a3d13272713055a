package apiserver_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/bindery-dev/bindery/internal/kubetest"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// Service Catalog's walkthrough manifests (contrib/examples/walkthrough of
// its module), applied unchanged but for their brokers' URLs, which point
// at brokers serving the catalogs the manifests name: the
// user-provided-service broker's (upsCatalog), the test broker's
// (testBrokerCatalog) and minibroker's mariadb.

// walkthroughManifests lists the walkthrough's manifests, by path under
// contrib/examples/walkthrough.
func walkthroughManifests(t testing.TB) (dir string, names []string) {
	t.Helper()
	dir = filepath.Join(serviceCatalogModule(t), "contrib", "examples", "walkthrough")
	for _, pattern := range []string{"*.yaml", "test-broker/*.yaml"} {
		m, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range m {
			rel, _ := filepath.Rel(dir, p)
			names = append(names, rel)
		}
	}
	sort.Strings(names)
	return dir, names
}

// brokerURL points a broker manifest at url, the one change the
// walkthrough's manifests get.
var brokerURL = regexp.MustCompile(`(?m)^  url: .*$`)

// testBrokerCatalog is the catalog of Service Catalog's test broker
// (contrib/pkg/broker/test_broker) as the walkthrough's manifests name it:
// every class they name, each with its plan "default", asynchronous for
// the -async classes. Its classes are well behaved: the failures the test
// broker acted out for each class are not.
func testBrokerCatalog(t testing.TB, dir string, names []string) []osbtest.Service {
	t.Helper()
	class := regexp.MustCompile(`(?m)^  clusterServiceClassExternalName: (\S+)$`)
	free := true
	var out []osbtest.Service
	for _, name := range names {
		if !strings.HasPrefix(name, "test-broker/test-instance") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		m := class.FindSubmatch(raw)
		if m == nil {
			t.Fatalf("%s names no class", name)
		}
		out = append(out, osbtest.Service{ID: uuid.NewString(), Name: string(m[1]), Description: "A test service", Bindable: true, PlanUpdateable: true,
			Plans: []osbtest.Plan{{ID: uuid.NewString(), Name: "default", Description: "Sample plan description", Free: &free,
				Async: strings.Contains(string(m[1]), "-async")}}})
	}
	return out
}

// walkthrough applies every walkthrough manifest as Service Catalog's
// walkthrough does, each in its turn, and checks that it reaches the
// state it reached with Service Catalog.
func walkthrough(t *testing.T, a *aggregated, step func(string, func(*testing.T))) {
	dir, names := walkthroughManifests(t)
	ups := osbtest.New(t, osbtest.WithCatalog(upsCatalog()), osbtest.WithCredentials(upsCredentials))
	tests := osbtest.New(t, osbtest.WithCatalog(testBrokerCatalog(t, dir, names)))
	applied := map[string]bool{}
	read := func(t *testing.T, name string) []byte {
		t.Helper()
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	apply := func(t *testing.T, name string, url string) (string, error) {
		t.Helper()
		applied[name] = true
		raw := read(t, name)
		if url != "" {
			raw = brokerURL.ReplaceAll(raw, []byte("  url: "+url))
		}
		return a.cluster.KubectlAs(t, kubetest.Admin, raw, "apply", "-f", "-")
	}
	mustApply := func(t *testing.T, name, url string) {
		t.Helper()
		if out, err := apply(t, name, url); err != nil {
			t.Fatalf("kubectl apply %s: %v\n%s", name, err, out)
		}
	}
	wait := func(t *testing.T, what, condition string) {
		t.Helper()
		a.kubectl(kubetest.Admin, nil, append([]string{"wait", "--for=condition=" + condition, "--timeout=60s"}, strings.Fields(what)...)...)
	}

	step("walkthrough: user-provided-service broker", func(t *testing.T) {
		mustApply(t, "ups-clusterservicebroker.yaml", ups.URL())
		wait(t, "clusterservicebroker/ups-broker", "Ready")
		// The class has two plans: Service Catalog refused an instance
		// naming none (its webhook: "has more than one plan, PlanName must
		// be specified").
		out, err := apply(t, "ups-instance-default-sp.yaml", "")
		if err == nil || !strings.Contains(err.Error(), "lan") {
			t.Errorf("ups-instance-default-sp.yaml, whose class has two plans, was not refused: %v\n%s", err, out)
		}
	})

	step("walkthrough: minibroker's mariadb", func(t *testing.T) {
		free := true
		mini := osbtest.New(t, osbtest.WithCatalog([]osbtest.Service{{ID: uuid.NewString(), Name: "mariadb", Description: "MariaDB", Bindable: true,
			Plans: []osbtest.Plan{{ID: uuid.NewString(), Name: "10-3-22", Description: "Fast, reliable, scalable, and easy to use open-source relational database system.", Free: &free}}}}))
		a.kubectl(kubetest.Admin, []byte(`apiVersion: servicecatalog.k8s.io/v1beta1
kind: ClusterServiceBroker
metadata:
  name: minibroker
spec:
  url: `+mini.URL()+"\n"), "apply", "-f", "-")
		wait(t, "clusterservicebroker/minibroker", "Ready")
		mustApply(t, "mini-instance.yaml", "")
		mustApply(t, "mini-binding.yaml", "")
		wait(t, "serviceinstance/mini-instance -n test-ns", "Ready")
		wait(t, "servicebinding/mini-binding -n test-ns", "Ready")
		if p := mini.Instances(); len(p) != 1 || p[0].Parameters["param-1"] != "value-1" {
			t.Errorf("minibroker's instances: %+v", p)
		}
		if got := a.kubectl(kubetest.Admin, nil, "get", "secret", "mini-binding", "-n", "test-ns", "-o", "jsonpath={.data}"); !strings.Contains(got, "password") {
			t.Errorf("mini-binding's Secret: %s", got)
		}
	})

	step("walkthrough: test broker", func(t *testing.T) {
		mustApply(t, "test-broker/test-clusterservicebroker.yaml", tests.URL())
		wait(t, "clusterservicebroker/test-broker", "Ready")
		mustApply(t, "test-broker/test-instance.yaml", "")
		mustApply(t, "test-broker/test-binding.yaml", "")
		mustApply(t, "test-broker/test-instance-async.yaml", "")
		wait(t, "serviceinstance/test-instance -n test-ns", "Ready")
		wait(t, "servicebinding/test-binding -n test-ns", "Ready")
		wait(t, "serviceinstance/test-instance-async -n test-ns", "Ready")
		// The instances of the classes whose broker calls failed: accepted
		// as they are.
		for _, name := range names {
			if strings.HasPrefix(name, "test-broker/test-instance-") && !applied[name] {
				mustApply(t, name, "")
			}
		}
		got := a.kubectl(kubetest.Admin, nil, "get", "serviceinstances", "-n", "test-ns", "-o", "name")
		if n := strings.Count(got, "serviceinstance"); n < 22 {
			t.Errorf("%d of the test broker's 22 instances are there:\n%s", n, got)
		}
	})

	// As Argo CD and Flux apply a directory: broker, instance and binding
	// at once, the class not yet fetched when the instance arrives.
	step("one-file apply", func(t *testing.T) {
		free := true
		gitops := osbtest.New(t, osbtest.WithCatalog([]osbtest.Service{{ID: uuid.NewString(), Name: "gitops-service", Description: "A service applied with its broker", Bindable: true,
			Plans: []osbtest.Plan{{ID: uuid.NewString(), Name: "default", Description: "The only plan", Free: &free}}}}))
		// The broker's first catalog comes late: the instance is recorded
		// before its class, whatever the timing.
		gitops.Fail(osbtest.VerbCatalog, osbtest.Failure{Delay: 2 * time.Second, Times: 1})
		out, err := a.cluster.KubectlAs(t, kubetest.Admin, []byte(`apiVersion: servicecatalog.k8s.io/v1beta1
kind: ClusterServiceBroker
metadata:
  name: gitops
spec:
  url: `+gitops.URL()+`
---
apiVersion: servicecatalog.k8s.io/v1beta1
kind: ServiceInstance
metadata:
  name: gitops-instance
  namespace: test-ns
spec:
  clusterServiceClassExternalName: gitops-service
  clusterServicePlanExternalName: default
---
apiVersion: servicecatalog.k8s.io/v1beta1
kind: ServiceBinding
metadata:
  name: gitops-binding
  namespace: test-ns
spec:
  instanceRef:
    name: gitops-instance
`), "apply", "-f", "-")
		if err != nil {
			t.Fatalf("one-file apply: %v\n%s", err, out)
		}
		wait(t, "serviceinstance/gitops-instance -n test-ns", "Ready")
		wait(t, "servicebinding/gitops-binding -n test-ns", "Ready")
	})

	// kubectl delete of an instance with a binding, as Kubernetes users
	// write it: orphaning is refused while the binding is there;
	// foreground deletes the binding, then the instance, and kubectl
	// returns once both are gone.
	step("kubectl delete --cascade", func(t *testing.T) {
		_, err := a.cluster.KubectlAs(t, kubetest.Admin, nil, "delete", "serviceinstance", "test-instance", "-n", "test-ns", "--cascade=orphan")
		if err == nil || !strings.Contains(err.Error(), "test-binding") {
			t.Errorf("kubectl delete --cascade=orphan of an instance with a binding: %v", err)
		}
		unbinds, deprovisions := tests.Count(osbtest.VerbUnbind), tests.Count(osbtest.VerbDeprovision)
		a.kubectl(kubetest.Admin, nil, "delete", "serviceinstance", "test-instance", "-n", "test-ns", "--cascade=foreground", "--timeout=60s")
		if out, err := a.cluster.KubectlAs(t, kubetest.Admin, nil, "get", "servicebinding", "test-binding", "-n", "test-ns"); err == nil {
			t.Errorf("the binding is still there:\n%s", out)
		}
		if tests.Count(osbtest.VerbUnbind) != unbinds+1 || tests.Count(osbtest.VerbDeprovision) != deprovisions+1 {
			t.Errorf("the broker was asked %d unbinds and %d deprovisions, want one each",
				tests.Count(osbtest.VerbUnbind)-unbinds, tests.Count(osbtest.VerbDeprovision)-deprovisions)
		}
	})

	// The namespaced brokers, each in the namespace its manifest names
	// (ups-broker, test-broker): their classes are that namespace's only.
	step("walkthrough: namespaced brokers", func(t *testing.T) {
		for _, b := range []struct{ manifest, name, namespace, url string }{
			{"ups-servicebroker.yaml", "ups-broker", "ups-broker", ups.URL()},
			{"test-broker/test-servicebroker.yaml", "test-broker", "test-broker", tests.URL()},
		} {
			a.kubectl(kubetest.Admin, nil, "create", "namespace", b.namespace)
			mustApply(t, b.manifest, b.url)
			wait(t, "servicebroker/"+b.name+" -n "+b.namespace, "Ready")
			out := a.kubectl(kubetest.Admin, nil, "get", "serviceclasses", "-n", b.namespace, "-o", "jsonpath={.items[*].spec.serviceBrokerName}")
			if got := strings.Fields(out); len(got) == 0 || slices.ContainsFunc(got, func(s string) bool { return s != b.name }) {
				t.Errorf("%s's classes name the brokers %q", b.name, got)
			}
		}
		out := a.kubectl(kubetest.Admin, nil, "get", "serviceclasses", "-A", "-o", "jsonpath={range .items[*]}{.metadata.namespace}{\"\\n\"}{end}")
		for _, ns := range strings.Fields(out) {
			if ns != "ups-broker" && ns != "test-broker" {
				t.Errorf("a ServiceClass in %s", ns)
			}
		}
		if n := strings.Count(out, "ups-broker"); n != len(upsCatalog()) {
			t.Errorf("%d ServiceClasses in ups-broker, want %d", n, len(upsCatalog()))
		}
		if out := a.kubectl(kubetest.Admin, nil, "get", "serviceclasses,serviceplans", "-n", "test-ns", "-o", "name"); strings.TrimSpace(out) != "" {
			t.Errorf("test-ns has namespaced classes or plans:\n%s", out)
		}
	})

	step("walkthrough: every manifest", func(t *testing.T) {
		for _, name := range names {
			if !applied[name] {
				t.Errorf("walkthrough manifest %s was not applied", name)
			}
		}
	})
}
