package web

import (
	"encoding/json"
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
	cur, err := s.instanceView(c, c.Param("id"), nil, nil)
	if err != nil {
		return err
	}
	if cur.Plan == nil {
		return echo.NewHTTPError(http.StatusUnprocessableEntity, "The instance's plan is gone: it cannot be updated.")
	}
	posted, _ := c.FormParams()
	errs := map[string]string{}
	problems := inputProblems(c)
	for k, v := range problems {
		errs[k] = v
	}
	var params map[string]any
	if len(errs) == 0 {
		var perrs []form.Error
		if params, perrs, err = form.Parse(cur.Plan.Spec.InstanceUpdateParameterSchema, paramsPrefix, posted); err != nil {
			return err
		}
		for _, e := range perrs {
			errs[e.Field] = e.Message
		}
	}
	var newPlan *catalog.ServicePlan
	if id := posted.Get("plan"); len(errs) == 0 && id != "" && id != cur.Plan.ID {
		if newPlan, err = s.store.GetPlanIn(ctx, cur.Plan.Namespace, id); err != nil {
			errs["plan"] = "no such plan"
		}
	}
	if len(errs) == 0 {
		// The parameters were parsed with the plan read above: the update
		// holds if the spec is still the one read (its generation), whatever
		// the engine wrote to the status meanwhile.
		_, err = s.store.UpdateInstance(ctx, cur.Instance.ID, 0, func(in *catalog.Instance) error {
			if in.Generation != cur.Instance.Generation {
				return &catalog.ConflictError{Message: fmt.Sprintf("Instance %s/%s was changed meanwhile: look at it again.", in.Namespace, in.Name), Stale: true}
			}
			in.Spec.Parameters = nil
			if len(params) > 0 {
				in.Spec.Parameters, _ = json.Marshal(params)
			}
			if newPlan != nil {
				// The plan is named the way the instance names it.
				switch {
				case in.Spec.ClusterServicePlanExternalName != "":
					in.Spec.ClusterServicePlanExternalName = newPlan.Spec.ExternalName
				case in.Spec.ClusterServicePlanExternalID != "":
					in.Spec.ClusterServicePlanExternalID = newPlan.Spec.ExternalID
				case in.Spec.ClusterServicePlanName != "":
					in.Spec.ClusterServicePlanName = newPlan.Name
				case in.Spec.ServicePlanExternalName != "":
					in.Spec.ServicePlanExternalName = newPlan.Spec.ExternalName
				case in.Spec.ServicePlanExternalID != "":
					in.Spec.ServicePlanExternalID = newPlan.Spec.ExternalID
				default:
					in.Spec.ServicePlanName = newPlan.Name
				}
			}
			return nil
		})
		v, ok := catalog.AsValidation(err)
		switch {
		case ok:
			for _, fe := range v.Errors {
				if fe.Field == "spec" || strings.HasPrefix(fe.Field, "spec.clusterServicePlan") || strings.HasPrefix(fe.Field, "spec.servicePlan") {
					fe.Field = "plan"
				}
				errs[fe.Field] = catalog.FieldMessage(fe)
			}
		case err != nil:
			return err
		default:
			return redirect(c, "/instances/"+cur.Instance.ID, "Update recorded: the engine sends it to the broker now.")
		}
	}
	v, err := s.instanceView(c, c.Param("id"), posted, errs)
	if err != nil {
		return err
	}
	blankProblems(v.Fields, problems)
	v.Other = otherErrors(errs, append(form.Names(v.Fields), "plan"))
	return s.page(c, http.StatusBadRequest, "instance", v.Instance.Name, "instances", v)
}
