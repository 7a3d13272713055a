package catalog_test

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// TestRelistMovesCatalogueVersionOnChange: a relist of a catalogue the
// broker did not change writes no class or plan row, tells the feed of no
// change to them and leaves the catalogue's version where it was, so that
// the creations of every namespace keep what they read of the catalogue.
// Nor does one that only reorders the plans, which writes their positions
// (nothing a creation resolves depends on them): a broker that sends them
// in another order at each fetch would otherwise move it at each relist.
// A relist that adds, changes, removes or restores a plan moves it.
func TestRelistMovesCatalogueVersionOnChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newPoolStore(t)
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"))
	// Metadata and schemas of several keys, as real brokers send: jsonb
	// keeps keys in an order of its own.
	full := fake.Catalog()
	full[0].Metadata = map[string]any{"displayName": "Fake", "provider": map[string]any{"name": "osbtest"}, "tag": "x"}
	full[0].Plans = slices.Clone(full[0].Plans)
	for i := range full[0].Plans {
		full[0].Plans[i].Metadata = map[string]any{"bullets": []any{"1 GB"}, "costs": []any{map[string]any{"amount": map[string]any{"usd": 1.5}, "unit": "MONTHLY"}}}
	}
	full[0].Plans[0].Schemas = &osbtest.Schemas{ServiceInstance: &osbtest.ServiceInstanceSchema{Create: &osbtest.InputParameters{Parameters: map[string]any{
		"$schema": "http://json-schema.org/draft-04/schema#", "type": "object", "properties": map[string]any{"size": map[string]any{"type": "integer", "minimum": 1}},
	}}}}
	fake.SetCatalog(full)
	b := register(t, s, "fake", fake.URL(), "")
	if _, err := s.Relist(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	in := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: osbtest.DefaultService, ClusterServicePlanExternalName: osbtest.PlanFixed}}
	in.Name = "holds-fixed"
	if _, err := s.CreateInstance(ctx, in); err != nil {
		t.Fatal(err)
	}
	withPlans := func(plans ...osbtest.Plan) []osbtest.Service {
		services := slices.Clone(full)
		services[0].Plans = plans
		return services
	}
	p := full[0].Plans // sync, async, async-only, fixed
	changed := p[0]
	changed.Description = "Answers synchronously, now described otherwise."
	added := osbtest.Plan{ID: "added-plan-id", Name: "added", Description: "A plan offered later."}
	steps := []struct {
		name    string
		catalog []osbtest.Service
		moves   bool
		// reordered: rows are written (their positions), quietly.
		reordered bool
	}{
		{"unchanged", full, false, false},
		{"a plan added", withPlans(p[0], p[1], p[2], p[3], added), true, false},
		{"unchanged after an addition", withPlans(p[0], p[1], p[2], p[3], added), false, false},
		{"a plan changed", withPlans(changed, p[1], p[2], p[3], added), true, false},
		{"plans reordered", withPlans(p[1], changed, p[2], p[3], added), false, true},
		{"plans reordered back", withPlans(changed, p[1], p[2], p[3], added), false, true},
		{"plans reordered and one changed", withPlans(p[1], p[0], p[2], p[3], added), true, false},
		{"a plan removed, deleted", withPlans(p[1], p[0], p[2], p[3]), true, false},
		{"a plan an instance holds removed, marked", withPlans(p[1], p[0], p[2]), true, false},
		{"unchanged with a plan marked removed", withPlans(p[1], p[0], p[2]), false, false},
		{"the held plan restored", withPlans(p[1], p[0], p[2], p[3]), true, false},
		{"unchanged at last", withPlans(p[1], p[0], p[2], p[3]), false, false},
	}
	for _, step := range steps {
		fake.SetCatalog(step.catalog)
		v, rows := catalogueVersion(t, pool), catalogueRows(t, pool)
		fed, err := s.Feed().LastOf(ctx, catalog.KindServiceClass, catalog.KindServicePlan)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Relist(ctx, b.ID); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		after := catalogueVersion(t, pool)
		if moved := after != v; moved != step.moves {
			t.Errorf("%s: the catalogue's version went from %d to %d, want moved=%v", step.name, v, after, step.moves)
		}
		written := 0
		for id, ctid := range catalogueRows(t, pool) {
			if rows[id] != ctid {
				written++
			}
		}
		switch {
		case step.reordered && written == 0:
			t.Errorf("%s: no class or plan row written, want the plans' positions", step.name)
		case !step.moves && !step.reordered && written > 0:
			t.Errorf("%s: %d class and plan rows written again, want none", step.name, written)
		}
		if !step.moves {
			if now, err := s.Feed().LastOf(ctx, catalog.KindServiceClass, catalog.KindServicePlan); err != nil || now != fed {
				t.Errorf("%s: the feed's last class or plan change went from %d to %d (%v), want no change told", step.name, fed, now, err)
			}
		}
	}
}

// catalogueVersion reads catalog.catalogue_version.
func catalogueVersion(t testing.TB, pool *pgxpool.Pool) int64 {
	t.Helper()
	var v int64
	if err := pool.QueryRow(context.Background(), `SELECT value FROM catalog.catalogue_version`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// catalogueRows are the physical places (ctid) of the class and plan rows,
// by id: a row written again, even to the same values, moves.
func catalogueRows(t testing.TB, pool *pgxpool.Pool) map[string]string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT id::text, ctid::text FROM catalog.service_classes
		UNION ALL SELECT id::text, ctid::text FROM catalog.service_plans`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var id, ctid string
	if _, err := pgx.ForEachRow(rows, []any{&id, &ctid}, func() error { out[id] = ctid; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}
