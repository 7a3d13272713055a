package catalog_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// reissue gives the broker's plan of that name a new id, as a broker
// that rebuilt its catalogue may, and relists.
func reissue(t *testing.T, s *catalog.Store, fake *osbtest.Broker, b *catalog.Broker, plan, id string) {
	t.Helper()
	cat := fake.Catalog()
	for j := range cat[0].Plans {
		if cat[0].Plans[j].Name == plan {
			cat[0].Plans[j].ID = id
		}
	}
	fake.SetCatalog(cat)
	if _, err := s.Relist(context.Background(), b.ID); err != nil {
		t.Fatal(err)
	}
}

// TestPlanReissuedUnderNewID: a broker gives plan "fixed" a new id while
// instances hold the old ones, so several plans of the class share the
// name, all but one removed. New instances naming the plan by its
// external name, cluster's and namespace's alike, get the plan the broker
// offers now. Before, the lookup took whichever row of that name came
// first, and when a removed one did, new instances of a plan the broker
// offers were refused as "removed from the broker's catalog".
func TestPlanReissuedUnderNewID(t *testing.T) {
	t.Parallel()
	for _, namespace := range []string{"", "team-a"} {
		t.Run("namespace="+namespace, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := newStore(t)
			fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"))
			b := registerIn(t, s, namespace, "fake", fake.URL())
			spec := func() catalog.InstanceSpec {
				if namespace == "" {
					return catalog.InstanceSpec{ClusterServiceClassExternalName: osbtest.DefaultService, ClusterServicePlanExternalName: osbtest.PlanFixed}
				}
				return catalog.InstanceSpec{ServiceClassExternalName: osbtest.DefaultService, ServicePlanExternalName: osbtest.PlanFixed}
			}
			// Three generations of the plan, each held by an instance, then
			// the one offered now.
			var offered string
			for round := range 4 {
				if round > 0 {
					offered = fmt.Sprintf("0d5b5c4e-0000-4000-8000-%012d", round)
					reissue(t, s, fake, b, osbtest.PlanFixed, offered)
				}
				if round == 3 {
					break
				}
				in := &catalog.Instance{Spec: spec()}
				in.Name, in.Namespace = fmt.Sprintf("held-%d", round), "team-a"
				if _, err := s.CreateInstance(ctx, in); err != nil {
					t.Fatalf("instance of generation %d: %v", round, err)
				}
			}
			for i := range 3 {
				in := &catalog.Instance{Spec: spec()}
				in.Name, in.Namespace = fmt.Sprintf("new-%d", i), "team-a"
				got, err := s.CreateInstance(ctx, in)
				if err != nil {
					t.Fatalf("a new instance of the plan offered now: %v", err)
				}
				_, ref, ns := got.Refs()
				if ref == nil {
					t.Fatalf("a new instance of the plan offered now is left unresolved")
				}
				p, err := s.GetPlanIn(ctx, ns, ref.Name)
				if err != nil {
					t.Fatal(err)
				}
				if p.Status.RemovedFromBrokerCatalog || p.Spec.ExternalID != offered {
					t.Fatalf("a new instance resolved to plan %s (removed %v), want the one offered, %s", p.Spec.ExternalID, p.Status.RemovedFromBrokerCatalog, offered)
				}
			}
		})
	}
}

// TestPlanReissuedAllRemoved: when every plan of the name is removed, a
// new instance of it is still refused as naming a removed plan.
func TestPlanReissuedAllRemoved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, fake, b := listedFake(t)
	in := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: osbtest.DefaultService, ClusterServicePlanExternalName: osbtest.PlanFixed}}
	in.Name, in.Namespace = "held", "team-a"
	if _, err := s.CreateInstance(ctx, in); err != nil {
		t.Fatal(err)
	}
	cat := fake.Catalog()
	cat[0].Plans = cat[0].Plans[:1]
	fake.SetCatalog(cat)
	if _, err := s.Relist(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	again := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: osbtest.DefaultService, ClusterServicePlanExternalName: osbtest.PlanFixed}}
	again.Name, again.Namespace = "again", "team-a"
	if _, err := s.CreateInstance(ctx, again); err == nil || !strings.Contains(err.Error(), "removed") {
		t.Fatalf("a new instance of a removed plan: %v, want it refused as removed", err)
	}
}
