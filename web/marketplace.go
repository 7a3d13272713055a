package web

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"
	"golang.org/x/sync/singleflight"

	"github.com/bindery-dev/bindery/catalog"
)

type marketFilter struct {
	Q, Tag, Broker, Price string
}

type marketClass struct {
	Class *catalog.ServiceClass
	Plans []*catalog.ServicePlan
}

// marketBroker is a choice of the broker filter: the cluster's brokers by
// name, a namespace's own by namespace/name.
type marketBroker struct {
	Value, Label string
}

type marketView struct {
	Filter  marketFilter
	Tags    []string
	Brokers []marketBroker
	Classes []marketClass
	Plans   int
	// Empty says the catalogue has nothing at all (no broker offers
	// anything), rather than nothing that matches.
	Empty bool
	// Table is the rendered table of classes and plans, the same for
	// every role; in the page it is tableMark until the page is sent.
	Table template.HTML
	// table is Table compressed once, for every page that shows it.
	table *deflated
}

// tableMark stands for the table while the rest of the page is rendered:
// a NUL is in no rendered page otherwise (no stored text has one, and
// html/template replaces the character).
const tableMark = "\x00market-table\x00"

// marketKey is what a marketplace view depends on: the filter, and the
// namespaces whose own classes it shows (those of the session; "" for a
// session of all namespaces).
type marketKey struct {
	marketFilter
	scope string
}

// marketCache keeps the marketplace's views, rendered and compressed, at
// the change feed's position of the newest change of the catalogue
// (Feed.LastOf the cluster's and the namespaces' brokers, classes and
// plans): reading and rendering a thousand plans costs far more than
// asking for the position, and the catalogue rarely changes. Loads that
// miss together read the catalog once.
type marketCache struct {
	mu    sync.Mutex
	rev   int64
	views map[marketKey]*marketView
	fill  singleflight.Group
}

func (m *marketCache) get(rev int64, k marketKey) *marketView {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rev != rev {
		return nil
	}
	return m.views[k]
}

func (m *marketCache) put(rev int64, k marketKey, v *marketView) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.views == nil || m.rev != rev || len(m.views) > 64 {
		m.rev, m.views = rev, map[marketKey]*marketView{}
	}
	m.views[k] = v
}

// catalogueKinds are the kinds whose changes change the marketplace.
var catalogueKinds = []string{
	catalog.KindBroker, catalog.KindServiceClass, catalog.KindServicePlan,
	catalog.KindNamespacedBroker, catalog.KindNamespacedServiceClass, catalog.KindNamespacedServicePlan,
}

// noTable is the table of a page that has none.
var noTable = newDeflated(nil)

// marketplace lists the service classes and their plans, filtered by
// text, tag, broker and price: the cluster's, and the own classes of the
// session's namespaces (of every namespace, for a session of all).
func (s *Server) marketplace(c echo.Context) error {
	// The catalogue is brokers, classes and plans: instances and bindings
	// changing (which they do all the time) leave the page as it is.
	rev, err := s.store.Feed().LastOf(c.Request().Context(), catalogueKinds...)
	if err != nil {
		return err
	}
	f := marketFilter{Q: strings.TrimSpace(c.QueryParam("q")), Tag: c.QueryParam("tag"), Broker: c.QueryParam("broker"), Price: c.QueryParam("price")}
	if f.Price != "free" && f.Price != "paid" {
		f.Price = ""
	}
	sess, _ := sessionOf(c)
	k := marketKey{marketFilter: f, scope: strings.Join(sess.Namespaces, ",")}
	v := s.market.get(rev, k)
	if v == nil {
		got, err, _ := s.market.fill.Do(fmt.Sprint(rev, k), func() (any, error) {
			if v := s.market.get(rev, k); v != nil {
				return v, nil
			}
			v, err := s.marketView(c, f)
			if err != nil {
				return nil, err
			}
			s.market.put(rev, k, v)
			return v, nil
		})
		if err != nil {
			return err
		}
		v = got.(*marketView)
	}
	return s.sendMarketplace(c, v)
}

