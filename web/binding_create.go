package web

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/web/form"
)

// bindingCreate binds an instance: a binding named in the form, in the
// instance's namespace.
func (s *Server) bindingCreate(c echo.Context) error {
	ctx := c.Request().Context()
	in, err := s.store.GetInstance(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	b := &catalog.Binding{}
	b.Name, b.Namespace = strings.TrimSpace(c.FormValue("name")), in.Namespace
	b.Spec.InstanceRef = catalog.ObjectRef{Name: in.Name}
	posted, err := c.FormParams()
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "the form could not be read")
	}
	errs := map[string]string{}
	var schema json.RawMessage
	if in.Spec.ClusterServicePlanRef != nil {
		if plan, err := s.store.GetPlan(ctx, in.Spec.ClusterServicePlanRef.Name); err == nil {
			schema = plan.Spec.ServiceBindingCreateParameterSchema
		}
	}
	params, perrs, err := form.Parse(schema, bindPrefix, posted)
	if err != nil {
		return err
	}
	for _, e := range perrs {
		errs[e.Field] = e.Message
	}
	var created *catalog.Binding
	if len(errs) == 0 {
		if len(params) > 0 {
			b.Spec.Parameters, _ = json.Marshal(params)
		}
		created, err = s.store.CreateBinding(ctx, b)
		if v, ok := catalog.AsValidation(err); ok {
			for _, fe := range v.Errors {
				errs[strings.Replace(fe.Field, paramsPrefix, bindPrefix, 1)] = catalog.FieldMessage(fe)
			}
		}
	}
	if len(errs) > 0 {
		view, verr := s.instanceView(c, in.ID, nil, nil)
		if verr != nil {
			return verr
		}
		view.BindingName = b.Name
		view.BindingError = errs["name"]
		delete(errs, "name")
		if view.BindFields, err = form.Fields(schema, bindPrefix, bindValues(posted), errs); err != nil {
			return err
		}
		if other := otherErrors(errs, flatNames(view.BindFields)); len(other) > 0 {
			view.BindingError = strings.TrimPrefix(view.BindingError+"; "+strings.Join(other, "; "), "; ")
		}
		return s.page(c, http.StatusBadRequest, "instance", in.Name, "instances", view)
	}
	if err != nil {
		return err
	}
	return redirect(c, "/bindings/"+created.ID, "Binding "+created.Name+" created: the engine asks the broker for credentials now.")
}
