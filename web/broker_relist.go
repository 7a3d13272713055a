package web

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// brokerRelist fetches a broker's catalogue now; the broker's status says
// how it went.
func (s *Server) brokerRelist(c echo.Context) error {
	ctx := c.Request().Context()
	b, err := s.broker(c)
	if err != nil {
		return err
	}
	if msg := brokerRefusal(c, b.Namespace); msg != "" {
		return s.renderError(c, http.StatusForbidden, msg)
	}
	synced, err := s.store.Relist(ctx, b.ID)
	if synced == nil && err != nil {
		return err
	}
	return redirect(c, "/brokers", "Catalogue of "+b.Name+" fetched again; its status says how it went.")
}
