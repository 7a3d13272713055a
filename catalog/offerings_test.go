package catalog_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// TestOfferings: the marketplace's pages of services, the cluster's first
// and then a namespace's own, filtered by words (in a service's or its
// plans' texts), tag, broker, price and the session's namespaces, with
// their plans counted.
func TestOfferings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	cluster := osbtest.New(t, osbtest.WithBasicAuth("u", "p"), osbtest.WithCatalog(osbtest.GenerateCatalog(5, 3)))
	registerIn(t, s, "", "big", cluster.URL())
	team := osbtest.New(t, osbtest.WithBasicAuth("u", "p"), osbtest.WithCatalog(osbtest.GenerateCatalog(2, 1)))
	registerIn(t, s, "team-a", "own", team.URL())
	free, paid := true, false

	page, total, err := s.Offerings(ctx, catalog.OfferingFilter{}, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	if total != 7 || len(page) != 3 || page[0].Class.Spec.ExternalName != "fake-service-1" || page[0].Class.Namespace != "" ||
		page[0].Plans != 3 || page[0].FreePlans != 1 {
		t.Fatalf("first page: %d in all, %+v", total, page)
	}
	last, _, err := s.Offerings(ctx, catalog.OfferingFilter{}, 6, 3)
	if err != nil || len(last) != 1 || last[0].Class.Namespace != "team-a" || last[0].Plans != 1 {
		t.Fatalf("last page: %+v (%v)", last, err)
	}
	for _, tc := range []struct {
		name  string
		f     catalog.OfferingFilter
		total int
	}{
		{"another namespace's session", catalog.OfferingFilter{Namespaces: []string{"team-b"}}, 5},
		{"the namespace's session", catalog.OfferingFilter{Namespaces: []string{"team-a"}}, 7},
		{"the cluster's broker", catalog.OfferingFilter{Broker: "big"}, 5},
		{"the namespace's broker", catalog.OfferingFilter{Broker: "team-a/own"}, 2},
		{"no such broker", catalog.OfferingFilter{Broker: "team-b/own"}, 0},
		{"a tag of both", catalog.OfferingFilter{Tag: "group-1"}, 2},
		{"a display name", catalog.OfferingFilter{Query: "fake service 4"}, 1},
		{"a plan's description", catalog.OfferingFilter{Query: "plan 3 of fake-service-2"}, 1},
		{"wildcards are letters", catalog.OfferingFilter{Query: "100%"}, 0},
		{"a paid plan", catalog.OfferingFilter{Free: &paid}, 5},
		{"a free plan", catalog.OfferingFilter{Free: &free}, 7},
	} {
		got, n, err := s.Offerings(ctx, tc.f, 0, 100)
		if err != nil || n != tc.total || len(got) != tc.total {
			t.Errorf("%s: %d (%d on the page), want %d (%v)", tc.name, n, len(got), tc.total, err)
		}
	}
	tags, err := s.OfferedTags(ctx, nil, 100)
	if want := []string{"fake", "group-1", "group-2", "group-3", "group-4", "group-5"}; err != nil || !slices.Equal(tags, want) {
		t.Fatalf("tags %v (%v)", tags, err)
	}
	if tags, _ := s.OfferedTags(ctx, nil, 2); len(tags) != 2 {
		t.Fatalf("tags beyond the limit: %v", tags)
	}
}

// TestOfferingsHonourVisibility: to a session of some namespaces, a plan
// hidden from all of them does not exist: it is not counted on its
// service's card, does not make the service offered, and neither price
// nor words find the service through it. A session of all sees every plan.
func TestOfferingsHonourVisibility(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	b := osbtest.New(t, osbtest.WithBasicAuth("u", "p"), osbtest.WithCatalog(osbtest.GenerateCatalog(2, 3)))
	registerIn(t, s, "", "big", b.URL())
	hide := func(class string, free *bool, namespaces []string) {
		t.Helper()
		plans, err := s.ListPlans(ctx, catalog.PlanFilter{Class: class, Free: free}, catalog.ListOptions{})
		if err != nil || len(plans.Items) == 0 {
			t.Fatalf("plans of %s: %v (%v)", class, plans.Items, err)
		}
		for _, p := range plans.Items {
			if _, err := s.SetPlanVisibility(ctx, p.ID, namespaces); err != nil {
				t.Fatal(err)
			}
		}
	}
	free := true
	hide("fake-service-1", &free, []string{"team-a"}) // its free plan: team-a's only
	hide("fake-service-2", nil, []string{})           // every plan: no namespace's
	card := func(f catalog.OfferingFilter) map[string][2]int {
		t.Helper()
		page, total, err := s.Offerings(ctx, f, 0, 100)
		if err != nil || total != len(page) {
			t.Fatalf("%+v: %d of %d (%v)", f, len(page), total, err)
		}
		out := map[string][2]int{}
		for _, o := range page {
			out[o.Class.Spec.ExternalName] = [2]int{o.Plans, o.FreePlans}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		f    catalog.OfferingFilter
		want map[string][2]int
	}{
		{"a session of all", catalog.OfferingFilter{}, map[string][2]int{"fake-service-1": {3, 1}, "fake-service-2": {3, 1}}},
		{"team-a", catalog.OfferingFilter{Namespaces: []string{"team-a"}}, map[string][2]int{"fake-service-1": {3, 1}}},
		{"team-b", catalog.OfferingFilter{Namespaces: []string{"team-b"}}, map[string][2]int{"fake-service-1": {2, 0}}},
		{"team-b, free", catalog.OfferingFilter{Namespaces: []string{"team-b"}, Free: &free}, map[string][2]int{}},
		{"team-b, a hidden plan's words", catalog.OfferingFilter{Namespaces: []string{"team-b"}, Query: "plan 1 of fake-service-2"}, map[string][2]int{}},
		{"team-a and team-b", catalog.OfferingFilter{Namespaces: []string{"team-b", "team-a"}}, map[string][2]int{"fake-service-1": {3, 1}}},
	} {
		if got := card(tc.f); !maps.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		namespaces []string
		want       []string
	}{
		{nil, []string{"fake", "group-1", "group-2"}},
		{[]string{"team-b"}, []string{"fake", "group-1"}},
	} {
		if tags, err := s.OfferedTags(ctx, tc.namespaces, 100); err != nil || !slices.Equal(tags, tc.want) {
			t.Errorf("tags offered to %v: %v, want %v (%v)", tc.namespaces, tags, tc.want, err)
		}
	}
}
