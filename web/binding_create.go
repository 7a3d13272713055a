package web

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/web/form"
)

// bindingCreate binds an instance the session may see: a binding named in
// the form, in the instance's namespace.
func (s *Server) bindingCreate(c echo.Context) error {
	ctx := c.Request().Context()
	in, err := s.instance(c, c.Param("id"))
	if err != nil {
		return err
	}
	posted, _ := c.FormParams()
	b := &catalog.Binding{}
	b.Name, b.Namespace = strings.TrimSpace(posted.Get("name")), in.Namespace
	b.Spec.InstanceRef = catalog.ObjectRef{Name: in.Name}
	var schema json.RawMessage
	if _, planRef, refNS := in.Refs(); planRef != nil {
		plan, err := s.store.GetPlanIn(ctx, refNS, planRef.Name)
		switch {
		case err == nil:
			schema = plan.Spec.ServiceBindingCreateParameterSchema
		case !errors.Is(err, catalog.ErrNotFound):
			return err
		}
	}
	errs := map[string]string{}
	problems := inputProblems(c)
	for k, v := range problems {
		errs[k] = v
	}
	var created *catalog.Binding
	if len(errs) == 0 {
		params, perrs, err := form.Parse(schema, bindPrefix, posted)
		if err != nil {
			return err
		}
		for _, e := range perrs {
			errs[e.Field] = e.Message
		}
		if len(errs) == 0 {
			if len(params) > 0 {
				b.Spec.Parameters, _ = json.Marshal(params)
			}
			created, err = s.store.CreateBinding(ctx, b)
			if v, ok := catalog.AsValidation(err); ok {
				for _, fe := range v.Errors {
					errs[strings.Replace(fe.Field, paramsPrefix, bindPrefix, 1)] = catalog.FieldMessage(fe)
				}
			} else if err != nil {
				return err
			}
		}
	}
	if len(errs) == 0 {
		return redirect(c, "/bindings/"+created.ID, "Binding "+created.Name+" created: the engine asks the broker for credentials now.")
	}
	view, err := s.instanceView(c, in.ID, nil, nil)
	if err != nil {
		return err
	}
	if problems["name"] == "" {
		view.BindingName = b.Name
	}
	view.BindingError = errs["name"]
	delete(errs, "name")
	if view.BindFields, err = form.Refill(schema, bindPrefix, posted, errs); err != nil {
		return err
	}
	blankProblems(view.BindFields, problems)
	if other := otherErrors(errs, form.Names(view.BindFields)); len(other) > 0 {
		view.BindingError = strings.TrimPrefix(view.BindingError+"; "+strings.Join(other, "; "), "; ")
	}
	return s.page(c, http.StatusBadRequest, "instance", in.Name, "instances", view)
}
