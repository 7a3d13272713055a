package catalog_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

func registerIn(t testing.TB, s *catalog.Store, namespace, name, url string) *catalog.Broker {
	t.Helper()
	b := &catalog.Broker{Spec: catalog.BrokerSpec{URL: url}}
	b.Name, b.Namespace = name, namespace
	b, err := s.CreateBroker(context.Background(), b, &catalog.BrokerAuth{Basic: &catalog.BasicAuth{Username: "u", Password: "p"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Relist(context.Background(), b.ID); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestNamespacedBrokers: one broker registered three times under one name,
// for the cluster and in two namespaces, offers the same catalogue three
// times over; each namespace sees its own classes and plans, under the
// namespaced kinds and fields and with Service Catalog's namespaced
// labels, and the cluster's lists see none of them. An instance finds a
// class of its own namespace by the namespaced names, never one of
// another namespace, and a binding of it checks its plan there.
func TestNamespacedBrokers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"))
	cluster := registerIn(t, s, "", "fake", fake.URL())
	teamA := registerIn(t, s, "team-a", "fake", fake.URL())
	registerIn(t, s, "team-b", "fake", fake.URL())
	serviceID, syncID := fake.IDs(osbtest.DefaultService, osbtest.PlanSync)

	if got := catalog.Kind(teamA); got != catalog.KindNamespacedBroker {
		t.Errorf("kind of a namespaced broker %q", got)
	}
	again := &catalog.Broker{Spec: catalog.BrokerSpec{URL: fake.URL()}}
	again.Name, again.Namespace = "fake", "team-a"
	if _, err := s.CreateBroker(ctx, again, nil); !errors.Is(err, catalog.ErrConflict) || !strings.Contains(err.Error(), `namespace "team-a"`) {
		t.Errorf("a second broker of a name in a namespace: %v", err)
	}

	brokers, err := s.ListBrokers(ctx, catalog.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(brokers.Items) != 1 || brokers.Items[0].ID != cluster.ID {
		t.Errorf("cluster brokers: %d, want the cluster's one", len(brokers.Items))
	}
	nsBrokers, err := s.ListBrokers(ctx, catalog.ListOptions{Namespaced: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(nsBrokers.Items) != 2 || nsBrokers.Items[0].Namespace != "team-a" || nsBrokers.Items[1].Namespace != "team-b" {
		t.Errorf("namespaced brokers of all namespaces: %+v", nsBrokers.Items)
	}

	clusterClasses, err := s.ListClasses(ctx, catalog.ClassFilter{}, catalog.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	aClasses, err := s.ListClasses(ctx, catalog.ClassFilter{Broker: "fake"}, catalog.ListOptions{Namespaced: true, Namespace: "team-a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(aClasses.Items) == 0 || len(aClasses.Items) != len(clusterClasses.Items) {
		t.Fatalf("team-a's classes: %d, the cluster's: %d", len(aClasses.Items), len(clusterClasses.Items))
	}
	for _, c := range clusterClasses.Items {
		if c.Namespace != "" || c.Spec.ClusterServiceBrokerName != "fake" {
			t.Errorf("a cluster class %s in %q of broker %q", c.Name, c.Namespace, c.Spec.ClusterServiceBrokerName)
		}
	}
	for _, c := range aClasses.Items {
		if c.Namespace != "team-a" || c.Spec.ServiceBrokerName != "fake" || c.Spec.ClusterServiceBrokerName != "" || catalog.Kind(c) != catalog.KindNamespacedServiceClass {
			t.Errorf("team-a's class %s: namespace %q, brokers %q/%q, kind %s", c.Name, c.Namespace, c.Spec.ServiceBrokerName, c.Spec.ClusterServiceBrokerName, catalog.Kind(c))
		}
	}
	class, err := s.GetClassIn(ctx, "team-a", serviceID)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{
		v1beta1.LabelExternalID:        sha224(serviceID),
		v1beta1.LabelExternalName:      sha224(osbtest.DefaultService),
		v1beta1.LabelServiceBrokerName: sha224("fake"),
	}; !maps.Equal(class.Labels, want) {
		t.Errorf("namespaced class labels %v, want %v", class.Labels, want)
	}
	plan, err := s.GetPlanIn(ctx, "team-a", syncID)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Spec.ServiceClassRef.Name != class.Name || plan.Spec.ClusterServiceClassRef.Name != "" || plan.Spec.ClassName() != class.Name {
		t.Errorf("namespaced plan's class refs %+v %+v", plan.Spec.ServiceClassRef, plan.Spec.ClusterServiceClassRef)
	}
	if want := map[string]string{
		v1beta1.LabelExternalID:        sha224(syncID),
		v1beta1.LabelExternalName:      sha224(osbtest.PlanSync),
		v1beta1.LabelServiceBrokerName: sha224("fake"),
		v1beta1.LabelServiceClassRef:   sha224(class.Name),
	}; !maps.Equal(plan.Labels, want) {
		t.Errorf("namespaced plan labels %v, want %v", plan.Labels, want)
	}
	bPlans, err := s.ListPlans(ctx, catalog.PlanFilter{Class: osbtest.DefaultService}, catalog.ListOptions{Namespaced: true, Namespaces: []string{"team-b"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range bPlans.Items {
		if p.Namespace != "team-b" {
			t.Errorf("team-b's plans list one of %q", p.Namespace)
		}
	}
	if len(bPlans.Items) == 0 {
		t.Error("team-b's plans of the default service: none")
	}
	if _, err := s.GetPlanIn(ctx, "team-c", syncID); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("a plan of a namespace without brokers: %v", err)
	}

	raw, err := s.ListRaw(ctx, catalog.KindNamespacedServiceClass, catalog.ListOptions{Namespace: "team-b"})
	if err != nil {
		t.Fatal(err)
	}
	if len(raw.Items) != len(clusterClasses.Items) || raw.Items[0].Namespace != "team-b" {
		t.Errorf("raw list of team-b's classes: %d items", len(raw.Items))
	}
	if o, err := s.GetRaw(ctx, catalog.KindNamespacedBroker, "team-a", "fake"); err != nil || o.ID != teamA.ID {
		t.Errorf("raw get of team-a's broker: %v", err)
	}
	if o, err := s.GetRaw(ctx, catalog.KindBroker, "", "fake"); err != nil || o.ID != cluster.ID {
		t.Errorf("raw get of the cluster's broker: %v", err)
	}
	changes, err := s.Feed().Since(ctx, 0, []string{catalog.KindNamespacedBroker}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range changes {
		if ch.Object.Namespace == "" {
			t.Errorf("a change of kind %s without a namespace: %+v", ch.Kind, ch)
		}
	}
	if len(changes) == 0 {
		t.Error("no change of kind ServiceBroker in the feed")
	}

	in := &catalog.Instance{Spec: catalog.InstanceSpec{ServiceClassExternalName: osbtest.DefaultService, ServicePlanExternalName: osbtest.PlanSync}}
	in.Name, in.Namespace = "db", "team-a"
	in, err = s.CreateInstance(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if !in.Resolved() || in.Spec.ServicePlanRef.Name != plan.Name || in.Spec.ClusterServicePlanRef != nil {
		t.Errorf("an instance of team-a's plan resolved to %+v / %+v", in.Spec.ServicePlanRef, in.Spec.ClusterServicePlanRef)
	}
	if want := map[string]string{v1beta1.LabelServiceClassRef: sha224(class.Name), v1beta1.LabelServicePlanRef: sha224(plan.Name)}; !maps.Equal(in.Labels, want) {
		t.Errorf("instance labels %v, want %v", in.Labels, want)
	}
	b := &catalog.Binding{Spec: catalog.BindingSpec{InstanceRef: catalog.ObjectRef{Name: "db"}}}
	b.Name, b.Namespace = "db", "team-a"
	if _, err := s.CreateBinding(ctx, b); err != nil {
		t.Errorf("a binding of an instance of a namespaced plan: %v", err)
	}

	elsewhere := &catalog.Instance{Spec: catalog.InstanceSpec{ServiceClassExternalName: osbtest.DefaultService, ServicePlanExternalName: osbtest.PlanSync}}
	elsewhere.Name, elsewhere.Namespace = "db", "team-c"
	elsewhere, err = s.CreateInstance(ctx, elsewhere)
	if err != nil {
		t.Fatal(err)
	}
	if elsewhere.Resolved() {
		t.Error("an instance of team-c resolved to another namespace's class")
	}
	_, err = s.ResolveInstance(ctx, elsewhere.ID)
	r, ok := catalog.AsReference(err)
	if want := `The instance references a ServiceClass that does not exist. References a non-existent ServiceClass {ServiceClassExternalName:"fake-service"} or there is more than one (found: 0)`; !ok || r.Message != want {
		t.Errorf("resolving team-c's instance: %v\nwant %s", err, want)
	}

	clusterNamed := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: osbtest.DefaultService, ClusterServicePlanExternalName: osbtest.PlanSync}}
	clusterNamed.Name, clusterNamed.Namespace = "shared", "team-a"
	clusterNamed, err = s.CreateInstance(ctx, clusterNamed)
	if err != nil {
		t.Fatal(err)
	}
	if clusterNamed.Spec.ClusterServicePlanRef == nil || clusterNamed.Spec.ServicePlanRef != nil {
		t.Errorf("an instance of team-a naming the cluster's plan resolved to %+v / %+v", clusterNamed.Spec.ClusterServicePlanRef, clusterNamed.Spec.ServicePlanRef)
	}

	both := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: osbtest.DefaultService, ServicePlanExternalName: osbtest.PlanSync}}
	both.Name, both.Namespace = "both", "team-a"
	var verr *catalog.ValidationError
	if _, err := s.CreateInstance(ctx, both); !errors.As(err, &verr) || !strings.Contains(err.Error(), "exactly one way") {
		t.Errorf("an instance naming its class the cluster's way and its plan the namespace's: %v", err)
	}

	if err := s.DeleteBroker(ctx, teamA.ID); !errors.Is(err, catalog.ErrConflict) {
		t.Errorf("deleting team-a's broker with an instance of its plan: %v", err)
	}
}

// TestNamespacedBrokerSecret: a namespaced broker's credentials are in a
// Secret of its own namespace, which its authInfo may leave unsaid.
func TestNamespacedBrokerSecret(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	b := &catalog.Broker{Spec: catalog.BrokerSpec{URL: "http://broker.example",
		AuthInfo: &catalog.BrokerAuthInfo{Basic: &catalog.BasicAuthInfo{SecretRef: &catalog.ObjectRef{Name: "creds", Namespace: "other"}}}}}
	b.Name, b.Namespace = "mine", "team-a"
	var verr *catalog.ValidationError
	if _, err := s.CheckBroker(ctx, b); !errors.As(err, &verr) || !strings.Contains(err.Error(), "spec.authInfo.basic.secretRef.namespace") {
		t.Errorf("a namespaced broker naming a Secret of another namespace: %v", err)
	}
	b.Spec.AuthInfo.Basic.SecretRef.Namespace = ""
	created, err := s.CreateBroker(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ref := created.Spec.SecretRef(); ref == nil || ref.Namespace != "team-a" {
		t.Errorf("the Secret of a namespaced broker: %+v", ref)
	}
	bad := &catalog.Broker{Spec: catalog.BrokerSpec{URL: "http://broker.example"}}
	bad.Name, bad.Namespace = "mine", "Team_A"
	if _, err := s.CheckBroker(ctx, bad); !errors.As(err, &verr) || !strings.Contains(err.Error(), "namespace") {
		t.Errorf("a broker in an invalid namespace: %v", err)
	}
}

// TestBrokerURLBound: a broker's URL is at most 2,048 characters, whatever
// door it comes through; it is stored, shown and sent to the broker.
func TestBrokerURLBound(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	b := &catalog.Broker{Spec: catalog.BrokerSpec{URL: "http://x/" + strings.Repeat("a", 2040)}}
	b.Name = "long"
	_, err := s.CreateBroker(context.Background(), b, nil)
	if v, ok := catalog.AsValidation(err); !ok || !strings.Contains(v.Error(), "spec.url") {
		t.Errorf("a URL of 2,049 characters: %v, want a validation error naming spec.url", err)
	}
}
