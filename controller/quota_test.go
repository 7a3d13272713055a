package controller_test

import (
	"context"
	"slices"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// TestQuotaWaitsForRoom: an instance recorded before its plan was offered
// counts among its namespace's instances at once; when a relist brings
// its plan and a quota refuses it (a paid plan where none are allowed),
// the instance waits, unresolved, saying why in the quota's sentence, and
// nothing is provisioned.
func TestQuotaWaitsForRoom(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	if _, err := e.store.SetQuota(ctx, &catalog.Quota{Namespace: "test", PaidPlans: false}); err != nil {
		t.Fatal(err)
	}
	fake := e.registerFake()
	in := e.createInstance("db", osbtest.DefaultService, "gold", nil)
	e.waitInstance(in.ID, "waiting for its plan", func(in *catalog.Instance) bool {
		return condition(in.Status.Conditions, catalog.ConditionReady).Reason == catalog.ReasonNonexistentServicePlan
	})
	services := fake.Catalog()
	services[0].Plans = append(slices.Clone(services[0].Plans), osbtest.Plan{ID: "gold-id", Name: "gold", Description: "Costs money.", Free: new(false)})
	fake.SetCatalog(services)
	broker, err := e.store.GetBroker(ctx, "fake")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Relist(ctx, broker.ID); err != nil {
		t.Fatal(err)
	}
	got := e.waitInstance(in.ID, "waiting for room", func(in *catalog.Instance) bool {
		c := condition(in.Status.Conditions, catalog.ConditionReady)
		return c.Reason == catalog.ReasonQuotaExceeded && c.Status == catalog.ConditionFalse
	})
	if msg := condition(got.Status.Conditions, catalog.ConditionReady).Message; msg != "namespace test may not use paid plans, and plan gold is not free" {
		t.Errorf("message %q", msg)
	}
	if got.Resolved() || fake.Count(osbtest.VerbProvision) != 0 {
		t.Errorf("resolved %v, %d provisions", got.Resolved(), fake.Count(osbtest.VerbProvision))
	}
}
