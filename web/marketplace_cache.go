package web

import (
	"fmt"
	"sync"

	"golang.org/x/sync/singleflight"

	"github.com/bindery-dev/bindery/catalog"
)

// marketCache keeps the marketplace's views, rendered and compressed, at
// the change feed's position of the newest change of the catalogue
// (Feed.LastOf the cluster's and the namespaces' brokers, classes and
// plans): reading and rendering a page of services costs far more than
// asking for the position, and the catalogue rarely changes. Loads that
// miss together read the catalog once.
type marketCache struct {
	mu    sync.Mutex
	rev   int64
	views map[marketKey]*marketView
	fill  singleflight.Group
}

// catalogueKinds are the kinds whose changes change the marketplace.
var catalogueKinds = []string{
	catalog.KindBroker, catalog.KindServiceClass, catalog.KindServicePlan,
	catalog.KindNamespacedBroker, catalog.KindNamespacedServiceClass, catalog.KindNamespacedServicePlan,
}

// view is the view of k at revision rev: cached, or built once by build
// however many loads ask for it together.
func (m *marketCache) view(rev int64, k marketKey, build func() (*marketView, error)) (*marketView, error) {
	if v := m.get(rev, k); v != nil {
		return v, nil
	}
	got, err, _ := m.fill.Do(fmt.Sprintf("%d %#v", rev, k), func() (any, error) {
		if v := m.get(rev, k); v != nil {
			return v, nil
		}
		v, err := build()
		if err != nil {
			return nil, err
		}
		m.put(rev, k, v)
		return v, nil
	})
	if err != nil {
		return nil, err
	}
	return got.(*marketView), nil
}

func (m *marketCache) get(rev int64, k marketKey) *marketView {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rev != rev {
		return nil
	}
	return m.views[k]
}

// put keeps v; at most 64 views at a time, all of one revision.
func (m *marketCache) put(rev int64, k marketKey, v *marketView) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.views == nil || m.rev != rev || len(m.views) > 64 {
		m.rev, m.views = rev, map[marketKey]*marketView{}
	}
	m.views[k] = v
}
