package catalog_test

import (
	"context"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// TestPlanMovedToAnotherService: a broker moves plan "fixed", same id, to
// a new service and stops offering the old one while an instance holds
// the plan. The instance keeps the class it was resolved to, as Service
// Catalog's instances did: its spec's class reference and the class the
// catalog keeps for it stay the same class, which relists keep (marked
// removed) while the instance refers to it, and the instance can still be
// changed. Before, a change of the instance took its class from the
// plan's new service but left the reference naming the old class, the
// next relist deleted the old class, and every later change of the
// instance failed, the engine saying it "References a non-existent
// ServiceClass".
func TestPlanMovedToAnotherService(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool, fake, b := listedWithPool(t)
	in := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: osbtest.DefaultService, ClusterServicePlanExternalName: osbtest.PlanFixed}}
	in.Name, in.Namespace = "held", "team-a"
	in, err := s.CreateInstance(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	classRef := in.Spec.ClusterServiceClassRef.Name
	var fixed osbtest.Plan
	for _, p := range fake.Catalog()[0].Plans {
		if p.Name == osbtest.PlanFixed {
			fixed = p
		}
	}
	fake.SetCatalog([]osbtest.Service{{ID: "0d5b5c4e-0000-4000-8000-0000000005e2", Name: "other", Description: "The plan's new home.",
		Bindable: true, Plans: []osbtest.Plan{fixed}}})
	// Each change of the instance, then a relist.
	for _, team := range []string{"", "a", "b"} {
		if team != "" {
			if _, err := s.UpdateInstance(ctx, in.ID, 0, func(i *catalog.Instance) error {
				i.Labels = map[string]string{"team": team}
				return nil
			}); err != nil {
				t.Fatalf("a change of the instance (team %s): %v", team, err)
			}
		}
		if _, err := s.Relist(ctx, b.ID); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetInstance(ctx, in.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Spec.ClusterServiceClassRef == nil || got.Spec.ClusterServiceClassRef.Name != classRef {
			t.Fatalf("the instance's class reference is %v, want %s as it was resolved", got.Spec.ClusterServiceClassRef, classRef)
		}
		class, err := s.GetClassIn(ctx, "", classRef)
		if err != nil {
			t.Fatalf("the class the instance refers to (team %q): %v", team, err)
		}
		if !class.Status.RemovedFromBrokerCatalog {
			t.Errorf("the class the broker no longer offers is not marked removed")
		}
		var kept string
		if err := pool.QueryRow(ctx, `SELECT c.name FROM catalog.instances i JOIN catalog.service_classes c ON c.id = i.class_id WHERE i.id = $1`,
			in.ID).Scan(&kept); err != nil || kept != classRef {
			t.Fatalf("the class kept for the instance is %q (%v), want the one its spec refers to, %s", kept, err, classRef)
		}
	}
}
