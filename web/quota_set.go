package web

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
)

// quotaForm is the form that sets a quota, parsed once, with its
// problems by field.
type quotaForm struct {
	Namespace string
	// Default: the form sets the default quota.
	Default             bool
	Instances, Bindings string
	PaidPlans           bool
	// Plans are plan limits, one CLASS/PLAN=N a line.
	Plans  string
	Errors map[string]string
	Other  []string
}

// parseQuotaForm reads the posted form into f and the quota it sets,
// every problem by its field.
func parseQuotaForm(c echo.Context) (quotaForm, *catalog.Quota) {
	f := quotaForm{Namespace: strings.TrimSpace(c.FormValue("namespace")), Default: c.FormValue("default") == "true",
		Instances: strings.TrimSpace(c.FormValue("instances")), Bindings: strings.TrimSpace(c.FormValue("bindings")),
		PaidPlans: c.FormValue("paid") == "true", Plans: c.FormValue("plans"), Errors: map[string]string{}}
	for k, p := range inputProblems(c) {
		f.Errors[k] = p
	}
	// A radio's and a checkbox's values are the form's own: another one
	// was read as false (a quota refusing paid plans) without a word.
	if v := c.FormValue("default"); v != "" && v != "true" && v != "false" && f.Errors["default"] == "" {
		f.Errors["default"] = "must be true or false"
	}
	if v := c.FormValue("paid"); v != "" && v != "true" && f.Errors["paid"] == "" {
		f.Errors["paid"] = "must be true, or not posted"
	}
	q := &catalog.Quota{Namespace: f.Namespace, PaidPlans: f.PaidPlans}
	if f.Default {
		q.Namespace = ""
	} else if f.Namespace == "" && f.Errors["namespace"] == "" {
		f.Errors["namespace"] = "required: a namespace, or choose the default quota"
	}
	for _, l := range []struct {
		name, text string
		to         **int
	}{{"instances", f.Instances, &q.Instances}, {"bindings", f.Bindings, &q.Bindings}} {
		if l.text == "" || f.Errors[l.name] != "" {
			continue
		}
		n, err := strconv.Atoi(l.text)
		if err != nil || n < 0 {
			f.Errors[l.name] = "a count of at least 0, or empty for no limit"
			continue
		}
		*l.to = &n
	}
	for i, line := range strings.Split(f.Plans, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || f.Errors["plans"] != "" {
			continue
		}
		name, count, ok := strings.Cut(line, "=")
		class, plan, ok2 := strings.Cut(strings.TrimSpace(name), "/")
		n, err := strconv.Atoi(strings.TrimSpace(count))
		if !ok || !ok2 || err != nil || n < 0 {
			f.Errors["plans"] = fmt.Sprintf("line %d: write CLASS/PLAN=N, the external names of a cluster class and plan", i+1)
			continue
		}
		q.Plans = append(q.Plans, catalog.PlanQuota{Class: strings.TrimSpace(class), Plan: strings.TrimSpace(plan), Instances: n})
	}
	return f, q
}

// quotaSet stores the quota the form describes; the catalog's problems
// show next to their fields.
func (s *Server) quotaSet(c echo.Context) error {
	if err := clusterAdmin(c); err != nil {
		return err
	}
	f, q := parseQuotaForm(c)
	if len(f.Errors) == 0 {
		_, err := s.store.SetQuota(c.Request().Context(), q)
		v, ok := catalog.AsValidation(err)
		if !ok {
			if err != nil {
				return err
			}
			return redirect(c, "/quotas", "The quota of "+quotaName(q.Namespace)+" is set.")
		}
		for _, fe := range v.Errors {
			field := fe.Field
			if strings.HasPrefix(field, "plans") {
				field = "plans"
			}
			f.Errors[field] = catalog.FieldMessage(fe)
		}
	}
	f.Other = otherErrors(f.Errors, []string{"namespace", "instances", "bindings", "plans"})
	for k := range inputProblems(c) {
		// Text that cannot be stored is not shown back.
		switch k {
		case "namespace":
			f.Namespace = ""
		case "plans":
			f.Plans = ""
		}
	}
	return s.renderQuotas(c, http.StatusBadRequest, f)
}

// quotaDelete removes a namespace's quota (the default one then holds
// for it), or the default quota.
func (s *Server) quotaDelete(c echo.Context) error {
	if err := clusterAdmin(c); err != nil {
		return err
	}
	ns := c.FormValue("namespace")
	if err := checkNamespace(ns); err != nil {
		return err
	}
	if err := s.store.DeleteQuota(c.Request().Context(), ns); err != nil {
		return err
	}
	return redirect(c, "/quotas", "The quota of "+quotaName(ns)+" is removed.")
}

// quotaName names a quota in words.
func quotaName(ns string) string {
	if ns == "" {
		return "namespaces without their own (the default)"
	}
	return "namespace " + ns
}

// otherErrors are the messages of errs whose field the form does not
// show, in field order.
func otherErrors(errs map[string]string, shown []string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(errs)) {
		if !slices.Contains(shown, k) {
			out = append(out, k+": "+errs[k])
		}
	}
	return out
}
