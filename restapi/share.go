package restapi

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/internal/share"
)

// DefaultMaxInflightPerToken is how many requests one API token may have
// served at once unless set otherwise (share.DefaultMax).
const DefaultMaxInflightPerToken = share.DefaultMax

// serveShared runs next as one of the token's requests served at once
// (internal/share), or answers 429 when the token has its share served
// and waiting.
func (s *Server) serveShared(c echo.Context, token string, next echo.HandlerFunc) error {
	release := s.share.Acquire(c.Request().Context(), token)
	if release == nil {
		c.Response().Header().Set("Retry-After", "1")
		return apiError(http.StatusTooManyRequests, "too_many_requests",
			"This token has %s requests being served and %s waiting, the most one token may have; send the next once one is answered.",
			strconv.Itoa(s.share.Max()), strconv.Itoa(share.WaitingPerSlot*s.share.Max()))
	}
	defer release()
	return next(c)
}
