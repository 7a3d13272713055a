package web

import (
	"github.com/labstack/echo/v4"
)

// bindingDelete marks a binding for deletion; the engine unbinds it.
func (s *Server) bindingDelete(c echo.Context) error {
	b, err := s.store.DeleteBinding(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return redirect(c, "/bindings", "Binding "+b.Name+" is being deleted.")
}
