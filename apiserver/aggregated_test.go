package apiserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/kubetest"
	"github.com/bindery-dev/bindery/internal/pgtest"
)

const aggregatedInstance = `apiVersion: servicecatalog.k8s.io/v1beta1
kind: ServiceInstance
metadata:
  name: db
  namespace: team-a
spec:
  clusterServiceClassExternalName: postgresql
  clusterServicePlanExternalName: small
---
apiVersion: servicecatalog.k8s.io/v1beta1
kind: ServiceBinding
metadata:
  name: db-app
  namespace: team-a
spec:
  instanceRef:
    name: db
  secretName: db-credentials
`

// TestAggregated drives servicecatalog.k8s.io through a real
// kube-apiserver's aggregation layer with kubectl, as the cluster's users
// would: discovery and explain, RBAC through the roles deploy/bindery
// aggregates into admin/edit/view, a ServiceInstance and ServiceBinding
// applied by a user with edit rights ending (through the engine and
// Bindery's own broker) as a Ready instance and a Secret in the namespace,
// the transitions seen by `kubectl get -w`, and kubectl delete
// deprovisioning the database.
func TestAggregated(t *testing.T) {
	a := aggregate(t, true)
	ctx := t.Context()

	out := a.kubectl(carol, nil, "api-resources", "--api-group=servicecatalog.k8s.io", "--no-headers")
	kinds := map[string]string{} // kind: whether namespaced
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 4 {
			kinds[f[len(f)-1]] = f[len(f)-2]
		}
	}
	for kind, namespaced := range map[string]string{
		"ClusterServiceBroker": "false", "ClusterServiceClass": "false", "ClusterServicePlan": "false",
		"ServiceBroker": "true", "ServiceClass": "true", "ServicePlan": "true", "ServiceInstance": "true", "ServiceBinding": "true",
	} {
		if kinds[kind] != namespaced {
			t.Errorf("kubectl api-resources: %s namespaced %q, want %s:\n%s", kind, kinds[kind], namespaced, out)
		}
	}
	// kube-apiserver fetches the group's OpenAPI document in the
	// background once the APIService is there; explain waits for it.
	began := time.Now()
	eventually.Succeeds(t, time.Minute, func(context.Context) error {
		var err error
		out, err = a.cluster.KubectlAs(t, carol, nil, "explain", "serviceinstance.spec.clusterServicePlanExternalName")
		return err
	})
	if !strings.Contains(out, "FIELD: clusterServicePlanExternalName") {
		t.Errorf("kubectl explain:\n%s", out)
	}
	t.Logf("kubectl explain answered %s after the APIService was Available", time.Since(began).Round(time.Millisecond))

	// Alice has no rights here: 403. kube-apiserver authorizes a request
	// before it proxies it, so this checks deploy/bindery's roles; Bindery's
	// own SubjectAccessReviews are checked by cmd/bindery
	// TestServeAPIServerDelegated, which calls the server directly.
	if _, err := a.cluster.KubectlAs(t, kubetest.Alice, nil, "get", "serviceinstances", "-n", team); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("alice listing instances: %v, want Forbidden", err)
	}
	// Everyone authenticated may browse the marketplace.
	if out := a.kubectl(kubetest.Alice, nil, "get", "clusterserviceclasses", "-o", "name"); !strings.Contains(out, "clusterserviceclass") {
		t.Errorf("alice listing classes: %q", out)
	}
	// Victor views: he may list, not create.
	a.kubectl(victor, nil, "get", "serviceinstances", "-n", team)
	if _, err := a.cluster.KubectlAs(t, victor, []byte(aggregatedInstance), "create", "-f", "-"); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("victor creating an instance: %v, want Forbidden", err)
	}
	// Admission: the namespace must exist.
	if _, err := a.cluster.KubectlAs(t, kubetest.Admin, []byte(strings.ReplaceAll(aggregatedInstance, "namespace: team-a", "namespace: nowhere")), "create", "-f", "-"); err == nil || !strings.Contains(err.Error(), `namespaces "nowhere" not found`) {
		t.Errorf("instance in a missing namespace: %v", err)
	}

	// Carol watches, then applies the instance and its binding. The watch
	// is known to be established once it has listed an instance that
	// exists before it starts.
	a.kubectl(carol, []byte(strings.Replace(aggregatedInstance[:strings.Index(aggregatedInstance, "---")], "name: db", "name: sentinel", 1)), "apply", "-f", "-")
	watch := a.cluster.KubectlCommand(ctx, carol, "get", "serviceinstances", "-n", team, "-w", "--no-headers")
	stdout, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var lines []string
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			mu.Lock()
			lines = append(lines, s.Text())
			mu.Unlock()
		}
	}()
	for listed := false; !listed; {
		mu.Lock()
		listed = slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "sentinel ") })
		mu.Unlock()
		select {
		case <-watched:
			t.Fatal("kubectl get -w ended before listing the sentinel")
		case <-time.After(20 * time.Millisecond):
		}
	}
	began = time.Now()
	a.kubectl(carol, []byte(aggregatedInstance), "apply", "-f", "-")
	a.kubectl(carol, nil, "wait", "-n", team, "--for=condition=Ready", "serviceinstance/db", "servicebinding/db-app", "--timeout=60s")
	t.Logf("instance and binding Ready %s after kubectl apply", time.Since(began).Round(time.Millisecond))

	// The requesting user, known through the front proxy's headers, is
	// recorded on the instance and reached the broker as the originating
	// identity.
	var in struct {
		Spec struct {
			UserInfo struct{ Username string } `json:"userInfo"`
		} `json:"spec"`
	}
	if err := json.Unmarshal([]byte(a.kubectl(carol, nil, "get", "serviceinstance", "db", "-n", team, "-o", "json")), &in); err != nil {
		t.Fatal(err)
	}
	if in.Spec.UserInfo.Username != carol {
		t.Errorf("instance's userInfo.username %q, want %q", in.Spec.UserInfo.Username, carol)
	}
	var platform, username string
	if err := a.pool.QueryRow(ctx, `SELECT originating_platform, originating_identity->>'username' FROM broker.operations
		WHERE kind = 'provision'`).Scan(&platform, &username); err != nil {
		t.Fatalf("the broker's provision: %v", err)
	}
	if platform != "kubernetes" || username != carol {
		t.Errorf("the broker saw originating identity %s %q, want kubernetes %q", platform, username, carol)
	}

	// What the engine did is in the instance's Events.
	if out := a.kubectl(carol, nil, "describe", "serviceinstance", "db", "-n", team); !strings.Contains(out, "ProvisionedSuccessfully") {
		t.Errorf("kubectl describe shows no provision:\n%s", out)
	}

	secret, err := a.kube.CoreV1().Secrets(team).Get(ctx, "db-credentials", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the binding's Secret: %v", err)
	}
	dbName := string(secret.Data["database"])
	if dbName == "" || len(secret.Data["password"]) == 0 {
		t.Fatalf("the Secret lacks database or password: keys %v", slices.Collect(maps.Keys(secret.Data)))
	}
	if !databaseExists(t, dbName) {
		t.Fatalf("database %q of the instance does not exist", dbName)
	}

	began = time.Now()
	a.kubectl(carol, nil, "delete", "-n", team, "servicebinding/db-app", "serviceinstance/db", "--timeout=60s")
	t.Logf("kubectl delete returned after %s", time.Since(began).Round(time.Millisecond))
	if databaseExists(t, dbName) {
		t.Errorf("database %q still exists after kubectl delete", dbName)
	}
	if _, err := a.kube.CoreV1().Secrets(team).Get(ctx, "db-credentials", metav1.GetOptions{}); err == nil {
		t.Error("the binding's Secret outlived the binding")
	}

	// Deleting a namespace deletes its instances through this API (the
	// namespace controller's discovery and deletecollection); the engine
	// deprovisions them before the namespace goes.
	a.kubectl(kubetest.Admin, nil, "create", "namespace", "team-b")
	a.kubectl(kubetest.Admin, []byte(strings.ReplaceAll(aggregatedInstance, "namespace: team-a", "namespace: team-b")), "apply", "-f", "-")
	a.kubectl(kubetest.Admin, nil, "wait", "-n", "team-b", "--for=condition=Ready", "serviceinstance/db", "servicebinding/db-app", "--timeout=60s")
	began = time.Now()
	if _, err := a.cluster.Kubectl(t, "delete", "namespace", "team-b", "--timeout=30s"); err != nil {
		ns, _ := a.cluster.Kubectl(t, "get", "namespace", "team-b", "-o", "yaml")
		objs, _ := a.cluster.Kubectl(t, "get", "serviceinstances,servicebindings,secrets", "-n", "team-b", "-o", "yaml")
		t.Fatalf("%v\n%s\n%s", err, ns, objs)
	}
	t.Logf("namespace with an instance and a binding deleted in %s", time.Since(began).Round(time.Millisecond))
	if out := a.kubectl(kubetest.Admin, nil, "get", "serviceinstances,servicebindings", "-A", "-o", "name"); strings.Contains(out, "/db") {
		t.Errorf("objects outlived their namespace:\n%s", out)
	}

	if err := watch.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-watched
	_ = watch.Wait()
	mu.Lock()
	defer mu.Unlock()
	// Columns: NAME CLASS PLAN STATUS AGE. The watch must have seen the
	// instance being provisioned, Ready, and being deleted.
	var states []string
	for _, l := range lines {
		if f := strings.Fields(l); len(f) >= 4 && f[0] == "db" {
			if len(states) == 0 || states[len(states)-1] != f[3] {
				states = append(states, f[3])
			}
		}
	}
	t.Logf("kubectl get -w: %s", strings.Join(states, " → "))
	if !slices.Contains(states, "Ready") || !slices.Contains(states, "Deleting") || states[0] == "Ready" {
		t.Errorf("kubectl get -w showed %v, want a state before Ready, Ready, then Deleting:\n%s", states, strings.Join(lines, "\n"))
	}
}

