package web

import (
	"errors"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
)

// liveInstance keeps an instance's page current: its status and its
// bindings. An instance the session may not see is not found.
func (s *Server) liveInstance(c echo.Context) error {
	id := c.Param("id")
	if _, err := s.instance(c, id); err != nil {
		return err
	}
	return s.live(c, func(ch change) bool {
		return ch.ObjectID == id || (ch.Kind == catalog.KindBinding && ch.InstanceID == id)
	}, func() ([]sseEvent, error) {
		v, err := s.instanceView(c, id)
		if errors.Is(err, catalog.ErrNotFound) {
			return []sseEvent{{"status", `<p class="notice">This instance has been deleted.</p>`}}, nil
		}
		if err != nil {
			return nil, err
		}
		status, err := s.renderString(c, "instance", "instance-status", v)
		if err != nil {
			return nil, err
		}
		bindings, err := s.renderString(c, "instance", "instance-bindings", v)
		if err != nil {
			return nil, err
		}
		return []sseEvent{{"status", status}, {"bindings", bindings}}, nil
	})
}
