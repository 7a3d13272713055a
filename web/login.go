package web

import (
	"errors"
	"net/http"
	"strings"
	"unicode"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/web/session"
)

// maxNext bounds a post-sign-in destination, in bytes: the longest of
// this site's pages with a query is far shorter.
const maxNext = 2 << 10

type loginView struct {
	Next  string
	Error string
}

// safeNext keeps a post-sign-in destination on this site: a path, with
// no control character and no backslash anywhere. Browsers drop tabs and
// newlines from URLs and read a backslash as a slash, so "/\t/host" and
// "/\\host" lead to another site; the query string that carries next is
// decoded once already, so an escaped "%09" stays a harmless path. One
// longer than maxNext is not a page of this site, and would make a
// Location header that proxies refuse: it goes to "/" too.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || len(next) > maxNext {
		return "/"
	}
	for _, r := range next {
		if r == '\\' || unicode.IsControl(r) {
			return "/"
		}
	}
	return next
}

func (s *Server) loginForm(c echo.Context) error {
	return s.page(c, http.StatusOK, "login", "Sign in", "", loginView{Next: safeNext(c.QueryParam("next"))})
}

// login exchanges an API token for a session. The token goes no further
// than this handler: the browser gets a session id.
func (s *Server) login(c echo.Context) error {
	token := strings.TrimSpace(c.FormValue("token"))
	next := safeNext(c.FormValue("next"))
	if problems := inputProblems(c); problems != nil {
		msg := problems["token"]
		if msg == "" {
			return s.refuseProblems(c)
		}
		return s.page(c, http.StatusBadRequest, "login", "Sign in", "", loginView{Next: "/", Error: msg})
	}
	id, _, err := s.store.CreateSession(c.Request().Context(), token, SessionTTL)
	if errors.Is(err, catalog.ErrBadToken) {
		msg := "This token is not valid. Create one with: bindery token create --role viewer|developer|admin"
		if token == "" {
			msg = "required"
		}
		return s.page(c, http.StatusUnauthorized, "login", "Sign in", "", loginView{Next: next, Error: msg})
	}
	if err != nil {
		return err
	}
	if old := session.ID(c.Request()); old != "" {
		_ = s.store.DeleteSession(c.Request().Context(), old)
	}
	session.Set(c.Response(), c.Request(), id, SessionTTL)
	return c.Redirect(http.StatusSeeOther, next)
}

func (s *Server) logout(c echo.Context) error {
	if id := session.ID(c.Request()); id != "" {
		if err := s.store.DeleteSession(c.Request().Context(), id); err != nil {
			return err
		}
	}
	session.Clear(c.Response(), c.Request())
	return c.Redirect(http.StatusSeeOther, "/login")
}
