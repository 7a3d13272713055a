package apiserver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/bindery-dev/bindery/client/informers/externalversions"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

const instanceYAML = `apiVersion: servicecatalog.k8s.io/v1beta1
kind: ServiceInstance
metadata:
  name: db
  namespace: team
  labels:
    app: shop
spec:
  clusterServiceClassExternalName: fake-service
  clusterServicePlanExternalName: sync
`

const bindingYAML = `apiVersion: servicecatalog.k8s.io/v1beta1
kind: ServiceBinding
metadata:
  name: db-creds
  namespace: team
spec:
  instanceRef:
    name: db
`

// TestKubectl drives the server with kubectl: get with columns, apply,
// explain.
func TestKubectl(t *testing.T) {
	t.Parallel()
	b := setup(t)
	out := b.mustKubectl(nil, "get", "clusterserviceclasses")
	if !strings.Contains(out, "EXTERNAL-NAME") || !strings.Contains(out, "fake-service") {
		t.Errorf("get clusterserviceclasses:\n%s", out)
	}
	out = b.mustKubectl(nil, "get", "clusterserviceplans")
	if !strings.Contains(out, "sync") {
		t.Errorf("get clusterserviceplans:\n%s", out)
	}
	b.mustKubectl([]byte(instanceYAML), "apply", "-f", "-")
	b.mustKubectl([]byte(bindingYAML), "apply", "-f", "-")
	out = b.mustKubectl(nil, "get", "serviceinstances", "-A")
	for _, want := range []string{"NAMESPACE", "CLASS", "PLAN", "STATUS", "AGE", "team", "db", "fake-service", "sync", "Pending"} {
		if !strings.Contains(out, want) {
			t.Errorf("get serviceinstances -A: no %q in\n%s", want, out)
		}
	}
	out = b.mustKubectl(nil, "get", "servicebindings", "-n", "team")
	for _, want := range []string{"SERVICE-INSTANCE", "SECRET-NAME", "db-creds"} {
		if !strings.Contains(out, want) {
			t.Errorf("get servicebindings: no %q in\n%s", want, out)
		}
	}
	// apply again with a change: a three-way merge over the stored object.
	b.mustKubectl([]byte(strings.Replace(instanceYAML, "app: shop", "app: shop2", 1)), "apply", "-f", "-")
	in, err := b.client.ServicecatalogV1beta1().ServiceInstances("team").Get(context.Background(), "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if in.Labels["app"] != "shop2" {
		t.Errorf("labels after apply: %v", in.Labels)
	}
	if in.Spec.UserInfo == nil || in.Spec.UserInfo.Username != "bindery-admin" {
		t.Errorf("userInfo: %+v", in.Spec.UserInfo)
	}
	// Standalone there are no Kubernetes Events (no core API): describe
	// still describes.
	out = b.mustKubectl(nil, "describe", "serviceinstance", "db", "-n", "team")
	if !strings.Contains(out, "Cluster Service Plan External Name:  sync") {
		t.Errorf("describe serviceinstance:\n%s", out)
	}
	out = b.mustKubectl(nil, "explain", "serviceinstance.spec")
	if !strings.Contains(out, "clusterServicePlanExternalName") {
		t.Errorf("explain serviceinstance.spec:\n%s", out)
	}
	out = b.mustKubectl(nil, "get", "serviceinstances", "-n", "team", "--field-selector", "metadata.name=db", "-o", "name")
	if strings.TrimSpace(out) != "serviceinstance.servicecatalog.k8s.io/db" {
		t.Errorf("field selector metadata.name=db: %q", out)
	}
	out = b.mustKubectl(nil, "get", "serviceinstances", "-A", "-l", "app=other", "-o", "name")
	if strings.TrimSpace(out) != "" {
		t.Errorf("label selector app=other: %q", out)
	}
}

// TestServerSideApply: kubectl apply --server-side keeps managedFields, and
// a second manager's conflicting apply is refused.
func TestServerSideApply(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.mustKubectl([]byte(instanceYAML), "apply", "--server-side", "-f", "-")
	in, err := b.client.ServicecatalogV1beta1().ServiceInstances("team").Get(context.Background(), "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(in.ManagedFields) == 0 || in.ManagedFields[0].Manager != "kubectl" {
		t.Fatalf("managedFields: %+v", in.ManagedFields)
	}
	changed := strings.Replace(instanceYAML, "app: shop", "app: other", 1)
	if _, err := b.kubectl([]byte(changed), "apply", "--server-side", "--field-manager", "someone", "-f", "-"); err == nil || !strings.Contains(err.Error(), "conflict") {
		t.Errorf("conflicting apply: %v", err)
	}
	b.mustKubectl([]byte(changed), "apply", "--server-side", "-f", "-")
}

const brokerYAML = `apiVersion: servicecatalog.k8s.io/v1beta1
kind: ClusterServiceBroker
metadata:
  name: second
spec:
  url: URL
`

// TestBrokerLifecycle registers a broker with kubectl, sees its classes
// appear, and deregisters it.
func TestBrokerLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fake := osbtest.New(t, osbtest.WithCatalog(osbtest.GenerateCatalog(2, 2)))
	b.mustKubectl([]byte(strings.Replace(brokerYAML, "URL", fake.URL(), 1)), "apply", "-f", "-")
	out := b.mustKubectl(nil, "wait", "--for=condition=Ready", "clusterservicebroker/second", "--timeout=30s")
	if !strings.Contains(out, "condition met") {
		t.Errorf("wait: %s", out)
	}
	out = b.mustKubectl(nil, "get", "clusterserviceclasses", "--field-selector", "spec.clusterServiceBrokerName=second", "-o", "name")
	if n := len(strings.Fields(out)); n != 2 {
		t.Errorf("classes of the new broker: %q", out)
	}
	withAuth := strings.Replace(brokerYAML, "URL", fake.URL(), 1) + "  authInfo:\n    basic:\n      secretRef:\n        name: creds\n        namespace: default\n"
	withAuth = strings.Replace(withAuth, "second", "third", 1)
	// Standalone there is no cluster to keep brokers' credentials in.
	if _, err := b.kubectl([]byte(withAuth), "apply", "-f", "-"); err == nil || !strings.Contains(err.Error(), "runs standalone") {
		t.Errorf("broker with a secretRef: %v", err)
	}
	b.mustKubectl(nil, "delete", "clusterservicebroker", "second", "--wait", "--timeout=30s")
	out = b.mustKubectl(nil, "get", "clusterserviceclasses", "--field-selector", "spec.clusterServiceBrokerName=second", "-o", "name")
	if strings.TrimSpace(out) != "" {
		t.Errorf("classes after deregistration: %q", out)
	}
}

// TestInformer syncs a typed informer (list, then watch) and sees a change.
func TestInformer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	factory := externalversions.NewSharedInformerFactory(b.client, 0)
	informer := factory.Servicecatalog().V1beta1().ServiceInstances()
	lister := informer.Lister()
	inf := informer.Informer()
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	if _, err := b.client.ServicecatalogV1beta1().ServiceInstances("team").Create(ctx, newInstance("team", "db"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually.Succeeds(t, 30*time.Second, func(context.Context) error {
		_, err := lister.ServiceInstances("team").Get("db")
		return err
	})
}
