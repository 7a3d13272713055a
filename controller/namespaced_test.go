package controller_test

import (
	"context"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// TestNamespacedBroker: an instance and a binding of a namespaced broker's
// plan go through that broker, not the cluster's of the same name and
// catalogue, with the same orphan mitigation and retries, and the
// instance's properties name the plan in the namespaced fields.
func TestNamespacedBroker(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	clusterFake := e.registerFake()
	teamFake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"))
	b := &catalog.Broker{Spec: catalog.BrokerSpec{URL: teamFake.URL()}}
	b.Name, b.Namespace = "fake", "test"
	b, err := e.store.CreateBroker(ctx, b, &catalog.BrokerAuth{Basic: &catalog.BasicAuth{Username: "u", Password: "p"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Relist(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	_, planID := teamFake.IDs(osbtest.DefaultService, osbtest.PlanSync)

	in := e.createInstance("db", "", "", nil, func(in *catalog.Instance) {
		in.Spec = catalog.InstanceSpec{ServiceClassExternalName: osbtest.DefaultService, ServicePlanExternalName: osbtest.PlanSync}
	})
	in = e.waitInstance(in.ID, "Ready", instanceReady)
	if p := in.Status.ExternalProperties; p == nil || p.ServicePlanExternalID != planID || p.ClusterServicePlanExternalID != "" {
		t.Errorf("properties of an instance of a namespaced plan: %+v", p)
	}
	teamFake.Fail(osbtest.VerbBind, osbtest.Failure{Status: 500, Times: 1})
	bd := e.createBinding("app", "db")
	e.waitBinding(bd.ID, "Ready", bindingReady)
	if n := teamFake.Count(osbtest.VerbUnbind); n != 1 {
		t.Errorf("%d unbinds after a bind answered 500, want 1 (orphan mitigation)", n)
	}
	if _, err := e.store.DeleteBinding(ctx, bd.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.DeleteInstance(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	e.waitGone("instance", func() error { _, err := e.store.GetInstance(ctx, in.ID); return err })
	if n := teamFake.Count(osbtest.VerbDeprovision); n != 1 {
		t.Errorf("%d deprovisions of the namespaced broker's instance, want 1", n)
	}
	for _, v := range []osbtest.Verb{osbtest.VerbProvision, osbtest.VerbBind, osbtest.VerbUnbind, osbtest.VerbDeprovision} {
		if n := clusterFake.Count(v); n != 0 {
			t.Errorf("the cluster's broker of the same name got %d %s calls", n, v)
		}
	}
	if err := e.store.DeleteBroker(ctx, b.ID); err != nil {
		t.Errorf("deregister the namespaced broker once its instances are gone: %v", err)
	}
}
