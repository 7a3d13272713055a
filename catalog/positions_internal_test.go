package catalog

import (
	"fmt"
	"math"
	"testing"

	"github.com/bindery-dev/bindery/internal/osb"
)

// TestPositionsFollowTheCatalogue: the positions of a catalogue's classes
// and plans rise in the broker's order and fit the tables' integer
// columns, for every shape of catalogue that MaxCatalog lets through. Each
// plan takes at least a byte of the document, so no catalogue has more
// than MaxCatalog plans or services. Before, a plan's position was its
// service's number times 10,000 plus its own: from service 214,749 on it
// did not fit the column, so a valid catalogue of 215,000 small services
// could not be stored, and a service of more than 10,000 plans shared
// positions with the next service's, which then listed in between.
func TestPositionsFollowTheCatalogue(t *testing.T) {
	t.Parallel()
	if osb.MaxCatalog >= math.MaxInt32 {
		t.Fatalf("a catalogue may hold %d plans, past the position column", osb.MaxCatalog)
	}
	for _, shape := range []struct{ services, plans int }{
		{1, 4},
		{215_000, 1},
		{2, 10_001},
		{300, 20_000},
		// About what MaxCatalog holds at its smallest services and plans.
		{1_000_000, 30},
	} {
		t.Run(fmt.Sprintf("%d×%d", shape.services, shape.plans), func(t *testing.T) {
			var p positions
			lastClass, lastPlan := -1, -1
			for i := range shape.services {
				class, first := p.next(shape.plans)
				if class <= lastClass || class > math.MaxInt32 {
					t.Fatalf("service %d: class position %d after %d", i, class, lastClass)
				}
				lastClass = class
				if last := first + shape.plans - 1; first <= lastPlan || last > math.MaxInt32 {
					t.Fatalf("service %d: plan positions %d to %d after %d", i, first, last, lastPlan)
				}
				lastPlan = first + shape.plans - 1
			}
		})
	}
}
