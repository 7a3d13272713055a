package web

import (
	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
)

// liveBindings keeps a page of the bindings list current.
func (s *Server) liveBindings(c echo.Context) error {
	q, err := readListQuery(c)
	if err != nil {
		return err
	}
	return s.live(c, listChanges(c, catalog.KindBinding, q), func() ([]sseEvent, error) {
		v, err := s.bindingListData(c)
		if err != nil {
			return nil, err
		}
		list, err := s.renderString(c, "bindings", "binding-list", v)
		return []sseEvent{{"list", list}}, err
	})
}
