package web

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
)

// bindingReveal shows a binding's credentials, on an explicit request
// (a POST, with the CSRF token) of a role allowed to read them, in a
// namespace the session may see. They are sent as text, never in an
// attribute, and never cached.
func (s *Server) bindingReveal(c echo.Context) error {
	ctx := c.Request().Context()
	v, err := s.bindingView(c, c.Param("id"))
	if err != nil {
		return err
	}
	creds, err := s.store.Credentials(ctx, v.Binding.ID)
	if errors.Is(err, catalog.ErrNoCredentials) {
		return echo.NewHTTPError(http.StatusConflict, "The binding has no credentials yet: wait until it is Ready.")
	}
	if err != nil {
		return err
	}
	for k, val := range creds {
		text, ok := val.(string)
		if !ok {
			raw, _ := json.Marshal(val)
			text = string(raw)
		}
		v.Credentials = append(v.Credentials, credential{Key: k, Value: text})
	}
	slices.SortFunc(v.Credentials, func(a, b credential) int { return strings.Compare(a.Key, b.Key) })
	c.Response().Header().Set("Cache-Control", "no-store")
	if c.Request().Header.Get("HX-Request") != "" {
		return s.fragment(c, http.StatusOK, "binding", "credentials", v)
	}
	return s.page(c, http.StatusOK, "binding", v.Binding.Name, "bindings", v)
}
