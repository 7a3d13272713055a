package restapi

import (
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
)

// defaultQuotaPath is the namespace parameter that names the default
// quota: no namespace can be called so (a namespace is a DNS label).
const defaultQuotaPath = "_default"

// quotaNamespace is the namespace the path's quota is for: "" for the
// default quota.
func quotaNamespace(c echo.Context) string {
	if ns := c.Param("namespace"); ns != defaultQuotaPath {
		return ns
	}
	return ""
}

// quotaRequest is the body of PUT /quotas/{namespace}.
type quotaRequest struct {
	Instances *int                `json:"instances"`
	Bindings  *int                `json:"bindings"`
	PaidPlans *bool               `json:"paidPlans"`
	Plans     []catalog.PlanQuota `json:"plans"`
}

func (s *Server) listQuotas(c echo.Context) error {
	qs, err := s.store.ListQuotas(ctx(c))
	if err != nil {
		return err
	}
	if qs == nil {
		qs = []*catalog.Quota{}
	}
	return c.JSON(http.StatusOK, map[string]any{"items": qs})
}

func (s *Server) getQuota(c echo.Context) error {
	q, err := s.store.GetQuota(ctx(c), quotaNamespace(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, q)
}

// setQuota replaces a namespace's quota (or the default): what the body
// leaves out is not limited, and paid plans are allowed unless paidPlans
// is false.
func (s *Server) setQuota(c echo.Context) error {
	var req quotaRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	q := &catalog.Quota{Namespace: quotaNamespace(c), Instances: req.Instances, Bindings: req.Bindings,
		PaidPlans: req.PaidPlans == nil || *req.PaidPlans, Plans: req.Plans}
	q, err := s.store.SetQuota(ctx(c), q)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, q)
}

func (s *Server) deleteQuota(c echo.Context) error {
	if err := s.store.DeleteQuota(ctx(c), quotaNamespace(c)); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// quotaUsage is what limits a namespace and how much of it is used: for
// the namespace's tokens, and for tokens for all namespaces.
func (s *Server) quotaUsage(c echo.Context) error {
	ns := c.Param("namespace")
	if ns == defaultQuotaPath {
		return apiError(http.StatusBadRequest, "invalid", "namespace: the default quota has no usage of its own; ask for a namespace's")
	}
	if err := allowNamespace(c, ns); err != nil {
		return err
	}
	st, err := s.store.QuotaStatus(ctx(c), ns)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

// planVisibility is the body of GET and PUT /serviceplans/{id}/visibility.
type planVisibility struct {
	// Restricted says whether the plan is visible to Namespaces only (or
	// to every namespace).
	Restricted bool     `json:"restricted"`
	Namespaces []string `json:"namespaces"`
}

func visibilityOf(p *catalog.ServicePlan) planVisibility {
	ns, restricted := catalog.VisibleNamespaces(&p.Meta)
	if ns == nil {
		ns = []string{}
	}
	return planVisibility{Restricted: restricted, Namespaces: ns}
}

func (s *Server) getPlanVisibility(c echo.Context) error {
	p, err := s.store.GetPlan(ctx(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, visibilityOf(p))
}

// setPlanVisibility makes a cluster plan visible to the namespaces of the
// body only (none, with an empty list).
func (s *Server) setPlanVisibility(c echo.Context) error {
	var req struct {
		Namespaces []string `json:"namespaces"`
	}
	if err := decode(c, &req); err != nil {
		return err
	}
	if req.Namespaces == nil {
		req.Namespaces = []string{}
	}
	p, err := s.store.SetPlanVisibility(ctx(c), c.Param("id"), req.Namespaces)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, visibilityOf(p))
}

// deletePlanVisibility makes a cluster plan visible to every namespace.
func (s *Server) deletePlanVisibility(c echo.Context) error {
	p, err := s.store.SetPlanVisibility(ctx(c), c.Param("id"), nil)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, visibilityOf(p))
}

// visibleIn is the namespaces whose view of the cluster's plans a list
// takes: ?visibleIn= (one of the token's namespaces), else, for a token
// limited to namespaces, its namespaces; nil (every plan) for a token for
// all namespaces that names none.
func visibleIn(c echo.Context) ([]string, error) {
	if ns := c.QueryParam("visibleIn"); ns != "" {
		if err := allowNamespace(c, ns); err != nil {
			return nil, err
		}
		return []string{ns}, nil
	}
	if t := tokenOf(c); t != nil && !t.AllNamespaces() {
		return t.Namespaces, nil
	}
	return nil, nil
}

// narrowVisibility leaves, in a cluster plan's visibility annotation
// (catalog.VisibleInAnnotation) as a token limited to namespaces reads
// it, only the token's own namespaces: which other namespaces may use the
// plan is not the token's to know, as its visibility is not (GET
// /serviceplans/{id}/visibility is refused to it).
func narrowVisibility(c echo.Context, m *catalog.Meta) {
	t := tokenOf(c)
	if t == nil || t.AllNamespaces() || m.Namespace != "" {
		return
	}
	m.Annotations, _ = catalog.NarrowedVisibility(m.Annotations, func(ns string) bool { return slices.Contains(t.Namespaces, ns) })
}

// hiddenFrom tells whether a cluster plan is hidden from every namespace
// of the request's token: to it, the plan does not exist.
func hiddenFrom(c echo.Context, p *catalog.ServicePlan) bool {
	t := tokenOf(c)
	if t == nil || t.AllNamespaces() {
		return false
	}
	for _, ns := range t.Namespaces {
		if catalog.VisibleIn(&p.Meta, ns) {
			return false
		}
	}
	return true
}
