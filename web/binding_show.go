package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
)

type bindingView struct {
	Binding  *catalog.Binding
	Instance *catalog.Instance
	// Credentials are set only after an explicit reveal.
	Credentials []credential
}

type credential struct {
	Key, Value string
}

func (s *Server) bindingShow(c echo.Context) error {
	v, err := s.bindingView(c, c.Param("id"))
	if err != nil {
		return err
	}
	return s.page(c, http.StatusOK, "binding", v.Binding.Name, "bindings", v)
}

func (s *Server) bindingView(c echo.Context, id string) (*bindingView, error) {
	ctx := c.Request().Context()
	b, err := s.store.GetBinding(ctx, id)
	if err != nil {
		return nil, err
	}
	v := &bindingView{Binding: b}
	if v.Instance, err = s.store.InstanceOf(ctx, b); err != nil && err != catalog.ErrNotFound {
		return nil, err
	}
	return v, nil
}

type bindingListView struct {
	Bindings []*catalog.Binding
}

func (s *Server) bindingList(c echo.Context) error {
	l, err := s.store.ListBindings(c.Request().Context(), catalog.ListOptions{})
	if err != nil {
		return err
	}
	return s.page(c, http.StatusOK, "bindings", "Bindings", "bindings", bindingListView{Bindings: l.Items})
}
