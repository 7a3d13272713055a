package catalog_test

import (
	"context"
	"slices"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// TestPagesThroughRemovedPlans: a plan kept as removed (an instance holds
// it) keeps the position it had, which the plan after it in the broker's
// catalogue now takes. Lists paged one object at a time see every plan,
// as the unpaged list does: typed, raw and as the Kubernetes API reads
// them.
func TestPagesThroughRemovedPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, fake, b := listedFake(t)
	full := fake.Catalog()
	in := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: osbtest.DefaultService, ClusterServicePlanExternalName: full[0].Plans[1].Name}}
	in.Name = "holds"
	if _, err := s.CreateInstance(ctx, in); err != nil {
		t.Fatal(err)
	}
	trimmed := []osbtest.Service{full[0]}
	trimmed[0].Plans = []osbtest.Plan{full[0].Plans[0], full[0].Plans[2], full[0].Plans[3]}
	fake.SetCatalog(trimmed)
	if _, err := s.Relist(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	lists := map[string]func(catalog.ListOptions) ([]string, string, error){
		"ListPlans": func(o catalog.ListOptions) ([]string, string, error) {
			l, err := s.ListPlans(ctx, catalog.PlanFilter{IncludeRemoved: true}, o)
			return idsOf(l.Items, func(p *catalog.ServicePlan) string { return p.ID }), l.Continue, err
		},
		"ListPlansRaw": func(o catalog.ListOptions) ([]string, string, error) {
			l, err := s.ListPlansRaw(ctx, catalog.PlanFilter{IncludeRemoved: true}, o)
			return idsOf(l.Items, func(p *catalog.RawObject) string { return p.ID }), l.Continue, err
		},
		"ListRaw": func(o catalog.ListOptions) ([]string, string, error) {
			l, err := s.ListRaw(ctx, catalog.KindServicePlan, o)
			return idsOf(l.Items, func(p *catalog.RawObject) string { return p.ID }), l.Continue, err
		},
	}
	for name, list := range lists {
		all, _, err := list(catalog.ListOptions{})
		if err != nil || len(all) != len(full[0].Plans) {
			t.Fatalf("%s unpaged: %d plans (%v), want %d", name, len(all), err, len(full[0].Plans))
		}
		var paged []string
		for o := (catalog.ListOptions{Limit: 1}); len(paged) <= len(all); {
			ids, next, err := list(o)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			paged = append(paged, ids...)
			if next == "" {
				break
			}
			o.Continue = next
		}
		if !slices.Equal(paged, all) {
			t.Errorf("%s a plan a page: %v, unpaged %v", name, paged, all)
		}
	}
}

func idsOf[T any](items []T, id func(T) string) []string {
	out := make([]string, len(items))
	for i, o := range items {
		out[i] = id(o)
	}
	return out
}
