package web

import (
	"errors"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
)

// liveBinding keeps a binding's status current. A binding the session may
// not see is not found.
func (s *Server) liveBinding(c echo.Context) error {
	id := c.Param("id")
	if _, err := s.binding(c, id); err != nil {
		return err
	}
	return s.live(c, func(ch change) bool { return ch.ObjectID == id }, func() ([]sseEvent, error) {
		v, err := s.bindingView(c, id)
		if errors.Is(err, catalog.ErrNotFound) {
			return []sseEvent{{"status", `<p class="notice">This binding has been deleted.</p>`}}, nil
		}
		if err != nil {
			return nil, err
		}
		status, err := s.renderString(c, "binding", "binding-status", v)
		if err != nil {
			return nil, err
		}
		return []sseEvent{{"status", status}}, nil
	})
}
