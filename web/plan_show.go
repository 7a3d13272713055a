package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/web/form"
)

type schemaView struct {
	Title  string
	Fields []form.Field
}

type planView struct {
	Plan  *catalog.ServicePlan
	Class *catalog.ServiceClass
	// ServiceName is the class's display name; Row the plan's, price and
	// bindability as the service page compares them.
	ServiceName string
	Row         planRow
	Schemas     []schemaView
}

// planShow shows a plan and the parameters each of its schemas takes: one
// of the cluster's, or of a namespace's own broker with ?namespace=.
func (s *Server) planShow(c echo.Context) error {
	ns, err := catalogNamespace(c)
	if err != nil {
		return err
	}
	plan, class, err := s.planAndClass(c, c.Param("id"), ns)
	if err != nil {
		return err
	}
	v := planView{Plan: plan, Class: class, ServiceName: displayName(class.Spec.Metadata().DisplayName, class.Spec.ExternalName),
		Row: newPlanRow(class, plan)}
	for _, sc := range []struct {
		title string
		raw   []byte
	}{
		{"Parameters to create an instance", plan.Spec.InstanceCreateParameterSchema},
		{"Parameters to update an instance", plan.Spec.InstanceUpdateParameterSchema},
		{"Parameters to create a binding", plan.Spec.ServiceBindingCreateParameterSchema},
	} {
		if len(sc.raw) == 0 {
			continue
		}
		fields, err := form.Fields(sc.raw, "", nil, nil)
		if err != nil {
			return err
		}
		v.Schemas = append(v.Schemas, schemaView{Title: sc.title, Fields: fields})
	}
	return s.page(c, http.StatusOK, "plan", v.ServiceName+" / "+v.Row.Name, "marketplace", v)
}
