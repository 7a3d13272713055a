package web

import (
	"github.com/labstack/echo/v4"
)

// instanceDelete marks an instance for deletion; the engine deprovisions
// it, and the page shows it going.
func (s *Server) instanceDelete(c echo.Context) error {
	in, err := s.store.DeleteInstance(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return redirect(c, "/instances", "Instance "+in.Name+" is being deleted.")
}
