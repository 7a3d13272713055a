package web

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
)

// marketPageSize is how many services a marketplace page shows: a
// catalogue of any size costs one page to read and to send.
const marketPageSize = 100

// maxMarketPage is the last page number the marketplace takes.
const maxMarketPage = 1_000_000

type marketFilter struct {
	Q, Tag, Broker, Price string
	// Page counts from 1.
	Page int
}

// query is the filter's query string, at page (none: the first).
func (f marketFilter) query(page int) string {
	v := make([]string, 0, 5)
	for _, kv := range [][2]string{{"q", f.Q}, {"tag", f.Tag}, {"broker", f.Broker}, {"price", f.Price}} {
		if kv[1] != "" {
			v = append(v, kv[0]+"="+urlQueryEscape(kv[1]))
		}
	}
	if page > 1 {
		v = append(v, "page="+strconv.Itoa(page))
	}
	if len(v) == 0 {
		return "/"
	}
	return "/?" + strings.Join(v, "&")
}

// marketCard is a service as the marketplace shows it.
type marketCard struct {
	Class *catalog.ServiceClass
	Meta  catalog.ServiceMetadata
	// Name is the broker's display name for the service, or its name.
	Name             string
	Plans, FreePlans int
	Href, Icon       string
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
	// MoreBrokers says the session sees more brokers than Brokers: the
	// filter then takes any broker's name typed in, suggesting those.
	MoreBrokers bool
	Cards       []marketCard
	// Total services match the filter; the page shows From to To.
	Total, From, To int
	Prev, Next      string
	// Empty says the catalogue has nothing at all (no broker offers
	// anything), rather than nothing that matches.
	Empty bool
	// Grid is the rendered grid of cards, the same for every role; in the
	// page it is gridMark until the page is sent.
	Grid template.HTML
	// grid is Grid compressed once, for every page that shows it.
	grid *deflated
}

// gridMark stands for the grid while the rest of the page is rendered: a
// NUL is in no rendered page otherwise (no stored text has one, and
// html/template replaces the character).
const gridMark = "\x00market-grid\x00"

// noGrid is the grid of a page that has none.
var noGrid = newDeflated(nil)

// marketplace shows the services offered as cards, a page at a time,
// filtered by text, tag, broker and price: the cluster's, and the own
// services of the session's namespaces (of every namespace, for a session
// of all). Views are cached by the catalogue's revision (marketCache).
func (s *Server) marketplace(c echo.Context) error {
	// The catalogue is brokers, classes and plans: instances and bindings
	// changing (which they do all the time) leave the page as it is.
	rev, err := s.store.Feed().LastOf(c.Request().Context(), catalogueKinds...)
	if err != nil {
		return err
	}
	f := marketFilter{Q: strings.TrimSpace(c.QueryParam("q")), Tag: c.QueryParam("tag"), Broker: c.QueryParam("broker"), Price: c.QueryParam("price"), Page: 1}
	// The filter's own choices and the pages' links: anything else used
	// to be read as no filter, or the first page, without a word.
	if f.Price != "" && f.Price != "free" && f.Price != "paid" {
		return echo.NewHTTPError(http.StatusBadRequest, "The query parameter price must be free or paid (or empty, for both).")
	}
	if v := c.QueryParam("page"); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 || p > maxMarketPage {
			return echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf("The query parameter page must be a whole number from 1 to %d.", maxMarketPage))
		}
		f.Page = p
	}
	// The view is built for every request that misses with this one, and
	// may outlive it: it takes nothing from this request but the session's
	// namespaces (and is kept by them).
	sess, _ := sessionOf(c)
	v, err := s.market.view(c.Request().Context(), rev, marketKey{marketFilter: f, scope: strings.Join(sess.Namespaces, ",")}, func(ctx context.Context) (*marketView, error) {
		return s.marketView(ctx, sess.Namespaces, f)
	})
	if err != nil {
		return err
	}
	return s.sendMarketplace(c, v)
}

