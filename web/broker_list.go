package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
)

// brokerForm is the registration form, with what was typed (never the
// password or token) and the errors by field.
type brokerForm struct {
	Name, Namespace, URL, Username, Auth string
	// Namespaces, for a session limited to them, are the namespaces it may
	// register a broker in, offered as a list (the cluster is not one).
	Namespaces []string
	Errors     map[string]string
	Other      []string
}

type brokerListView struct {
	// Brokers are a page of the cluster's, then those of the session's
	// namespaces by namespace and name.
	Brokers []*catalog.Broker
	Pager   pager
	Form    brokerForm
}

func (s *Server) brokerList(c echo.Context) error {
	return s.renderBrokers(c, http.StatusOK, brokerForm{Auth: "basic"})
}

func (s *Server) renderBrokers(c echo.Context, status int, f brokerForm) error {
	v, err := s.brokerPage(c)
	if err != nil {
		return err
	}
	if sess, _ := sessionOf(c); !sess.AllNamespaces() {
		f.Namespaces = sess.Namespaces
		if f.Namespace == "" {
			f.Namespace = sess.Namespaces[0]
		}
	}
	v.Form = f
	return s.page(c, status, "brokers", "Brokers", "brokers", v)
}

// brokerPage reads the page of brokers the request asks for (?limit=,
// ?continue=), as the other lists do, among those the session sees: the
// cluster's, and the own brokers of its namespaces (of every namespace,
// for a session of all). A registry of thousands of brokers is read a
// page at a time. The cluster brokers' counts of plans are of those the
// session's namespaces see (catalog.PlansVisibleIn).
func (s *Server) brokerPage(c echo.Context) (brokerListView, error) {
	q, err := readPage(c)
	if err != nil {
		return brokerListView{}, err
	}
	ctx := c.Request().Context()
	sess, _ := sessionOf(c)
	l, err := s.store.ListBrokersWithNamespaced(ctx, catalog.ListOptions{Namespaces: sess.Namespaces, Limit: q.Limit, Continue: q.Continue})
	if err != nil {
		return brokerListView{}, err
	}
	if !sess.AllNamespaces() {
		if err := s.store.CountPlansVisibleIn(ctx, sess.Namespaces, l.Items...); err != nil {
			return brokerListView{}, err
		}
	}
	return brokerListView{Brokers: l.Items, Pager: newPager(c, q, "/brokers", "/live/brokers", l.Continue)}, nil
}

// brokerRows renders the brokers table's rows alone, for live updates of
// the page the stream's address asks for.
func (s *Server) brokerRows(c echo.Context) (string, error) {
	v, err := s.brokerPage(c)
	if err != nil {
		return "", err
	}
	return s.renderString(c, "brokers", "broker-rows", v)
}
