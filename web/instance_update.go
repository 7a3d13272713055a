package web

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/web/form"
)

// instanceUpdate changes an instance's plan or parameters, from the form
// generated from the plan's update schema.
func (s *Server) instanceUpdate(c echo.Context) error {
	ctx := c.Request().Context()
	cur, err := s.instanceView(c, c.Param("id"))
	if err != nil {
		return err
	}
	if cur.Plan == nil {
		return echo.NewHTTPError(http.StatusUnprocessableEntity, "The instance's plan is gone: it cannot be updated.")
	}
	p := s.posted(c)
	params, err := p.Parameters(cur.Plan.Spec.InstanceUpdateParameterSchema, paramsPrefix)
	if err != nil {
		return err
	}
	var newPlan *catalog.ServicePlan
	if id := p.Value("plan"); p.OK() && id != "" && id != cur.Plan.ID {
		// A plan hidden from the instance's namespace is, to it, no plan.
		if newPlan, err = s.store.GetPlanIn(ctx, cur.Plan.Namespace, id); err != nil || !catalog.VisibleIn(&newPlan.Meta, cur.Instance.Namespace) {
			p.Add("plan", "no such plan")
		}
	}
	if p.OK() {
		// The parameters were parsed with the plan read above: the update
		// holds if the spec is still the one read (its generation), whatever
		// the engine wrote to the status meanwhile.
		_, err = s.store.UpdateInstance(ctx, cur.Instance.ID, 0, func(in *catalog.Instance) error {
			if in.Generation != cur.Instance.Generation {
				return &catalog.ConflictError{Message: fmt.Sprintf("Instance %s/%s was changed meanwhile: look at it again.", in.Namespace, in.Name), Stale: true}
			}
			in.Spec.Parameters = params
			if newPlan != nil {
				setPlan(&in.Spec, newPlan)
			}
			return nil
		})
		if !p.Absorb(err, updateField) {
			if err != nil {
				return err
			}
			return redirect(c, "/instances/"+cur.Instance.ID, "Update recorded: the engine sends it to the broker now.")
		}
	}
	v := cur
	if v.Fields, err = p.Fields(v.Plan.Spec.InstanceUpdateParameterSchema, paramsPrefix); err != nil {
		return err
	}
	v.Errors, v.Other = p.Problems, p.Other(append(form.Names(v.Fields), "plan")...)
	return s.page(c, http.StatusBadRequest, "instance", v.Instance.Name, "instances", v)
}

// setPlan names plan in spec the way spec names its plan.
func setPlan(spec *catalog.InstanceSpec, plan *catalog.ServicePlan) {
	switch {
	case spec.ClusterServicePlanExternalName != "":
		spec.ClusterServicePlanExternalName = plan.Spec.ExternalName
	case spec.ClusterServicePlanExternalID != "":
		spec.ClusterServicePlanExternalID = plan.Spec.ExternalID
	case spec.ClusterServicePlanName != "":
		spec.ClusterServicePlanName = plan.Name
	case spec.ServicePlanExternalName != "":
		spec.ServicePlanExternalName = plan.Spec.ExternalName
	case spec.ServicePlanExternalID != "":
		spec.ServicePlanExternalID = plan.Spec.ExternalID
	default:
		spec.ServicePlanName = plan.Name
	}
}

// updateField maps a field of the catalog's errors to the update form's
// input: whatever names the plan is the plan's choice.
func updateField(f string) string {
	if f == "spec" || strings.HasPrefix(f, "spec.clusterServicePlan") || strings.HasPrefix(f, "spec.servicePlan") {
		return "plan"
	}
	return f
}
