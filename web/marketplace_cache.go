package web

import (
	"context"
	"fmt"
	"sync"
	"time"

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

// marketBuildTimeout bounds the build of a view, which no request's
// context bounds (see view).
const marketBuildTimeout = 30 * time.Second

// view is the view of k at revision rev: cached, or built once by build
// however many loads ask for it together. The build serves all of them,
// so it runs under ctx's values but not its cancellation, with a deadline
// of its own: the first request leaving (its client gone) must not fail
// the others with its context.Canceled. A request whose context ends
// stops waiting, with ctx's error; the build goes on for the others.
func (m *marketCache) view(ctx context.Context, rev int64, k marketKey, build func(context.Context) (*marketView, error)) (*marketView, error) {
	if v := m.get(rev, k); v != nil {
		return v, nil
	}
	bctx := context.WithoutCancel(ctx)
	ch := m.fill.DoChan(fmt.Sprintf("%d %#v", rev, k), func() (any, error) {
		if v := m.get(rev, k); v != nil {
			return v, nil
		}
		v, err := buildView(bctx, build)
		if err != nil {
			return nil, err
		}
		m.put(rev, k, v)
		return v, nil
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*marketView), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// buildView runs build within marketBuildTimeout. It runs in a goroutine
// of its own (singleflight's DoChan), where a panic would end the process
// rather than the request: it is the build's error instead.
func buildView(ctx context.Context, build func(context.Context) (*marketView, error)) (v *marketView, err error) {
	ctx, cancel := context.WithTimeout(ctx, marketBuildTimeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			v, err = nil, fmt.Errorf("build the marketplace: %v", p)
		}
	}()
	return build(ctx)
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
