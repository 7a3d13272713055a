package web

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
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
	created, err := s.store.CreateBinding(ctx, b)
	if v, ok := catalog.AsValidation(err); ok {
		view, verr := s.instanceView(c, in.ID, nil, nil)
		if verr != nil {
			return verr
		}
		view.BindingName = b.Name
		msgs := make([]string, len(v.Errors))
		for i, fe := range v.Errors {
			msgs[i] = fe.Message
			if fe.Field != "name" {
				msgs[i] = fe.Field + ": " + fe.Message
			}
		}
		view.BindingError = strings.Join(msgs, "; ")
		return s.page(c, http.StatusBadRequest, "instance", in.Name, "instances", view)
	}
	if err != nil {
		return err
	}
	return redirect(c, "/bindings/"+created.ID, "Binding "+created.Name+" created: the engine asks the broker for credentials now.")
}