// marketView reads the catalogue the session sees and renders its table
// for a filter: the cluster's classes first, then the namespaces' own, by
// namespace.
func (s *Server) marketView(c echo.Context, f marketFilter) (*marketView, error) {
	ctx := c.Request().Context()
	// The broker filter names a cluster broker by its name, a namespace's
	// own by namespace/name (a name has no '/'): only that scope is read.
	clusterBroker, ownNS, ownBroker := f.Broker, "", ""
	if ns, name, found := strings.Cut(f.Broker, "/"); found {
		clusterBroker, ownNS, ownBroker = "", ns, name
	}
	pf := catalog.PlanFilter{}
	if sess, _ := sessionOf(c); !sess.AllNamespaces() {
		// What the session's namespaces see (plan visibility).
		pf.VisibleIn = sess.Namespaces
	}
	if f.Price != "" {
		free := f.Price == "free"
		pf.Free = &free
	}
	var classes []*catalog.ServiceClass
	var plans []*catalog.ServicePlan
	if ownBroker == "" {
		cl, err := s.store.ListClasses(ctx, catalog.ClassFilter{Broker: clusterBroker}, catalog.ListOptions{})
		if err != nil {
			return nil, err
		}
		pf.Broker = clusterBroker
		pl, err := s.store.ListPlans(ctx, pf, catalog.ListOptions{})
		if err != nil {
			return nil, err
		}
		classes, plans = cl.Items, pl.Items
	}
	if clusterBroker == "" {
		opts := scoped(c, catalog.ListOptions{Namespaced: true, Namespace: ownNS})
		cl, err := s.store.ListClasses(ctx, catalog.ClassFilter{Broker: ownBroker}, opts)
		if err != nil {
			return nil, err
		}
		pf.Broker = ownBroker
		pl, err := s.store.ListPlans(ctx, pf, opts)
		if err != nil {
			return nil, err
		}
		// Each namespace's together, in its brokers' catalogue order.
		slices.SortStableFunc(cl.Items, func(a, b *catalog.ServiceClass) int { return strings.Compare(a.Namespace, b.Namespace) })
		classes, plans = append(classes, cl.Items...), append(plans, pl.Items...)
	}
	brokers, err := s.brokers(c)
	if err != nil {
		return nil, err
	}
	v := &marketView{Filter: f, Empty: len(classes) == 0 && f.Broker == ""}
	for _, b := range brokers {
		if b.Namespace == "" {
			v.Brokers = append(v.Brokers, marketBroker{Value: b.Name, Label: b.Name})
		} else {
			v.Brokers = append(v.Brokers, marketBroker{Value: b.Namespace + "/" + b.Name, Label: b.Name + " (namespace " + b.Namespace + ")"})
		}
	}
	// A class's plans, by the class's namespace and name: one broker
	// registered in two scopes has classes of the same name in each.
	byClass := map[[2]string][]*catalog.ServicePlan{}
	for _, p := range plans {
		k := [2]string{p.Namespace, p.Spec.ClassName()}
		byClass[k] = append(byClass[k], p)
	}
	q := strings.ToLower(f.Q)
	for _, cl := range classes {
		for _, t := range cl.Spec.Tags {
			if !slices.Contains(v.Tags, t) {
				v.Tags = append(v.Tags, t)
			}
		}
		if f.Tag != "" && !slices.Contains(cl.Spec.Tags, f.Tag) {
			continue
		}
		ps := byClass[[2]string{cl.Namespace, cl.Name}]
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
		return nil, err
	}
	v.Table, v.table = tableMark, newDeflated([]byte(table))
	return v, nil
}

// sendMarketplace renders the page around the cached table and sends it;
// compressed, only the page around the table is compressed now.
func (s *Server) sendMarketplace(c echo.Context, v *marketView) error {
	d := s.data(c, "Marketplace", "marketplace", v)
	d.Status, d.Flash = http.StatusOK, takeFlash(c)
	var buf bytes.Buffer
	if err := s.pages.render(&buf, "marketplace", d); err != nil {
		return err
	}
	before, after, found := bytes.Cut(buf.Bytes(), []byte(tableMark))
	table := v.table
	if !found {
		// An empty catalogue, or nothing matches: the page has no table.
		before, after, table = buf.Bytes(), nil, noTable
	}
	h := c.Response().Header()
	h.Add(echo.HeaderVary, echo.HeaderAcceptEncoding)
	var body []byte
	if strings.Contains(c.Request().Header.Get(echo.HeaderAcceptEncoding), "gzip") {
		body = gzipPage(before, table, after)
		h.Set(echo.HeaderContentEncoding, "gzip")
	} else {
		body = make([]byte, 0, len(before)+len(table.plain)+len(after))
		body = append(append(append(body, before...), table.plain...), after...)
	}
	h.Set(echo.HeaderContentLength, strconv.Itoa(len(body)))
	return c.Blob(http.StatusOK, echo.MIMETextHTMLCharsetUTF8, body)
}

func matches(q string, fields ...string) bool {
	for _, f := range fields {
		if strings.Contains(strings.ToLower(f), q) {
			return true
		}
	}
	return false
}
