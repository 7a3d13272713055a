package web

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

func (s *Server) bindingDeleteView(c echo.Context) (deleteView, error) {
	b, err := s.binding(c, c.Param("id"))
	if err != nil {
		return deleteView{}, err
	}
	return deleteView{Kind: "binding", Name: b.Name, Namespace: b.Namespace,
		Action: "/bindings/" + b.ID + "/delete", Back: "/bindings/" + b.ID,
		Consequence: "The broker revokes its credentials: applications that use them lose access."}, nil
}

// bindingDeleteConfirm asks to confirm a binding's deletion.
func (s *Server) bindingDeleteConfirm(c echo.Context) error {
	v, err := s.bindingDeleteView(c)
	if err != nil {
		return err
	}
	return s.confirmPage(c, http.StatusOK, v)
}

// bindingDelete marks a binding for deletion once its name was typed; the
// engine unbinds it.
func (s *Server) bindingDelete(c echo.Context) error {
	v, err := s.bindingDeleteView(c)
	if err != nil {
		return err
	}
	if v.Error = confirmed(c, v.Name); v.Error != "" {
		return s.confirmPage(c, http.StatusBadRequest, v)
	}
	b, err := s.store.DeleteBinding(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return redirect(c, "/bindings", "Binding "+b.Name+" is being deleted.")
}
