package web

import (
	"embed"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/web/csrf"
)

//go:embed templates/*.html
var templateFiles embed.FS

// pages are the templates, one set per page (the layout, the shared
// partials and the page), parsed once at start.
type pages map[string]*template.Template

var funcs = template.FuncMap{
	"since": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		d := time.Since(t).Round(time.Second)
		switch {
		case d < time.Minute:
			return fmt.Sprintf("%ds ago", int(d.Seconds()))
		case d < time.Hour:
			return fmt.Sprintf("%dm ago", int(d.Minutes()))
		case d < 48*time.Hour:
			return fmt.Sprintf("%dh ago", int(d.Hours()))
		}
		return t.Format("2006-01-02")
	},
	"stamp": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"ready": readyOf,
	"join":  strings.Join,
	"deref": func(b *bool) bool { return b != nil && *b },
	// scopeQuery is the query of a broker's, class's or plan's address in
	// namespace ns ("" for the cluster's).
	"scopeQuery": scopedQuery,
}

func parsePages() (pages, error) {
	names, err := fs.Glob(templateFiles, "templates/*.html")
	if err != nil {
		return nil, err
	}
	p := pages{}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if base == "layout" || base == "partials" {
			continue
		}
		t, err := template.New(base).Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", "templates/partials.html", n)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", n, err)
		}
		p[base] = t
	}
	return p, nil
}

// pageData is what every page template gets.
type pageData struct {
	Title string
	Nav   string
	Role  string
	// Namespaces are those the session is limited to; none means all.
	Namespaces []string
	CSRF       string
	Status     int
	Message    string
	Flash      string
	Data       any
}

// Can reports whether the signed-in role includes want.
func (d pageData) Can(want string) bool { return catalog.Allows(d.Role, want) }

// CanBrokers reports whether the session may register brokers: an admin,
// for all namespaces (the cluster's brokers and any namespace's) or for
// its namespaces' own.
func (d pageData) CanBrokers() bool { return d.Can(catalog.RoleAdmin) }

// CanChangeBroker reports whether the session may relist and deregister a
// broker of scope ns ("" for the cluster's): an admin for all namespaces,
// or for ns (see brokerRefusal, which the server checks).
func (d pageData) CanChangeBroker(ns string) bool {
	if !d.Can(catalog.RoleAdmin) {
		return false
	}
	return len(d.Namespaces) == 0 || (ns != "" && slices.Contains(d.Namespaces, ns))
}

func (p pages) render(w io.Writer, page string, d pageData) error {
	t, ok := p[page]
	if !ok {
		return fmt.Errorf("no page %q", page)
	}
	return t.ExecuteTemplate(w, "layout", d)
}

// page renders a whole page.
func (s *Server) page(c echo.Context, status int, name, title, nav string, data any) error {
	d := s.data(c, title, nav, data)
	d.Status = status
	d.Flash = takeFlash(c)
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(status)
	return s.pages.render(c.Response(), name, d)
}

// fragment renders one named template of a page's set, for htmx swaps
// and live updates.
func (s *Server) fragment(c echo.Context, status int, page, name string, data any) error {
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(status)
	return s.pages[page].ExecuteTemplate(c.Response(), name, s.data(c, "", "", data))
}

func (s *Server) data(c echo.Context, title, nav string, data any) pageData {
	sess, _ := sessionOf(c)
	return pageData{Title: title, Nav: nav, Role: sess.Role, Namespaces: sess.Namespaces, CSRF: csrf.Token(c.Request().Context()),
		Data: data}
}

func (s *Server) renderError(c echo.Context, status int, msg string) error {
	if c.Request().Header.Get("HX-Request") != "" {
		// htmx swaps only 2xx answers by default: say it in an alert the
		// page shows where the swap would have gone.
		c.Response().Header().Set("HX-Retarget", "#errors")
		c.Response().Header().Set("HX-Reswap", "innerHTML")
		return s.fragment(c, status, "error", "alert", msg)
	}
	return s.page(c, status, "error", http.StatusText(status), "", msg)
}

// flashCookie carries the notice of a finished action to the next page.
// A cookie, not the URL: no other site can make a page say something.
const flashCookie = "bindery_flash"

// redirect sends the browser on after a successful form, with a notice.
func redirect(c echo.Context, to, done string) error {
	if done != "" {
		c.SetCookie(&http.Cookie{Name: flashCookie, Value: url.QueryEscape(done), Path: "/", MaxAge: 60,
			HttpOnly: true, Secure: c.Request().TLS != nil, SameSite: http.SameSiteStrictMode})
	}
	return c.Redirect(http.StatusSeeOther, to)
}

// takeFlash reads the notice left by redirect, once.
func takeFlash(c echo.Context) string {
	ck, err := c.Cookie(flashCookie)
	if err != nil || ck.Value == "" {
		return ""
	}
	c.SetCookie(&http.Cookie{Name: flashCookie, Path: "/", MaxAge: -1, HttpOnly: true,
		Secure: c.Request().TLS != nil, SameSite: http.SameSiteStrictMode})
	msg, err := url.QueryUnescape(ck.Value)
	if err != nil {
		return ""
	}
	return msg
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

// problem is the sentence a typed catalog error carries, or fallback for
// one that carries none.
func problem(err error, fallback string) string {
	if msg, ok := catalog.ProblemMessage(err); ok {
		return msg
	}
	return fallback
}

// readiness is how a status shows: a word and a style.
type readiness struct {
	Word, Class, Reason, Message string
}

// readyOf reads the Ready and Failed conditions of an object.
func readyOf(conds []catalog.Condition) readiness {
	if f, ok := catalog.FindCondition(conds, catalog.ConditionFailed); ok && f.Status == catalog.ConditionTrue {
		return readiness{"Failed", "bad", f.Reason, f.Message}
	}
	r, ok := catalog.FindCondition(conds, catalog.ConditionReady)
	switch {
	case !ok:
		return readiness{"Unknown", "wait", "", ""}
	case r.Status == catalog.ConditionTrue:
		return readiness{"Ready", "good", r.Reason, r.Message}
	}
	return readiness{"Not ready", "wait", r.Reason, r.Message}
}
