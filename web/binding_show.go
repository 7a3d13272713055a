package web

import (
	"errors"
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

// bindingView reads a binding the session may see, with its instance.
func (s *Server) bindingView(c echo.Context, id string) (*bindingView, error) {
	b, err := s.binding(c, id)
	if err != nil {
		return nil, err
	}
	v := &bindingView{Binding: b}
	if v.Instance, err = s.store.InstanceOf(c.Request().Context(), b); err != nil && !errors.Is(err, catalog.ErrNotFound) {
		return nil, err
	}
	return v, nil
}

type bindingListView struct {
	Bindings []*catalog.Binding
	Pager    pager
}

// bindingListData reads the page of bindings the request asks for, among
// those the session may see.
func (s *Server) bindingListData(c echo.Context) (bindingListView, error) {
	q, err := readListQuery(c)
	if err != nil {
		return bindingListView{}, err
	}
	l, err := s.store.ListBindings(c.Request().Context(), q.options(c))
	if err != nil {
		return bindingListView{}, err
	}
	return bindingListView{Bindings: l.Items, Pager: newPager(c, q, "/bindings", "/live/bindings", l.Continue)}, nil
}

func (s *Server) bindingList(c echo.Context) error {
	v, err := s.bindingListData(c)
	if err != nil {
		return err
	}
	return s.page(c, http.StatusOK, "bindings", "Bindings", "bindings", v)
}
