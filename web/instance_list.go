package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
)

type instanceListView struct {
	Instances []*catalog.Instance
}

func (s *Server) instanceList(c echo.Context) error {
	l, err := s.store.ListInstances(c.Request().Context(), catalog.ListOptions{})
	if err != nil {
		return err
	}
	return s.page(c, http.StatusOK, "instances", "Instances", "instances", instanceListView{Instances: l.Items})
}

// instanceRows renders the instances table alone, for live updates.
func (s *Server) instanceRows(c echo.Context) (string, error) {
	l, err := s.store.ListInstances(c.Request().Context(), catalog.ListOptions{})
	if err != nil {
		return "", err
	}
	return s.renderString(c, "instances", "instance-rows", instanceListView{Instances: l.Items})
}
