package catalog

import (
	"fmt"
	"testing"
)

func plansOf(n *namedEntries) *map[string]*ServicePlan    { return &n.plans }
func classesOf(n *namedEntries) *map[string]*ServiceClass { return &n.classes }

// TestPlanCacheBounded: the cache of resolved classes and plans is keyed
// by namespace too, so its entries grow with the namespaces that create
// objects; it keeps at most maxCachedPlans, and as many namespaces and
// entries read by name, in one namespace or many.
func TestPlanCacheBounded(t *testing.T) {
	c := &planCache{}
	plan := func() (*ServicePlan, error) { return &ServicePlan{}, nil }
	for i := range 3 * maxCachedPlans {
		c.put(fmt.Sprint("key ", i), 1, resolvedPair{})
		if _, err := cachedByName(c, "team", fmt.Sprint("plan ", i), plansOf, plan); err != nil {
			t.Fatal(err)
		}
		if _, err := cachedByName(c, fmt.Sprint("team-", i), "plan", plansOf, plan); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(c.entries); n > maxCachedPlans {
		t.Errorf("%d entries kept, more than %d", n, maxCachedPlans)
	}
	kept := len(c.named)
	for _, n := range c.named {
		kept += len(n.plans)
	}
	if kept > maxCachedPlans || kept != c.nNamed {
		t.Errorf("%d namespaces and plans kept by name (counted %d), more than %d", kept, c.nNamed, maxCachedPlans)
	}
	if _, _, ok := c.get(fmt.Sprint("key ", 3*maxCachedPlans-1)); !ok {
		t.Error("the latest entry was not kept")
	}
	if _, ok := c.named[fmt.Sprint("team-", 3*maxCachedPlans-1)].plans["plan"]; !ok {
		t.Error("the latest plan read by name was not kept")
	}
}

// TestPlanCacheForgets: what was read by name is read again once the
// engine saw a change in its namespace, and only then (not for another
// namespace's, nor when a creation found the catalogue moved); a read
// begun before its namespace was forgotten is not kept after.
func TestPlanCacheForgets(t *testing.T) {
	c := &planCache{}
	reads := 0
	read := func() (*ServiceClass, error) { reads++; return &ServiceClass{}, nil }
	get := func(namespace string, read func() (*ServiceClass, error)) {
		t.Helper()
		if _, err := cachedByName(c, namespace, "a", classesOf, read); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		get("team-b", read)
	}
	c.forgetNamed("team-a")
	c.forgetNamed("")
	c.forget(0)
	get("team-b", read)
	if reads != 1 {
		t.Errorf("%d reads, want 1: kept through other namespaces' changes and a creation's", reads)
	}
	c.forgetNamed("team-b")
	get("team-b", func() (*ServiceClass, error) {
		c.forgetNamed("team-b") // a change while this read runs
		return read()
	})
	get("team-b", read)
	c.forgetNamed("team-b")
	get("team-b", func() (*ServiceClass, error) {
		c.forgetNamed("team-a") // another namespace's
		return read()
	})
	get("team-b", read)
	if reads != 4 {
		t.Errorf("%d reads, want 4: one kept; after forgetting, one raced by its namespace's change, not kept, then one kept; one raced by another's, kept", reads)
	}
	if c.nNamed != 2 {
		t.Errorf("%d namespaces and entries counted, want 2", c.nNamed)
	}
}
