package restapi

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
)

// tokenRequest is the body of POST /tokens.
type tokenRequest struct {
	Name       string     `json:"name,omitempty"`
	Role       string     `json:"role"`
	Namespaces []string   `json:"namespaces,omitempty"`
	ExpiresAt  *time.Time `json:"expiresAt,omitempty"`
}

// createdToken is the answer to POST /tokens: the record and, this once,
// the token itself.
type createdToken struct {
	*catalog.Token
	Secret string `json:"token"`
}

func (s *Server) createToken(c echo.Context) error {
	var req tokenRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	tok, rec, err := s.store.IssueToken(ctx(c), catalog.TokenRequest(req))
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusCreated, createdToken{Token: rec, Secret: tok})
}

func (s *Server) listTokens(c echo.Context) error {
	l, err := s.store.ListTokens(ctx(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"items": l})
}

func (s *Server) revokeToken(c echo.Context) error {
	if err := s.store.RevokeToken(ctx(c), c.Param("id")); err != nil {
		return err
	}
	// Every server hears of the removal; this one need not wait to.
	s.tokens.Forget()
	return c.NoContent(http.StatusNoContent)
}
