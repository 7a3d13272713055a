package restapi

import (
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
)

// tokenRequest is the body of POST /tokens.
type tokenRequest struct {
	Name       string   `json:"name,omitempty"`
	Role       string   `json:"role"`
	Namespaces []string `json:"namespaces,omitempty"`
	// ExpiresAt is parsed by the handler, not the decoder, so that a time
	// the decoder refuses (an offset of +99:00, 31 February) is refused
	// naming the field.
	ExpiresAt *string `json:"expiresAt,omitempty"`
}

// catalogRequest is the request as the catalog takes it.
func (r *tokenRequest) catalogRequest() (catalog.TokenRequest, error) {
	out := catalog.TokenRequest{Name: r.Name, Role: r.Role, Namespaces: r.Namespaces}
	if r.ExpiresAt != nil {
		t, err := time.Parse(time.RFC3339, *r.ExpiresAt)
		if err != nil {
			return out, &APIError{Status: http.StatusBadRequest, Code: "invalid", Field: "expiresAt",
				Message: fmt.Sprintf("The expiry time must be an RFC 3339 date and time, like 2030-01-31T12:00:00Z: %v.", err)}
		}
		out.ExpiresAt = &t
	}
	return out, nil
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
	treq, err := req.catalogRequest()
	if err != nil {
		return err
	}
	tok, rec, err := s.store.IssueToken(ctx(c), treq)
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
