package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/osbtest"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/migrations"
)

// roundTrips counts what a connection sends to PostgreSQL and waits for:
// a query, or a batch (pipelined statements). The notification that
// follows a commit is not counted: the store sends it after the write has
// returned.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if !strings.Contains(d.SQL, "pg_notify") {
		r.n.Add(1)
	}
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// TestCreationRoundTrips: once the store has read a plan, an instance of
// it is created in one round trip and a binding in two (the read of its
// instance, then the rest), after a relist that changed nothing too; a
// change of the catalogue costs the next creation a read of it again, and
// no more.
func TestCreationRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, trips := tracedStore(t)
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"))
	b := register(t, s, "fake", fake.URL(), "")
	if _, err := s.Relist(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	create := func(name string) (instance, binding int64) {
		t.Helper()
		in := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: osbtest.DefaultService, ClusterServicePlanExternalName: osbtest.PlanSync}}
		in.Name = name
		before := trips.n.Load()
		if _, err := s.CreateInstance(ctx, in); err != nil {
			t.Fatal(err)
		}
		instance = trips.n.Load() - before
		bd := &catalog.Binding{Spec: catalog.BindingSpec{InstanceRef: catalog.ObjectRef{Name: name}}}
		bd.Name = name
		before = trips.n.Load()
		if _, err := s.CreateBinding(ctx, bd); err != nil {
			t.Fatal(err)
		}
		return instance, trips.n.Load() - before
	}
	for i := range 3 {
		create(fmt.Sprintf("warm-%d", i))
	}
	if in, bd := create("kept"); in != 1 || bd != 2 {
		t.Errorf("round trips to create an instance and a binding of a plan read before: %d and %d, want 1 and 2", in, bd)
	}
	// A relist of an unchanged catalogue leaves what was read usable, as
	// a namespace's broker that relists every second leaves the others'.
	if _, err := s.Relist(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if in, bd := create("after-quiet-relist"); in != 1 || bd != 2 {
		t.Errorf("round trips after a relist of an unchanged catalogue: %d and %d, want 1 and 2", in, bd)
	}
	// The catalogue changes: the next creations see it and read it again.
	services := fake.Catalog()
	services[0].Description = "A fake service, described otherwise."
	fake.SetCatalog(services)
	if _, err := s.Relist(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if in, bd := create("after-relist"); in < 2 || bd < 3 {
		t.Errorf("round trips after the catalogue changed: %d and %d, want the creations to read it again", in, bd)
	}
	if in, bd := create("read-again"); in != 1 || bd != 2 {
		t.Errorf("round trips once the changed catalogue is read: %d and %d, want 1 and 2", in, bd)
	}
}

// tracedStore is a store on a database of its own whose round trips are
// counted. One connection: every statement is prepared on it by the first
// calls, which the counted ones then do not pay for.
func tracedStore(t testing.TB) (*catalog.Store, *roundTrips) {
	t.Helper()
	trips := &roundTrips{}
	pool := tracedPool(t, pgtest.New(t), trips)
	if err := migrations.Up(context.Background(), pool, migrations.Catalog); err != nil {
		t.Fatal(err)
	}
	keys, _ := keyring.Parse(keyring.Generate())
	return catalog.NewStore(pool, keys, nil), trips
}

// tracedPool is a pool of one connection to url whose statements tracer
// sees.
func tracedPool(t testing.TB, url string, tracer pgx.QueryTracer) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// BenchmarkCachedBesideNoisyNamespace: what the engine reads to reconcile
// an instance of team-b's namespaced broker (its class, plan and broker,
// through the cache) when a change of team-a's broker reached it before
// each reconcile, as when team-a's broker relists every second among
// many reconciles of others. Reported with the round trips to PostgreSQL
// each reconcile's reads cost.
//
//	go test -run '^$' -bench CachedBesideNoisyNamespace ./catalog/
func BenchmarkCachedBesideNoisyNamespace(b *testing.B) {
	ctx := context.Background()
	s, trips := tracedStore(b)
	fake := osbtest.New(b, osbtest.WithBasicAuth("u", "p"))
	br := &catalog.Broker{Spec: catalog.BrokerSpec{URL: fake.URL()}}
	br.Name, br.Namespace = "fake", "team-b"
	br, err := s.CreateBroker(ctx, br, &catalog.BrokerAuth{Basic: &catalog.BasicAuth{Username: "u", Password: "p"}})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Relist(ctx, br.ID); err != nil {
		b.Fatal(err)
	}
	in := &catalog.Instance{Spec: catalog.InstanceSpec{ServiceClassExternalName: osbtest.DefaultService, ServicePlanExternalName: osbtest.PlanSync}}
	in.Name, in.Namespace = "db", "team-b"
	if in, err = s.CreateInstance(ctx, in); err != nil {
		b.Fatal(err)
	}
	classRef, planRef, ns := in.Refs()
	reconcile := func() {
		if _, err := s.CachedClassIn(ctx, ns, classRef.Name); err != nil {
			b.Fatal(err)
		}
		if _, err := s.CachedPlanIn(ctx, ns, planRef.Name); err != nil {
			b.Fatal(err)
		}
		if _, err := s.CachedBrokerIn(ctx, ns, br.Name); err != nil {
			b.Fatal(err)
		}
	}
	reconcile()
	before, n := trips.n.Load(), 0
	for b.Loop() {
		s.ForgetCached("team-a")
		reconcile()
		n++
	}
	b.ReportMetric(float64(trips.n.Load()-before)/float64(n), "round-trips/op")
}

// TestCreationFollowsCatalogueChanges: what the store kept of a plan is
// not used once the broker changed it: a plan no longer bindable refuses
// new bindings, a removed plan new instances, and a restored one takes
// them again.
func TestCreationFollowsCatalogueChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, fake, b := listedFake(t)
	instance := func(name string) error {
		in := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: osbtest.DefaultService, ClusterServicePlanExternalName: osbtest.PlanSync}}
		in.Name = name
		_, err := s.CreateInstance(ctx, in)
		return err
	}
	binding := func(name, instance string) error {
		bd := &catalog.Binding{Spec: catalog.BindingSpec{InstanceRef: catalog.ObjectRef{Name: instance}}}
		bd.Name = name
		_, err := s.CreateBinding(ctx, bd)
		return err
	}
	// Read and kept.
	if err := instance("db"); err != nil {
		t.Fatal(err)
	}
	if err := binding("app-1", "db"); err != nil {
		t.Fatal(err)
	}
	relist := func(change func(p *osbtest.Plan)) {
		t.Helper()
		services := fake.Catalog()
		services[0].Plans = slices.Clone(services[0].Plans)
		for i := range services[0].Plans {
			if services[0].Plans[i].Name == osbtest.PlanSync {
				change(&services[0].Plans[i])
			}
		}
		fake.SetCatalog(services)
		if _, err := s.Relist(ctx, b.ID); err != nil {
			t.Fatal(err)
		}
	}
	relist(func(p *osbtest.Plan) { p.Bindable = new(false) })
	if err := binding("app-2", "db"); !errors.Is(err, catalog.ErrUnprocessable) || !strings.Contains(err.Error(), "cannot be bound") {
		t.Errorf("a binding of a plan no longer bindable: %v, want it refused", err)
	}
	relist(func(p *osbtest.Plan) { p.Bindable = new(true) })
	if err := binding("app-3", "db"); err != nil {
		t.Errorf("a binding of a plan bindable again: %v", err)
	}
	// Removed from the broker's catalogue: new instances are refused.
	services := fake.Catalog()
	kept := services[0].Plans
	services[0].Plans = slices.DeleteFunc(slices.Clone(kept), func(p osbtest.Plan) bool { return p.Name == osbtest.PlanSync })
	fake.SetCatalog(services)
	if _, err := s.Relist(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if err := instance("db-2"); err == nil || !strings.Contains(err.Error(), "removed") {
		t.Errorf("a new instance of a removed plan: %v, want it refused", err)
	}
	services[0].Plans = kept
	fake.SetCatalog(services)
	if _, err := s.Relist(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if err := instance("db-3"); err != nil {
		t.Errorf("a new instance of a restored plan: %v", err)
	}
}
