package web

import (
	"bytes"
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
	"unicode"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/message"
	"github.com/bindery-dev/bindery/web/csrf"
)

//go:embed templates/*.html
var templateFiles embed.FS

// pages are the templates, one set per page (the layout, the shared
// partials and the page), parsed once at start.
type pages map[string]*template.Template

var funcs = template.FuncMap{
	"since": since,
	// when is a time as people read it (the browser shows it in their
	// own time zone).
	"when":       func(t time.Time) string { return t.UTC().Format("2 Jan 2006, 15:04:05 UTC") },
	"stamp":      func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"classTitle": classTitle,
	"reason":     reasonSentence,
	"planTitle":  planTitle,
	"ready":      readyOf,
	"join":       strings.Join,
	// scopeQuery is the query of a broker's, class's or plan's address in
	// namespace ns ("" for the cluster's).
	"scopeQuery": scopedQuery,
	"clip":       clip,
	"plural":     plural,
	// take is at most the first n of a list.
	"take": func(n int, l []string) []string { return l[:min(n, len(l))] },
}

// clip cuts s to at most n characters, on a character boundary, with an
// ellipsis when it cut: broker text can be long.
func clip(n int, s string) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return strings.TrimRightFunc(string(r[:n-1]), unicode.IsSpace) + "…"
}

// since says how long ago t was, as the page first shows it; app.js keeps
// it current (the same words).
func since(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := time.Since(t)
	switch {
	case d < 5*time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%d s ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h ago", int(d.Hours()))
	case d < 30*24*time.Hour:
		return fmt.Sprintf("%d days ago", int(d.Hours()/24))
	}
	return t.UTC().Format("2006-01-02")
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
	Flash      *flash
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

// renderString renders one named template of a page's set to a string.
func (s *Server) renderString(c echo.Context, page, name string, data any) (string, error) {
	var buf bytes.Buffer
	if err := s.pages[page].ExecuteTemplate(&buf, name, s.data(c, "", "", data)); err != nil {
		return "", err
	}
	return buf.String(), nil
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

// flash is a notice of a finished action, shown once on the next page.
type flash struct {
	Text string
	// Kind styles it: "" for done, "warn" for done but not as hoped,
	// "until-ready" for a creation, whose notice goes once what it made
	// is Ready.
	Kind string
}

// redirect sends the browser on after a successful form, with a notice.
func redirect(c echo.Context, to, done string) error {
	return redirectFlash(c, to, flash{Text: done})
}

// redirectFlash sends the browser on, with a notice of a kind.
func redirectFlash(c echo.Context, to string, f flash) error {
	if f.Text != "" {
		c.SetCookie(&http.Cookie{Name: flashCookie, Value: url.QueryEscape(f.Kind + "\n" + f.Text), Path: "/", MaxAge: 60,
			HttpOnly: true, Secure: c.Request().TLS != nil, SameSite: http.SameSiteStrictMode})
	}
	return c.Redirect(http.StatusSeeOther, to)
}

// takeFlash reads the notice left by redirect, once.
func takeFlash(c echo.Context) *flash {
	ck, err := c.Cookie(flashCookie)
	if err != nil || ck.Value == "" {
		return nil
	}
	c.SetCookie(&http.Cookie{Name: flashCookie, Path: "/", MaxAge: -1, HttpOnly: true,
		Secure: c.Request().TLS != nil, SameSite: http.SameSiteStrictMode})
	msg, err := url.QueryUnescape(ck.Value)
	if err != nil {
		return nil
	}
	kind, text, found := strings.Cut(msg, "\n")
	if !found || text == "" {
		return nil
	}
	switch kind {
	case "", "warn", "until-ready":
		return &flash{Text: text, Kind: kind}
	}
	return nil
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

// readiness is how a status shows: a word and a style, the reason in a
// sentence (message.ReasonOf: never the CamelCase code) and the message.
type readiness struct {
	Word, Class, Reason, Message string
}

// readyOf reads the Ready and Failed conditions of an object.
func readyOf(conds []catalog.Condition) readiness {
	if f, ok := catalog.FindCondition(conds, catalog.ConditionFailed); ok && f.Status == catalog.ConditionTrue {
		return readiness{"Failed", "bad", reasonSentence(f.Reason), f.Message}
	}
	r, ok := catalog.FindCondition(conds, catalog.ConditionReady)
	switch {
	case !ok:
		// The CLI's word for it too.
		return readiness{"Pending", "wait", "The engine has not taken it up yet.", ""}
	case r.Status == catalog.ConditionTrue:
		return readiness{"Ready", "good", reasonSentence(r.Reason), r.Message}
	case r.Reason == "":
		return readiness{"Not ready", "wait", "", r.Message}
	}
	why := message.ReasonOf(r.Reason)
	class := "wait"
	if why.State == message.Blocked || why.State == message.Failed {
		class = "bad"
	}
	return readiness{why.Word, class, why.Sentence, r.Message}
}

// reasonSentence is what a reason code says to people, or "" for none.
func reasonSentence(code string) string {
	if code == "" {
		return ""
	}
	return message.ReasonOf(code).Sentence
}
