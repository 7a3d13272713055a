package web

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
)

// servicePlanLimit is how many plans the service page compares; a broker
// may offer thousands.
const servicePlanLimit = 200

type serviceView struct {
	Class *catalog.ServiceClass
	Meta  catalog.ServiceMetadata
	Name  string
	Icon  string
	Plans []planRow
	// More says the service has more plans than the page compares.
	More bool
}

// planRow is a plan as the comparison shows it.
type planRow struct {
	Plan     *catalog.ServicePlan
	Meta     catalog.PlanMetadata
	Name     string
	Price    string
	Bindable bool
}

// serviceShow shows a service: what its broker says of it (display name,
// provider, long description, documentation and support links, icon)
// and its plans compared side by side. One of the cluster's, or of a
// namespace's own broker with ?namespace=.
func (s *Server) serviceShow(c echo.Context) error {
	class, err := s.serviceClass(c)
	if err != nil {
		return err
	}
	ns := class.Namespace
	pf := catalog.PlanFilter{Class: class.Name}
	if sess, _ := sessionOf(c); !sess.AllNamespaces() && ns == "" {
		// What the session's namespaces see (plan visibility).
		pf.VisibleIn = sess.Namespaces
	}
	plans, err := s.store.ListPlans(c.Request().Context(), pf,
		catalog.ListOptions{Namespaced: ns != "", Namespace: ns, Limit: servicePlanLimit})
	if err != nil {
		return err
	}
	meta := class.Spec.Metadata()
	v := serviceView{Class: class, Meta: meta, Name: displayName(meta.DisplayName, class.Spec.ExternalName),
		Icon: "/services/" + class.ID + "/icon" + scopedQuery(ns), More: plans.Continue != ""}
	for _, p := range plans.Items {
		v.Plans = append(v.Plans, newPlanRow(class, p))
	}
	return s.page(c, http.StatusOK, "service", v.Name, "marketplace", v)
}

// serviceClass reads the class the address names: its id in the path,
// its namespace in ?namespace= (none for the cluster's).
func (s *Server) serviceClass(c echo.Context) (*catalog.ServiceClass, error) {
	ns, err := catalogNamespace(c)
	if err != nil {
		return nil, err
	}
	return lookupScoped(c, ns, c.Param("id"), s.store.GetClassIn)
}

func newPlanRow(class *catalog.ServiceClass, p *catalog.ServicePlan) planRow {
	meta := p.Spec.Metadata()
	bindable := class.Spec.Bindable
	if p.Spec.Bindable != nil {
		bindable = *p.Spec.Bindable
	}
	return planRow{Plan: p, Meta: meta, Name: displayName(meta.DisplayName, p.Spec.ExternalName), Price: priceOf(p.Spec.Free, meta.Costs), Bindable: bindable}
}

// priceOf says what a plan costs: "Free", or its costs as the broker
// gives them ("$10.00 a month"), or "Paid" when it gives none.
func priceOf(free bool, costs []catalog.PlanCost) string {
	if free {
		return "Free"
	}
	var parts []string
	for _, c := range costs {
		currencies := make([]string, 0, len(c.Amount))
		for cur := range c.Amount {
			currencies = append(currencies, cur)
		}
		slices.Sort(currencies)
		for _, cur := range currencies {
			parts = append(parts, money(cur, c.Amount[cur])+unitOf(c.Unit))
		}
	}
	if len(parts) == 0 {
		return "Paid"
	}
	return strings.Join(parts, ", ")
}

func money(currency string, amount float64) string {
	switch strings.ToLower(currency) {
	case "usd":
		return fmt.Sprintf("$%.2f", amount)
	case "eur":
		return fmt.Sprintf("€%.2f", amount)
	case "gbp":
		return fmt.Sprintf("£%.2f", amount)
	}
	return fmt.Sprintf("%.2f %s", amount, strings.ToUpper(currency))
}

// unitOf words a cost's unit: the usual ones as English, any other as
// the broker wrote it.
func unitOf(unit string) string {
	switch strings.ToUpper(strings.TrimSpace(unit)) {
	case "":
		return ""
	case "MONTHLY":
		return " a month"
	case "HOURLY":
		return " an hour"
	case "DAILY":
		return " a day"
	case "YEARLY", "ANNUALLY":
		return " a year"
	case "WEEKLY":
		return " a week"
	}
	return " " + strings.ToLower(unit)
}
