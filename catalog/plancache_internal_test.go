package catalog

import (
	"fmt"
	"testing"
)

// TestPlanCacheBounded: the cache of resolved classes and plans is keyed
// by namespace too, so its entries grow with the namespaces that create
// objects; it keeps at most maxCachedPlans, and as many read by name.
func TestPlanCacheBounded(t *testing.T) {
	c := &planCache{}
	for i := range 3 * maxCachedPlans {
		c.put(fmt.Sprint("key ", i), 1, resolvedPair{})
		if _, err := cachedByName(c, &c.plans, fmt.Sprint("plan ", i), func() (*ServicePlan, error) { return &ServicePlan{}, nil }); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(c.entries); n > maxCachedPlans {
		t.Errorf("%d entries kept, more than %d", n, maxCachedPlans)
	}
	if n := len(c.plans); n > maxCachedPlans {
		t.Errorf("%d plans kept by name, more than %d", n, maxCachedPlans)
	}
	if _, _, ok := c.get(fmt.Sprint("key ", 3*maxCachedPlans-1)); !ok {
		t.Error("the latest entry was not kept")
	}
}

// TestPlanCacheForgets: what was read by name is read again once the
// cache forgot (the engine saw a change, or a creation found the
// catalogue moved), and a read begun before is not kept after.
func TestPlanCacheForgets(t *testing.T) {
	c := &planCache{}
	reads := 0
	read := func() (*ServiceClass, error) { reads++; return &ServiceClass{}, nil }
	for range 2 {
		if _, err := cachedByName(c, &c.classes, "a", read); err != nil {
			t.Fatal(err)
		}
	}
	c.mu.Lock()
	c.forgetNamedLocked()
	c.mu.Unlock()
	_, _ = cachedByName(c, &c.classes, "a", read)
	c.forget(0)
	_, _ = cachedByName(c, &c.classes, "a", func() (*ServiceClass, error) {
		c.mu.Lock()
		c.forgetNamedLocked() // a change while this read runs
		c.mu.Unlock()
		return read()
	})
	_, _ = cachedByName(c, &c.classes, "a", read)
	if reads != 4 {
		t.Errorf("%d reads, want 4: one kept, then one after each forgetting, the one raced not kept", reads)
	}
}
