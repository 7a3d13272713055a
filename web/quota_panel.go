package web

import (
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
)

// quotaPanel is what limits one namespace and how much of it is used, as
// the instances page shows it.
type quotaPanel struct {
	Namespace string
	Rows      []quotaRow
}

// quotaRow is one limit: Full when nothing more fits.
type quotaRow struct {
	What, Used, Limit, SetBy string
	Full                     bool
}

// panelNamespace is the namespace whose quota the instances page shows:
// the one it lists, or the session's only one; "" for none.
func panelNamespace(c echo.Context, listed string) string {
	if listed != "" {
		return listed
	}
	if sess, ok := sessionOf(c); ok && len(sess.Namespaces) == 1 {
		return sess.Namespaces[0]
	}
	return ""
}

// quotaPanelOf reads namespace ns's quota panel.
func (s *Server) quotaPanelOf(c echo.Context, ns string) (*quotaPanel, error) {
	st, err := s.store.QuotaStatus(c.Request().Context(), ns)
	if err != nil {
		return nil, err
	}
	p := &quotaPanel{Namespace: ns}
	count := func(what string, u catalog.Usage) quotaRow {
		r := quotaRow{What: what, Used: strconv.FormatInt(u.Used, 10), Limit: "none", SetBy: setBy(u.Source, ns)}
		if u.Limit != nil {
			r.Limit, r.Full = strconv.FormatInt(*u.Limit, 10), u.Used >= *u.Limit
		}
		return r
	}
	p.Rows = append(p.Rows, count("Instances", st.Instances), count("Bindings", st.Bindings), count("Brokers", st.Brokers))
	paid := quotaRow{What: "Paid plans", Used: "-", Limit: "allowed", SetBy: "-"}
	if q := st.Quota; q != nil {
		paid.SetBy = setBy(map[bool]string{true: catalog.SourceDefault, false: catalog.SourceNamespace}[q.Namespace == ""], ns)
		if !q.PaidPlans {
			paid.Limit = "not allowed"
		}
	}
	p.Rows = append(p.Rows, paid)
	for _, pl := range st.Plans {
		n := int64(pl.Instances)
		r := count("Instances of "+pl.Class+" / "+pl.Plan, catalog.Usage{Used: pl.Used, Limit: &n})
		r.SetBy = paid.SetBy
		p.Rows = append(p.Rows, r)
	}
	return p, nil
}

// setBy says who set a limit, in words.
func setBy(source, ns string) string {
	switch {
	case source == "":
		return "-"
	case source == catalog.SourceNamespace:
		return "quota of " + ns
	case source == catalog.SourceDefault:
		return "default quota"
	case strings.HasPrefix(source, catalog.SourceResourceQuota):
		return "ResourceQuota " + strings.TrimPrefix(source, catalog.SourceResourceQuota)
	case source == catalog.SourceServer:
		return "--" + catalog.MaxBrokersFlag
	}
	return source
}