// databaseExists says whether the test's PostgreSQL server has a database
// named name.
func databaseExists(t *testing.T, name string) bool {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), pgtest.AdminURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var ok bool
	if err := conn.QueryRow(t.Context(), "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// oneFile is what a GitOps repository holds for an application's
// database: its binding, its instance, and the broker that offers the
// class, with the broker's credentials — in the order a person wrote them,
// not the order they must exist in.
const oneFile = `apiVersion: servicecatalog.k8s.io/v1beta1
kind: ServiceBinding
metadata:
  name: db-app
  namespace: team-a
spec:
  instanceRef:
    name: db
  secretName: db-credentials
---
apiVersion: servicecatalog.k8s.io/v1beta1
kind: ServiceInstance
metadata:
  name: db
  namespace: team-a
spec:
  clusterServiceClassExternalName: postgresql
  clusterServicePlanExternalName: small
---
apiVersion: v1
kind: Secret
metadata:
  name: broker
  namespace: bindery-system
stringData:
  username: osb
  password: osb-pass
---
apiVersion: servicecatalog.k8s.io/v1beta1
kind: ClusterServiceBroker
metadata:
  name: bindery
spec:
  url: %s
  authInfo:
    basic:
      secretRef:
        name: broker
        namespace: bindery-system
`

// TestAggregatedOneFile applies a binding, its instance and the broker
// that offers the instance's class with one kubectl apply, as Argo CD and
// Flux do: the binding and the instance are stored although what they name
// does not exist yet, and everything becomes Ready without a second apply —
// the engine resolves each reference when the change feed says it exists.
func TestAggregatedOneFile(t *testing.T) {
	a := aggregateWith(t, true, false)
	began := time.Now()
	out := a.kubectl(kubetest.Admin, []byte(fmt.Sprintf(oneFile, a.brokerURL)), "apply", "-f", "-")
	for _, created := range []string{"servicebinding.servicecatalog.k8s.io/db-app created", "serviceinstance.servicecatalog.k8s.io/db created",
		"clusterservicebroker.servicecatalog.k8s.io/bindery created"} {
		if !strings.Contains(out, created) {
			t.Errorf("kubectl apply did not say %q:\n%s", created, out)
		}
	}
	a.kubectl(kubetest.Admin, nil, "wait", "--for=condition=Ready", "clusterservicebroker/bindery", "--timeout=60s")
	a.kubectl(kubetest.Admin, nil, "wait", "-n", team, "--for=condition=Ready", "serviceinstance/db", "servicebinding/db-app", "--timeout=90s")
	t.Logf("broker, instance and binding Ready %s after one kubectl apply", time.Since(began).Round(time.Millisecond))
	// Ready is the only condition left, so svcat reads Ready.
	for _, obj := range []string{"serviceinstance/db", "servicebinding/db-app"} {
		if types := a.kubectl(kubetest.Admin, nil, "get", "-n", team, obj, "-o", "jsonpath={.status.conditions[*].type}"); types != "Ready" {
			t.Errorf("%s has conditions %q, want Ready alone", obj, types)
		}
	}
	secret, err := a.kube.CoreV1().Secrets(team).Get(t.Context(), "db-credentials", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the binding's Secret: %v", err)
	}
	if !databaseExists(t, string(secret.Data["database"])) {
		t.Fatalf("the Secret names database %q, which does not exist", secret.Data["database"])
	}
	// Applying the same file again changes nothing.
	out = a.kubectl(kubetest.Admin, []byte(fmt.Sprintf(oneFile, a.brokerURL)), "apply", "-f", "-")
	for _, obj := range []string{"servicebinding.servicecatalog.k8s.io/db-app", "serviceinstance.servicecatalog.k8s.io/db", "clusterservicebroker.servicecatalog.k8s.io/bindery"} {
		if !strings.Contains(out, obj+" unchanged") {
			t.Errorf("a second apply of the same file changed %s:\n%s", obj, out)
		}
	}
}
