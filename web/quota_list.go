package web

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
)

// quotaListView is the quotas page: every quota, and the form to set one.
type quotaListView struct {
	Quotas []quotaLine
	Form   quotaForm
}

// quotaLine is one quota as the page's table shows it.
type quotaLine struct {
	Namespace, Instances, Bindings, Paid, Plans string
	// Edit is the namespace the form takes to change it ("" for the
	// default quota).
	Edit string
}

// clusterAdmin refuses a session limited to namespaces: quotas are set by
// admins for all namespaces, as in the REST API.
func clusterAdmin(c echo.Context) error {
	if sess, _ := sessionOf(c); !sess.AllNamespaces() {
		return echo.NewHTTPError(http.StatusForbidden, "Quotas are set by admins for all namespaces; your token is limited to namespaces.")
	}
	return nil
}

// quotaList shows the quotas and the form to set one; ?namespace= fills
// the form with that namespace's quota (?default=true: the default's).
func (s *Server) quotaList(c echo.Context) error {
	if err := clusterAdmin(c); err != nil {
		return err
	}
	f := quotaForm{PaidPlans: true}
	if v := c.QueryParam("default"); v != "" && v != "true" && v != "false" {
		return echo.NewHTTPError(http.StatusBadRequest, "The query parameter default must be true or false.")
	}
	if ns, def := c.QueryParam("namespace"), c.QueryParam("default") == "true"; ns != "" || def {
		if err := checkNamespace(ns); err != nil {
			return err
		}
		q, err := s.store.GetQuota(c.Request().Context(), ns)
		if err != nil {
			return err
		}
		f = formOf(q)
	}
	return s.renderQuotas(c, http.StatusOK, f)
}

// renderQuotas renders the quotas page with the form f.
func (s *Server) renderQuotas(c echo.Context, status int, f quotaForm) error {
	qs, err := s.store.ListQuotas(c.Request().Context())
	if err != nil {
		return err
	}
	v := quotaListView{Form: f}
	for _, q := range qs {
		f := formOf(q)
		l := quotaLine{Namespace: q.Namespace, Instances: or(f.Instances, "none"), Bindings: or(f.Bindings, "none"),
			Paid: "allowed", Plans: or(strings.ReplaceAll(strings.TrimSpace(f.Plans), "\n", ", "), "-"), Edit: q.Namespace}
		if !q.PaidPlans {
			l.Paid = "not allowed"
		}
		if q.Namespace == "" {
			l.Namespace = "default (namespaces without their own)"
		}
		v.Quotas = append(v.Quotas, l)
	}
	return s.page(c, status, "quotas", "Quotas", "quotas", v)
}

// formOf is the form that sets q again.
func formOf(q *catalog.Quota) quotaForm {
	f := quotaForm{Namespace: q.Namespace, Default: q.Namespace == "", PaidPlans: q.PaidPlans}
	if q.Instances != nil {
		f.Instances = strconv.Itoa(*q.Instances)
	}
	if q.Bindings != nil {
		f.Bindings = strconv.Itoa(*q.Bindings)
	}
	for _, p := range q.Plans {
		f.Plans += p.Class + "/" + p.Plan + "=" + strconv.Itoa(p.Instances) + "\n"
	}
	return f
}

func or(s, none string) string {
	if s == "" {
		return none
	}
	return s
}
