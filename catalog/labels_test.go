package catalog_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// TestLabelSelectors: every kind of requirement, answered in SQL, selects
// exactly what Kubernetes' own selector matches on the same objects, and
// pages of a selective list are full.
func TestLabelSelectors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"))
	if _, err := s.Relist(ctx, register(t, s, "fake", fake.URL(), "").ID); err != nil {
		t.Fatal(err)
	}
	sets := []map[string]string{
		nil,
		{"team": "a"},
		{"team": "b", "tier": "3"},
		{"team": "c", "tier": "12"},
		{"tier": "x"},
		{"team": "a", "env": "prod", "tier": "0"},
		{"app.kubernetes.io/name": "db"},
		// Integers as Kubernetes parses them: 19 digits, leading zeros,
		// and past int64 (no integer).
		{"tier": "1000000000000000000"},
		{"tier": "0000000000000000000000007"},
		{"tier": "99999999999999999999"},
	}
	all := map[string]map[string]string{}
	for i := range 70 {
		in := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: osbtest.DefaultService, ClusterServicePlanExternalName: osbtest.PlanSync}}
		in.Name, in.Namespace, in.Labels = fmt.Sprintf("db-%02d", i), "ns", sets[i%len(sets)]
		if _, err := s.CreateInstance(ctx, in); err != nil {
			t.Fatal(err)
		}
		all[in.Name] = in.Labels
	}
	for _, sel := range []string{
		"team=a", "team==a", "team!=a", "team in (a,b)", "team notin (a,b)", "team", "!team",
		"tier>2", "tier<3", "tier>0,team", "team=a,env=prod", "app.kubernetes.io/name=db", "team=zzz", "",
	} {
		parsed, err := labels.Parse(sel)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for name, l := range all {
			if parsed.Matches(labels.Set(l)) {
				want = append(want, name)
			}
		}
		slices.Sort(want)
		var got []string
		opts := catalog.ListOptions{Labels: parsed, Limit: 7}
		for {
			page, err := s.ListInstances(ctx, opts)
			if err != nil {
				t.Fatalf("%q: %v", sel, err)
			}
			if page.Continue != "" && len(page.Items) != 7 {
				t.Errorf("%q: a page of %d items before the last", sel, len(page.Items))
			}
			for _, in := range page.Items {
				got = append(got, in.Name)
			}
			raw, err := s.ListRaw(ctx, catalog.KindInstance, opts)
			if err != nil || len(raw.Items) != len(page.Items) {
				t.Fatalf("%q: ListRaw gave %d items, ListInstances %d (%v)", sel, len(raw.Items), len(page.Items), err)
			}
			if opts.Continue = page.Continue; opts.Continue == "" {
				break
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%q selected %v, want %v", sel, got, want)
		}
	}
}

// TestLabelSelectorBound: a selector of catalog.MaxSelectorTerms
// requirements is answered; one more is a validation error naming
// labelSelector, for pages and scans alike, where the database used to
// refuse the statement's parameters. The bound is one whose statement
// PostgreSQL plans in tens of milliseconds: at most 1,000 terms.
func TestLabelSelectorBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	selector := func(n int) labels.Selector {
		reqs := make([]labels.Requirement, n)
		for i := range reqs {
			r, err := labels.NewRequirement(fmt.Sprintf("k%d", i), selection.DoesNotExist, nil)
			if err != nil {
				t.Fatal(err)
			}
			reqs[i] = *r
		}
		return labels.NewSelector().Add(reqs...)
	}
	if catalog.MaxSelectorTerms > 1000 {
		t.Errorf("MaxSelectorTerms is %d: a selector that large holds a database core for seconds", catalog.MaxSelectorTerms)
	}
	if _, err := s.ListInstances(ctx, catalog.ListOptions{Labels: selector(catalog.MaxSelectorTerms), Limit: 5}); err != nil {
		t.Errorf("a selector of %d terms: %v", catalog.MaxSelectorTerms, err)
	}
	over := catalog.ListOptions{Labels: selector(catalog.MaxSelectorTerms + 1)}
	_, err := s.ListInstances(ctx, over)
	if v, ok := catalog.AsValidation(err); !ok || v.Errors[0].Field != "labelSelector" {
		t.Errorf("a page with a selector past the bound: %v, want a validation error naming labelSelector", err)
	}
	err = s.ScanRaw(ctx, catalog.KindInstance, over, func(int64, string, []*catalog.RawObject) error { return nil })
	if _, ok := catalog.AsValidation(err); !ok {
		t.Errorf("a scan with a selector past the bound: %v, want a validation error", err)
	}
}
