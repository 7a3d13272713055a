package controller_test

import (
	"context"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// TestCacheForgetsOneNamespace: what the engine keeps of a namespace's
// classes, plans and brokers is read again after a change in that
// namespace, and only then: team-a's broker relisting, changing a plan and
// answering MaintenanceInfoConflict leaves team-b's (and the cluster's)
// served from the cache; a relist of team-b's broker makes its own read
// afresh, and one of the cluster's broker, whose plans any namespace may
// use, the cluster's.
func TestCacheForgetsOneNamespace(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *engineOptions) { o.retryBase, o.retryCap = time.Minute, time.Hour })
	ctx := context.Background()
	e.registerFake()
	base := osbtest.DefaultCatalog()
	teamA, brokerA := registerIn(t, e, "team-a", osbtest.WithCatalog(maintenanceCatalog(base, "1.0.0")))
	_, brokerB := registerIn(t, e, "team-b")

	// What an instance of each reads: team-b's plan, the cluster's plan
	// (used from team-b too).
	namespaced := func(in *catalog.Instance) {
		in.Spec = catalog.InstanceSpec{ServiceClassExternalName: osbtest.DefaultService, ServicePlanExternalName: osbtest.PlanSync}
		in.Namespace = "team-b"
	}
	inB := e.waitInstance(e.createInstance("db", "", "", nil, namespaced).ID, "Ready", instanceReady)
	inCluster := e.waitInstance(e.createInstance("shared-db", osbtest.DefaultService, osbtest.PlanSync, nil, func(in *catalog.Instance) { in.Namespace = "team-b" }).ID, "Ready", instanceReady)
	type kept struct {
		class  *catalog.ServiceClass
		plan   *catalog.ServicePlan
		broker *catalog.Broker
	}
	// read reads an instance's class, plan and broker through the cache:
	// the same pointers as before when they were kept.
	read := func(in *catalog.Instance) kept {
		t.Helper()
		classRef, planRef, ns := in.Refs()
		var k kept
		var err error
		if k.class, err = e.store.CachedClassIn(ctx, ns, classRef.Name); err != nil {
			t.Fatal(err)
		}
		if k.plan, err = e.store.CachedPlanIn(ctx, ns, planRef.Name); err != nil {
			t.Fatal(err)
		}
		if k.broker, err = e.store.CachedBrokerIn(ctx, ns, k.plan.Spec.BrokerName()); err != nil {
			t.Fatal(err)
		}
		return k
	}
	b, cluster := read(inB), read(inCluster)
	if read(inB) != b || read(inCluster) != cluster {
		t.Fatal("the class, plan and broker read by name were not kept")
	}
	// fed waits until the engine has read the feed up to now.
	fed := func() {
		t.Helper()
		rev, err := e.store.Revision(ctx)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the engine reading the feed", func() bool {
			return gauge(t, e, "bindery_controller_feed_revision") >= float64(rev)
		})
	}
	// still says whether team-b's and the cluster's were kept through a
	// change that reached the engine, and keeps what was read for the next.
	still := func(what string) {
		t.Helper()
		fed()
		if got := read(inB); got != b {
			t.Errorf("after %s: team-b's class, plan and broker were read again", what)
			b = got
		}
		if got := read(inCluster); got != cluster {
			t.Errorf("after %s: the cluster's class, plan and broker were read again", what)
			cluster = got
		}
	}

	for range 3 {
		if _, err := e.store.Relist(ctx, brokerA.ID); err != nil {
			t.Fatal(err)
		}
	}
	still("three relists of team-a's broker")

	// A creation in team-b finds the catalogue moved since it was read
	// (team-a's relists wrote its plans' rows).
	e.createInstance("db-2", "", "", nil, namespaced)
	still("a creation that found the catalogue moved")

	teamA.SetCatalog(maintenanceCatalog(base, "2.0.0"))
	if _, err := e.store.Relist(ctx, brokerA.ID); err != nil {
		t.Fatal(err)
	}
	still("a change of team-a's plan")

	// Team-a's broker answers MaintenanceInfoConflict: the engine fetches
	// its catalogue again and retries.
	teamA.SetCatalog(maintenanceCatalog(base, "3.0.0"))
	inA := e.createInstance("db", "", "", nil, func(in *catalog.Instance) {
		namespaced(in)
		in.Namespace = "team-a"
	})
	e.waitInstance(inA.ID, "Ready", instanceReady)
	if n := teamA.Count(osbtest.VerbProvision); n != 2 {
		t.Errorf("%d provisions of team-a's instance, want one refused for its maintenance_info and one after", n)
	}
	still("team-a's MaintenanceInfoConflict")

	if _, err := e.store.Relist(ctx, brokerB.ID); err != nil {
		t.Fatal(err)
	}
	fed()
	if got := read(inB); got.class == b.class || got.plan == b.plan || got.broker == b.broker {
		t.Error("after a relist of team-b's broker, team-b's class, plan or broker was still served from the cache")
	}
	if read(inCluster) != cluster {
		t.Error("after a relist of team-b's broker, the cluster's class, plan and broker were read again")
	}
	b = read(inB)

	if _, err := e.store.Relist(ctx, brokerID(t, e, "fake")); err != nil {
		t.Fatal(err)
	}
	fed()
	if got := read(inCluster); got.class == cluster.class || got.plan == cluster.plan || got.broker == cluster.broker {
		t.Error("after a relist of the cluster's broker, its class, plan or broker was still served from the cache")
	}
	if read(inB) != b {
		t.Error("after a relist of the cluster's broker, team-b's class, plan and broker were read again")
	}
}

// registerIn registers an osbtest broker named fake in namespace ns and
// fetches its catalogue.
func registerIn(t *testing.T, e *env, ns string, opts ...osbtest.Option) (*osbtest.Broker, *catalog.Broker) {
	t.Helper()
	ctx := context.Background()
	fake := osbtest.New(t, append([]osbtest.Option{osbtest.WithBasicAuth("u", "p")}, opts...)...)
	b := &catalog.Broker{Spec: catalog.BrokerSpec{URL: fake.URL()}}
	b.Name, b.Namespace = "fake", ns
	b, err := e.store.CreateBroker(ctx, b, &catalog.BrokerAuth{Basic: &catalog.BasicAuth{Username: "u", Password: "p"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Relist(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	return fake, b
}
