package catalog

import (
	"fmt"
	"testing"
)

// TestCatalogueCacheBounded: the cache of resolved classes and plans is
// keyed by namespace too, so its entries grow with the namespaces that
// create objects; it keeps at most maxCatalogueEntries.
func TestCatalogueCacheBounded(t *testing.T) {
	c := &catalogueCache{}
	for i := range 3 * maxCatalogueEntries {
		c.put(fmt.Sprint("key ", i), 1, resolvedPair{})
	}
	if n := len(c.entries); n > maxCatalogueEntries {
		t.Errorf("%d entries kept, more than %d", n, maxCatalogueEntries)
	}
	if _, _, ok := c.get(fmt.Sprint("key ", 3*maxCatalogueEntries-1)); !ok {
		t.Error("the latest entry was not kept")
	}
}
