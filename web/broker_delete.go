package web

import (
	"github.com/labstack/echo/v4"
)

// brokerDelete deregisters a broker; the catalog refuses while instances
// of its plans exist.
func (s *Server) brokerDelete(c echo.Context) error {
	ctx := c.Request().Context()
	b, err := s.store.GetBroker(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	if err := s.store.DeleteBroker(ctx, b.ID); err != nil {
		return err
	}
	return redirect(c, "/brokers", "Broker "+b.Name+" deregistered.")
}
