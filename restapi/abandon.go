package restapi

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"
)

// abandonInstance removes an instance without deprovisioning it, before
// or during its deletion (catalog.AbandonInstance): 202, the engine
// removes it at once.
func (s *Server) abandonInstance(c echo.Context) error {
	found, err := s.instance(c)
	if err != nil {
		return err
	}
	in, err := s.store.AbandonInstance(ctx(c), found.ID, requester(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, in)
}

// abandonBinding removes a binding without unbinding it
// (catalog.AbandonBinding).
func (s *Server) abandonBinding(c echo.Context) error {
	found, err := s.binding(c)
	if err != nil {
		return err
	}
	b, err := s.store.AbandonBinding(ctx(c), found.ID, requester(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, b)
}

// requester names who asks, for the history: the request's API token.
func requester(c echo.Context) string {
	t := tokenOf(c)
	switch {
	case t == nil:
		return ""
	case t.Name != "":
		return fmt.Sprintf("API token %q (%s, role %s)", t.Name, t.ID, t.Role)
	}
	return fmt.Sprintf("API token %s (role %s)", t.ID, t.Role)
}
