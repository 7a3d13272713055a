package web

import (
	"html/template"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
)

type marketFilter struct {
	Q, Tag, Broker, Price string
}

type marketClass struct {
	Class *catalog.ServiceClass
	Plans []*catalog.ServicePlan
}

type marketView struct {
	Filter  marketFilter
	Tags    []string
	Brokers []string
	Classes []marketClass
	Plans   int
	// Empty says the catalogue has nothing at all (no broker offers
	// anything), rather than nothing that matches.
	Empty bool
	// Table is the rendered table of classes and plans, the same for
	// every role.
	Table template.HTML
}

// marketCache keeps the marketplace's views of the catalog's current
// revision: reading and rendering a thousand plans costs far more than
// asking for the revision, and the catalogue rarely changes.
type marketCache struct {
	mu    sync.Mutex
	rev   int64
	views map[marketFilter]*marketView
}

func (m *marketCache) get(rev int64, f marketFilter) *marketView {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rev != rev {
		return nil
	}
	return m.views[f]
}

func (m *marketCache) put(rev int64, f marketFilter, v *marketView) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.views == nil || m.rev != rev || len(m.views) > 64 {
		m.rev, m.views = rev, map[marketFilter]*marketView{}
	}
	m.views[f] = v
}

// marketplace lists the service classes and their plans, filtered by
// text, tag, broker and price.
func (s *Server) marketplace(c echo.Context) error {
	ctx := c.Request().Context()
	rev, err := s.store.Revision(ctx)
	if err != nil {
		return err
	}
	f := marketFilter{Q: strings.TrimSpace(c.QueryParam("q")), Tag: c.QueryParam("tag"), Broker: c.QueryParam("broker"), Price: c.QueryParam("price")}
	pf := catalog.PlanFilter{Broker: f.Broker}
	switch f.Price {
	case "free", "paid":
		free := f.Price == "free"
		pf.Free = &free
	default:
		f.Price = ""
	}
	if v := s.market.get(rev, f); v != nil {
		return s.page(c, http.StatusOK, "marketplace", "Marketplace", "marketplace", v)
	}
	classes, err := s.store.ListClasses(ctx, catalog.ClassFilter{Broker: f.Broker}, catalog.ListOptions{})
	if err != nil {
		return err
	}
	plans, err := s.store.ListPlans(ctx, pf, catalog.ListOptions{})
	if err != nil {
		return err
	}
	brokers, err := s.store.ListBrokers(ctx, catalog.ListOptions{})
	if err != nil {
		return err
	}
	v := marketView{Filter: f, Empty: len(classes.Items) == 0 && f.Broker == ""}
	for _, b := range brokers.Items {
		v.Brokers = append(v.Brokers, b.Name)
	}
	byClass := map[string][]*catalog.ServicePlan{}
	for _, p := range plans.Items {
		byClass[p.Spec.ClusterServiceClassRef.Name] = append(byClass[p.Spec.ClusterServiceClassRef.Name], p)
	}
	q := strings.ToLower(f.Q)
	for _, cl := range classes.Items {
		for _, t := range cl.Spec.Tags {
			if !slices.Contains(v.Tags, t) {
				v.Tags = append(v.Tags, t)
			}
		}
		if f.Tag != "" && !slices.Contains(cl.Spec.Tags, f.Tag) {
			continue
		}
		ps := byClass[cl.Name]
		if q != "" && !matches(q, cl.Spec.ExternalName, cl.Spec.Description) {
			var kept []*catalog.ServicePlan
			for _, p := range ps {
				if matches(q, p.Spec.ExternalName, p.Spec.Description) {
					kept = append(kept, p)
				}
			}
			ps = kept
		}
		if len(ps) == 0 {
			continue
		}
		v.Classes = append(v.Classes, marketClass{Class: cl, Plans: ps})
		v.Plans += len(ps)
	}
	slices.Sort(v.Tags)
	table, err := s.renderString(c, "marketplace", "market-table", v)
	if err != nil {
		return err
	}
	v.Table = template.HTML(table) //nolint:gosec // rendered by html/template just above
	s.market.put(rev, f, &v)
	return s.page(c, http.StatusOK, "marketplace", "Marketplace", "marketplace", &v)
}

func matches(q string, fields ...string) bool {
	for _, f := range fields {
		if strings.Contains(strings.ToLower(f), q) {
			return true
		}
	}
	return false
}
