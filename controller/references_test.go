package controller_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// TestReferencesAppearLater records a binding before its instance, and the
// instance before any broker offers its class, as a GitOps tool applying a
// directory does: each says what it waits for with Service Catalog's
// reason, and both become Ready once the broker is registered — woken by
// the change feed, not by a periodic look (the engine's resync is 5
// minutes, the test's limit 30 seconds).
func TestReferencesAppearLater(t *testing.T) {
	t.Parallel()
	e := setup(t)
	b := e.createBinding("app", "db")
	e.waitBinding(b.ID, "waiting for its instance", func(b *catalog.Binding) bool {
		c := condition(b.Status.Conditions, catalog.ConditionReady)
		return c.Reason == catalog.ReasonNonexistentInstance && c.Message == `References a non-existent ServiceInstance "test/db"`
	})
	in := e.createInstance("db", osbtest.DefaultService, osbtest.PlanSync, nil)
	e.waitInstance(in.ID, "waiting for its class", func(in *catalog.Instance) bool {
		return condition(in.Status.Conditions, catalog.ConditionReady).Reason == catalog.ReasonNonexistentServiceClass
	})
	e.waitBinding(b.ID, "waiting for its instance's plan", func(b *catalog.Binding) bool {
		return condition(b.Status.Conditions, catalog.ConditionReady).Reason == "ErrorInstanceRefsUnresolved"
	})
	fake := e.registerFake()
	e.waitInstance(in.ID, "Ready", instanceReady)
	e.waitBinding(b.ID, "Ready", bindingReady)
	if n := fake.Count(osbtest.VerbProvision); n != 1 {
		t.Errorf("%d provisions", n)
	}
	_, syncPlan := fake.IDs(osbtest.DefaultService, osbtest.PlanSync)
	if got := fake.Instances(); len(got) != 1 || got[0].PlanID != syncPlan {
		t.Errorf("the broker has %+v, want one instance of plan %s", got, syncPlan)
	}
	view := svcatView(t, e, catalog.KindInstance, in.ID)
	if want := []string{"", catalog.ReasonNonexistentServiceClass, "ProvisionRequestInFlight", "Ready"}; !slices.Equal(view, want) {
		t.Errorf("svcat showed the instance as %q, want %q", view, want)
	}
	// The binding may also have waited for the provision (ErrorInstanceNotReady).
	view = slices.DeleteFunc(svcatView(t, e, catalog.KindBinding, b.ID), func(s string) bool { return s == "ErrorInstanceNotReady" })
	if want := []string{"", catalog.ReasonNonexistentInstance, "ErrorInstanceRefsUnresolved", "BindingRequestInFlight", "Ready"}; !slices.Equal(view, want) {
		t.Errorf("svcat showed the binding as %q, want %q", view, want)
	}
}

// TestPlanAppearsLater: an instance naming a plan its broker does not
// offer yet, and one naming only a class that does not exist yet, proceed
// when a relist brings the plan, and the class with its only plan.
func TestPlanAppearsLater(t *testing.T) {
	t.Parallel()
	e := setup(t)
	fake := e.registerFake()
	ctx := context.Background()
	in := e.createInstance("db", osbtest.DefaultService, "bigger", nil)
	e.waitInstance(in.ID, "waiting for its plan", func(in *catalog.Instance) bool {
		c := condition(in.Status.Conditions, catalog.ConditionReady)
		return c.Reason == catalog.ReasonNonexistentServicePlan && c.Status == catalog.ConditionFalse
	})
	solo := e.createInstance("solo", "solo", "", nil)
	e.waitInstance(solo.ID, "waiting for its class", func(in *catalog.Instance) bool {
		return condition(in.Status.Conditions, catalog.ConditionReady).Reason == catalog.ReasonNonexistentServiceClass
	})
	if failedFor(solo) {
		t.Error("waiting for a class is not a failure")
	}
	services := fake.Catalog()
	services[0].Plans = append(slices.Clone(services[0].Plans), osbtest.Plan{ID: "bigger-id", Name: "bigger", Description: "A later plan."})
	services = append(services, osbtest.Service{ID: "solo-id", Name: "solo", Description: "One plan.", Bindable: true,
		Plans: []osbtest.Plan{{ID: "solo-only-id", Name: "only", Description: "The only plan."}}})
	fake.SetCatalog(services)
	broker, err := e.store.GetBroker(ctx, "fake")
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if _, err := e.store.Relist(ctx, broker.ID); err != nil {
		t.Fatal(err)
	}
	e.waitInstance(in.ID, "Ready", instanceReady)
	got := e.waitInstance(solo.ID, "Ready", instanceReady)
	t.Logf("both Ready %s after the relist", time.Since(began).Round(time.Millisecond))
	if got.Spec.ClusterServicePlanExternalName != "only" || got.Generation != 1 {
		t.Errorf("the class's only plan: spec names %q, generation %d", got.Spec.ClusterServicePlanExternalName, got.Generation)
	}
	plans := map[string]bool{}
	for _, i := range fake.Instances() {
		plans[i.PlanID] = true
	}
	if !plans["bigger-id"] || !plans["solo-only-id"] {
		t.Errorf("the broker has instances of plans %v", plans)
	}
}