// marketView reads a page of the catalogue that a session of namespaces
// (none: all) sees, and renders its grid.
func (s *Server) marketView(ctx context.Context, namespaces []string, f marketFilter) (*marketView, error) {
	of := catalog.OfferingFilter{Query: f.Q, Tag: f.Tag, Broker: f.Broker, Namespaces: namespaces}
	if f.Price != "" {
		free := f.Price == "free"
		of.Free = &free
	}
	offerings, total, err := s.store.Offerings(ctx, of, (f.Page-1)*marketPageSize, marketPageSize)
	if err != nil {
		return nil, err
	}
	v := &marketView{Filter: f, Total: total, Empty: total == 0 && f == marketFilter{Page: 1}}
	if v.Tags, err = s.store.OfferedTags(ctx, namespaces, 200); err != nil {
		return nil, err
	}
	if v.Brokers, v.MoreBrokers, err = s.brokerChoices(ctx, namespaces); err != nil {
		return nil, err
	}
	for _, o := range offerings {
		v.Cards = append(v.Cards, newMarketCard(o))
	}
	if len(v.Cards) > 0 {
		v.From = (f.Page-1)*marketPageSize + 1
		v.To = v.From + len(v.Cards) - 1
	}
	if f.Page > 1 {
		v.Prev = f.query(f.Page - 1)
	}
	if v.To < total {
		v.Next = f.query(f.Page + 1)
	}
	// The grid is the same for every session (it shows no role's
	// actions), so it is rendered without one.
	var grid bytes.Buffer
	if err := s.pages["marketplace"].ExecuteTemplate(&grid, "market-grid", pageData{Data: v}); err != nil {
		return nil, err
	}
	v.Grid, v.grid = gridMark, newDeflated(grid.Bytes())
	return v, nil
}

func newMarketCard(o catalog.Offering) marketCard {
	meta := o.Class.Spec.Metadata()
	card := marketCard{Class: o.Class, Meta: meta, Name: displayName(meta.DisplayName, o.Class.Spec.ExternalName),
		Plans: o.Plans, FreePlans: o.FreePlans, Href: "/services/" + o.Class.ID + scopedQuery(o.Class.Namespace)}
	card.Icon = "/services/" + o.Class.ID + "/icon" + scopedQuery(o.Class.Namespace)
	return card
}

// displayName is a broker's display name for a thing, unless it is empty
// or of nothing but spaces, then its name.
func displayName(display, name string) string {
	if strings.TrimSpace(display) == "" {
		return name
	}
	return display
}

// marketBrokerChoices is how many brokers the broker filter offers: a
// page of services reads no more brokers than that, however many are
// registered.
const marketBrokerChoices = 100

// brokerChoices are the broker filter's choices, the first
// marketBrokerChoices of the brokers a session of namespaces (none: all)
// sees (the cluster's first, by name), and whether it sees more.
func (s *Server) brokerChoices(ctx context.Context, namespaces []string) ([]marketBroker, bool, error) {
	l, err := s.store.ListBrokersWithNamespaced(ctx, catalog.ListOptions{Namespaces: namespaces, Limit: marketBrokerChoices})
	if err != nil {
		return nil, false, err
	}
	out := make([]marketBroker, 0, len(l.Items))
	for _, b := range l.Items {
		if b.Namespace == "" {
			out = append(out, marketBroker{Value: b.Name, Label: b.Name})
		} else {
			out = append(out, marketBroker{Value: b.Namespace + "/" + b.Name, Label: b.Name + " (namespace " + b.Namespace + ")"})
		}
	}
	return out, l.Continue != "", nil
}

// sendMarketplace renders the page around the cached grid and sends it;
// compressed, only the page around the grid is compressed now.
func (s *Server) sendMarketplace(c echo.Context, v *marketView) error {
	d := s.data(c, "Marketplace", "marketplace", v)
	d.Status, d.Flash = http.StatusOK, takeFlash(c)
	var buf bytes.Buffer
	if err := s.pages.render(&buf, "marketplace", d); err != nil {
		return err
	}
	before, after, found := bytes.Cut(buf.Bytes(), []byte(gridMark))
	grid := v.grid
	if !found {
		// An empty catalogue, or nothing matches: the page has no grid.
		before, after, grid = buf.Bytes(), nil, noGrid
	}
	h := c.Response().Header()
	h.Add(echo.HeaderVary, echo.HeaderAcceptEncoding)
	var body []byte
	if strings.Contains(c.Request().Header.Get(echo.HeaderAcceptEncoding), "gzip") {
		body = gzipPage(before, grid, after)
		h.Set(echo.HeaderContentEncoding, "gzip")
	} else {
		body = make([]byte, 0, len(before)+len(grid.plain)+len(after))
		body = append(append(append(body, before...), grid.plain...), after...)
	}
	h.Set(echo.HeaderContentLength, strconv.Itoa(len(body)))
	return c.Blob(http.StatusOK, echo.MIMETextHTMLCharsetUTF8, body)
}

// marketKey is what a marketplace view depends on: the filter and page,
// and the namespaces whose own services it shows (those of the session;
// "" for a session of all namespaces).
type marketKey struct {
	marketFilter
	scope string
}
